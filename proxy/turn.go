package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// Reasons a tool is in the active set, for the decision log.
const (
	reasonCore       = "core"
	reasonChoice     = "tool_choice"
	reasonHistory    = "history"
	reasonSession    = "session"
	reasonPreselect  = "preselected"
	reasonExplore    = "explored"  // preselect mode's exploration slot
	reasonFollowUp   = "follow-up" // joined after a turn's first tool result, for the next steps
	reasonDiscovered = "discovered"
	// reasonThread: active in the turn a chained request continues from,
	// whose session is gone (see rejoin).
	reasonThread = "thread"
)

// recentKeep bounds the session's list of recently called tools.
const recentKeep = rewrite.LastCalls

// turn is one client request handled by the search loop: the catalog, the
// session, the active set and the rounds the gateway answered itself.
type turn struct {
	g    *Gateway
	d    rewrite.Dialect
	in   *http.Request
	snap *policy.Snapshot
	req  *rewrite.Request

	cat *selector.Catalog // in the request's order
	// catKey keys what depends on the tools and the rules that compile
	// them (the catalog, its tool_search definition); rulesKey keys what
	// depends on the whole policy (its decisions, the preselection), so
	// an edit of core or hints keeps the compiled catalog and still
	// decides afresh. Neither depends on the tools' order: both start
	// with setKey, the key of the array's tools in any order
	// (toolset.go). textKey is the array's text's, in its order, and the
	// policy generation's: it keys what speaks in the array's positions
	// (its token counts, the policy's table).
	catKey, rulesKey string
	setKey, textKey  string
	tenant           string
	key              string
	st               session.State
	loaded           session.State     // st as the store gave it, for save's merge
	pinned           map[string]bool   // core, tool_choice and this user turn's calls: never evicted
	reasons          map[string]string // why each active tool is there
	policy           policy.Bound      // the catalog's policy decisions, for this turn's message
	shown            []bool            // by catalog position: what the policy shows this message
	learned          *selector.Transitions
	habits           *selector.Habits
	// embedWait bounds the turn's waits for query embeddings, all of
	// them together; nil without a remote embedder.
	embedWait *selector.EmbedBudget

	// allShown is set for a request that passes through for its size
	// (smallOrLong) but for a tool the policy hides: every round offers
	// every tool the policy shows, in the client's order, and no search,
	// so only a call of a hidden tool is the gateway's to answer. Such a
	// turn has no guesses or finds to keep: it neither loads nor saves a
	// session.
	allShown bool

	searchName string // the gateway's search tool: tool_search, unless a client tool has the name
	searchDef  string
	rounds     []rewrite.Round
	usage      []byte // every round's, summed
	lastUsage  []byte // the latest round's (clientUsage)
	id         string
	created    int64
	// upstreamIDs are the ids of the rounds' upstream responses, for a
	// request whose responses can be continued (and deleted) by id.
	upstreamIDs []string
	// pending answer the gateway's own calls of the turn's last round,
	// which no round followed (rememberThread keeps them).
	pending []rewrite.ToolResult
	// capped is set when the rounds spent the output cap the client set
	// for its request (reserveOutput): the turn ends as a response the API
	// cut at that cap.
	capped bool
	// promptFilter is the first round's prompt_filter_results (Azure):
	// a whole answer carries it, as a stream's first event does.
	promptFilter string
	searches     int
	asked        map[string]*askedQuery // normalised search queries -> what their searches did this turn
	lastAsked    *askedQuery            // the turn's latest search's
	misses       int                    // calls of client tools the call's tools array did not carry
	dropped      []string               // earlier turns' guesses never called, dropped by this user turn

	// found holds the tools the latest round's searches returned, searched
	// what every search of this turn returned; once a search has returned
	// a tool, each later round offers only what the searches returned and
	// the kept tools (see offered).
	found, searched map[string]bool
	// listed holds what the latest round's search answers named as
	// already in the model's list (newUpTo): the round that answers them
	// keeps them as it keeps what they found (bound, room), or the answer
	// would have told the model of a tool it is not sent.
	listed map[string]bool
	// passed holds what a search returned that the next search, with the
	// same query, passed over: the model said, by asking again at once,
	// that none of it fits, so the rounds after it do not offer it (see
	// offered).
	passed map[string]bool
	// guided holds the categories whose guidance a search answer of this
	// turn has carried (unreadHints).
	guided map[string]bool

	rep *report // accounting for headers, metrics and the decision log; nil in bare tests

	// accepted is set once the upstream answers a round with a 2xx
	// (accept); lesson is what observe found the turn teaches the
	// tenant's habits, held until then, and teachesHabits whether it
	// names tools called, which takes the tenant's record (Learned.Habits)
	// where a lesson without calls only adds to one the tenant has.
	accepted          bool
	lesson            func(*selector.Habits)
	teachesHabits     bool
	taughtTransitions bool // the turn has taught the tenant's transitions (learn)
	saved             bool // the session is saved (save)
}

// newTurn starts a turn of dialect d; chained is what the gateway
// remembers of the response the request continues from (resolveThread):
// its session, and its tools for when that session is gone.
func (g *Gateway) newTurn(ctx context.Context, in *http.Request, snap *policy.Snapshot, req *rewrite.Request, d rewrite.Dialect, chained session.Thread) (*turn, error) {
	t := &turn{
		g: g, d: d, in: in, snap: snap, req: req,
		pinned:  map[string]bool{},
		reasons: map[string]string{},
	}
	if !req.ToolsKnown { // the tool cache keeps only arrays that pass
		if err := checkCatalog(req.Tools); err != nil {
			return nil, err
		}
	}
	if err := req.HistoryErr(); err != nil {
		return nil, err
	}
	// The parse hashed the tools text once for its own cache, with the
	// dialect that read it (serveTurn): that key names the array in its
	// order. What does not depend on the order is kept by the tools' set.
	set := g.sets.of(req, d)
	t.setKey, t.textKey = set.String(), textKey(req.ToolsKey, ":g", snap.Generation())
	if wait := g.countBeside(req, t.textKey, t.setKey); wait != nil {
		defer wait()
	}
	tenant := session.Tenant(credential(in))
	// A tenant that compiles a new catalog every turn waits behind other
	// tenants' first ones (selector's compile queue).
	cat, key, err := g.catalogFor(ctx, tenant, snap, req, set)
	if err != nil {
		return nil, fmt.Errorf("compiling catalog: %w", err)
	}
	if snap.Search.Embeddings.Provider == "openai" && g.Embedder != nil {
		// The query timeout is the turn's, not each search's: a slow
		// endpoint costs a turn that much at most, however many
		// searches its rounds make. The embedder's, read at start-up
		// as the rest of its settings.
		t.embedWait = selector.NewEmbedBudget(selector.QueryTimeoutOf(g.Embedder))
	}
	t.cat, t.catKey, t.rulesKey = cat, key, set.keyWith(":g", snap.Generation())
	rules := g.decisions(t.textKey, t.rulesKey, snap, req.Tools, cat)
	t.policy = rules.table.For(req.LastUser)
	t.shown = rules.shownFor(t.policy)
	t.searchName = searchName(snap, req, g.shapeOf(req))
	if t.searchDef, err = g.searchDefinition(key, t.searchName, len(req.Tools), t.searchLimit(), cat, d); err != nil {
		return nil, err
	}

	t.tenant, t.key = tenant, sessionKey(in, tenant, req, chained.Session)
	t.learned, t.habits = g.Learned.Peek(tenant)
	// serveTurn sends such a request through the loop only when the
	// policy hides one of its tools (passthroughReason).
	if t.allShown = smallOrLong(snap, req); t.allShown {
		return t, nil
	}
	st, err := g.Sessions.Get(ctx, t.key)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		// The session is a cache: losing it costs a search, not the request.
		g.sessionStoreFailed(ctx, "get", t.key, err)
	}
	t.st, t.loaded = st, st.Base()
	if err != nil {
		t.rejoin(chained.Tools)
	}
	t.seedActive(ctx)
	return t, nil
}

// catalogFor returns the catalog of req's tools under snap, in req's
// order, and the key it is cached under: compiled once for the tools'
// set (every order of the same tools shares it), or, should the set's
// catalog not hold req's tools (its key collided with another set's),
// once for the array's text, as every array was before sets.
func (g *Gateway) catalogFor(ctx context.Context, tenant string, snap *policy.Snapshot, req *rewrite.Request, set toolSet) (*selector.Catalog, string, error) {
	key := set.keyWith(":", snap.CatalogKey())
	cat, err := g.Catalogs.GetFor(ctx, tenant, key, func() ([]selector.Tool, selector.Config) {
		tools, cfg := snap.Catalog(req.ToolsWithParams())
		tools = capCatalog(tools)
		switch snap.Search.Embeddings.Provider {
		case "off":
			cfg.Weights.Semantic = 0
		case "openai":
			cfg.Embedder = g.Embedder
		}
		return tools, cfg
	})
	if err != nil {
		return nil, "", err
	}
	// The proxy's own uses of catalog positions (the shown table, the
	// skip sets) are built from this same view, so any order's would
	// agree with each other; the view in req's order keeps the promise of
	// Names and Position, which speak in the array's positions.
	ordered, err := cat.InOrder(req.ToolsKey, namesOf(req.Tools))
	switch {
	case err == nil:
		return ordered, key, nil
	case set.ordered:
		return nil, "", fmt.Errorf("ordering the catalog compiled from the same array: %w", err)
	}
	return g.catalogFor(ctx, tenant, snap, req, toolSet{key: req.ToolsKey, ordered: true})
}

// credential is what identifies the tenant: the client's Authorization, or
// the key header some clients send instead (Azure's Api-Key, Anthropic's
// X-Api-Key). An Authorization's Bearer scheme is spelled "Bearer "
// whatever case the client wrote it in (RFC 9110 makes the scheme
// case-insensitive): "bearer K" is the same tenant, and the same key
// label, as "Bearer K".
func credential(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		token, ok := bearerToken(a)
		if !ok || len(a) == len(bearerScheme)+len(token) && strings.HasPrefix(a, bearerScheme) {
			return a // another scheme, or spelled as credential spells it
		}
		return bearerScheme + token
	}
	if a := r.Header.Get("Api-Key"); a != "" {
		return a
	}
	return r.Header.Get("X-Api-Key")
}

// keyLabel returns a label of a credential that profiles can match and logs
// may show, never the credential: its first dash-separated prefix when that
// is at most 8 characters, and its last four characters ("sk-...wxyz");
// "" for a credential under 12 characters. The format is documented for
// match.key (policy.Request.Key, README.md, tools.yaml): keep them in step.
func keyLabel(cred string) string {
	if token, ok := bearerToken(cred); ok {
		cred = token
	}
	cred = strings.TrimSpace(cred)
	if len(cred) < 12 {
		return ""
	}
	prefix, _, ok := strings.Cut(cred, "-")
	if !ok || len(prefix) > 8 {
		prefix = ""
	} else {
		prefix += "-"
	}
	return prefix + "..." + cred[len(cred)-4:]
}

// bearerScheme is the Bearer authentication scheme as credential spells it.
const bearerScheme = "Bearer "

// bearerToken returns the token of an Authorization value of the Bearer
// scheme, in any case ("bearer", "BEARER") and after any spaces, and
// whether it is of that scheme.
func bearerToken(a string) (string, bool) {
	if len(a) < len(bearerScheme) || !strings.EqualFold(a[:len(bearerScheme)-1], "bearer") || a[len(bearerScheme)-1] != ' ' {
		return "", false
	}
	return strings.TrimLeft(a[len(bearerScheme):], " "), true
}

// isVisible applies the policy (deny, allow, risk gating) to one of the
// client's tools; names the client did not send are never visible.
func (t *turn) isVisible(name string) bool { return t.policy.Visible(name) }

func (t *turn) isActive(name string) bool { return t.reasons[name] != "" }

// touch notes a call of name for recency and returns the name as the
// session may keep it, the catalog table's copy; ok is false, and nothing
// is noted, for a name that is none of the catalog's tools. Names read
// from a request or a response alias its body, which the session (and
// the learned transitions) outlive, and a history or an answer may name
// anything, megabytes long: the session keeps only the catalog's names,
// whose length checkCatalog bounds.
func (t *turn) touch(name string) (string, bool) {
	s, ok := t.policy.Own(name)
	if ok {
		t.st.Touch(s, recentKeep)
	}
	return s, ok
}

// accept notes that the upstream has answered one of the turn's rounds
// with a 2xx: from then on the turn may teach the tenant's transitions
// (learn) and habits (its lesson, held until now) and save its session,
// and its catalog may be kept and embedded (selector.Cache.Accepted). A
// credential the upstream refuses, or a turn that teaches nothing, gets
// no tenant record and makes none more recent, and a refused request's
// catalog is among the first the cache lets go and spends nothing of the
// embeddings endpoint.
func (t *turn) accept() {
	if t.accepted {
		return
	}
	t.accepted = true
	t.g.Catalogs.Accepted(t.catKey)
	if t.lesson != nil {
		if t.teachesHabits {
			t.habits = t.g.Learned.Habits(t.tenant)
		}
		t.lesson(t.habits)
		t.lesson = nil
	}
}

// learn teaches the tenant's transitions that the model called next right
// after last. The turn's first lesson takes the tenant's record (creating
// it, or keeping it as a returning tenant's, see Learned); the later ones
// add to it.
func (t *turn) learn(last, next string) {
	if !t.accepted {
		return // a turn the upstream did not take teaches nothing
	}
	if !t.taughtTransitions {
		t.taughtTransitions = true
		t.learned = t.g.Learned.For(t.tenant)
	}
	t.learned.Observe(last, next)
}

// guessed reports whether a tool with this reason joined as the gateway's
// guess for the turn, which a new user turn drops unless it was used.
func guessed(reason string) bool {
	return reason == reasonPreselect || reason == reasonFollowUp || reason == reasonExplore
}

func (t *turn) join(name, reason string) {
	name, ok := t.policy.VisibleName(name) // the table's copy: see own
	if !ok {
		return
	}
	if t.st.Join(name) && guessed(reason) {
		t.st.Guess(name)
	}
	// A search that finds one of the turn's guesses makes it a tool the
	// model asked for: it stays for the next user turn, as found tools do.
	refound := reason == reasonDiscovered && guessed(t.reasons[name])
	if refound {
		t.st.Unguess(name)
	}
	// A retried turn finds its preselected tools already in the session;
	// they keep the reason they joined for.
	retried := t.reasons[name] == reasonSession && guessed(reason)
	if t.reasons[name] == "" || retried || refound || reason == reasonCore || reason == reasonChoice || reason == reasonHistory {
		t.reasons[name] = reason
	}
	// Core, the tool_choice target and what this user turn has called are
	// never evicted. Tools called in earlier user turns are active too, but
	// evictable, least recently used first: pinned, a long conversation's
	// history would fill max_active by itself and squeeze out every tool a
	// new request needs.
	if reason == reasonCore || reason == reasonChoice || reason == reasonHistory && t.req.CalledInTurn(name) {
		t.pinned[name] = true
	}
}

// addUsage adds a round's usage to the turn's, and keeps it as the latest
// round's when the client's usage counts the context (clientUsage): a
// copy the default, summed usage never reads.
func (t *turn) addUsage(u gjson.Result) {
	t.usage = rewrite.AddUsage(t.usage, u)
	if t.snap.Gateway.Usage == policy.UsageContext {
		t.lastUsage = []byte(u.Raw)
	}
}

// reserveOutput reports whether the turn may ask the upstream for another
// round within the output cap the client set for its request, and caps
// that round at what the rounds so far left of it
// (rewrite.Request.OutputLeft): the API caps the one response the client
// gets, which the gateway's rounds are, so their output counts against
// one cap. When too little is left the turn is capped: it ends there, as
// the API ends a response cut at its cap, and asks no more.
func (t *turn) reserveOutput() bool {
	_, used := rewrite.UsageTokens(gjson.ParseBytes(t.usage))
	left, ok := t.req.OutputRoom(used)
	t.req.OutputLeft, t.capped = left, !ok
	return ok
}

// clientUsage is the usage the client gets for the turn: every round's
// summed, or with gateway.usage context the last round's input counts
// (rewrite.ContextUsage). The turn's own accounting (headers, metrics,
// the decision log) reads t.usage, every round's, either way.
func (t *turn) clientUsage() []byte {
	if t.snap.Gateway.Usage != policy.UsageContext || len(t.rounds) == 0 {
		return t.usage
	}
	return rewrite.ContextUsage(t.usage, t.lastUsage)
}

// save stores the session, merged into what another request of it saved
// since this one loaded it (session.Save); a failure costs a later search,
// so it is logged, not returned. A turn the upstream never answered with a
// 2xx (a refused key, a malformed request, an unreachable upstream) leaves
// the session as it was: what the turn made of the client's request has
// not been accepted by anyone.
//
// A turn saves once, past its request's cancellation: the loops save
// before the client can read the turn's end (a client that sends its next
// turn at once must find this one's state) and defer save for a turn that
// ends any other way.
func (t *turn) save(ctx context.Context) {
	if t.saved || !t.accepted || t.allShown {
		return
	}
	t.saved = true
	ctx = context.WithoutCancel(ctx)
	t.st.Updated = time.Now().UTC()
	// A session outlives catalogs: names the client no longer sends go
	// first when it holds more than it may keep.
	t.st.Bound(func(name string) bool { _, ok := t.policy.Position(name); return ok })
	if err := session.Save(ctx, t.g.Sessions, t.key, t.loaded, t.st, recentKeep); err != nil {
		t.g.sessionStoreFailed(ctx, "put", t.key, err)
	}
}

// storeOpDoing says what a session store operation was doing, for the
// warning when it fails.
func storeOpDoing(op string) string {
	switch op {
	case "get":
		return "loading session"
	case "thread_get":
		return "loading the thread of a previous_response_id"
	case "thread_put":
		return "saving the thread of a response id"
	}
	return "saving session"
}

// sessionStoreFailed counts a failed session store operation and logs it,
// unless the store was unavailable: such a store logs once when it becomes
// unavailable and once when it answers again, where a warning per request
// would flood the log while it is down.
// The warning names the store key (a session's, as the decision log
// does, or a thread's), so an unreadable value can be found and inspected.
func (g *Gateway) sessionStoreFailed(ctx context.Context, op, key string, err error) {
	g.Metrics.sessionStoreFailed(op)
	switch {
	case errors.Is(err, session.ErrUnavailable):
	case strings.HasPrefix(op, "thread_"):
		g.logger().WarnContext(ctx, storeOpDoing(op), "thread", key, "err", err)
	case errors.Is(err, session.ErrCorrupt):
		g.logger().WarnContext(ctx, "the stored session is unreadable; the turn starts it afresh and its save replaces it", "session", key, "err", err)
	default:
		g.logger().WarnContext(ctx, storeOpDoing(op), "session", key, "err", err)
	}
}

// mark sets set[name], making the set on first use: a turn that never
// searches allocates none of its sets.
func mark(set *map[string]bool, name string) {
	if *set == nil {
		*set = map[string]bool{}
	}
	(*set)[name] = true
}

// countBeside starts the token count of a tools array the parse cache did
// not know, most likely a catalog newTurn compiles now, so the count
// (noteClient's) runs beside the compile where it followed it: on a first
// request they are the two largest costs, each tens of milliseconds at 200
// tools. It returns what waits for the count, which must end before the
// turn's tools may be let go (they may alias the request's body), or nil
// when there is nothing to count: a known array's count is cached, and a
// turn of one costs no goroutine and no allocation.
func (g *Gateway) countBeside(req *rewrite.Request, key, set string) (wait func()) {
	if req.ToolsKnown {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = g.tokens.catalog(encodingFor(req.Model), key, set, req.Tools) // noteClient reports its error
	}()
	return func() { <-done }
}
