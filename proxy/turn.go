package proxy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

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
)

// recentKeep bounds the session's list of recently called tools.
const recentKeep = 8

// maxSearchesPerRound bounds the tool_search calls answered in one upstream
// round; the calls past it get a short refusal instead of a search, so a
// model that fans out cannot make one round cost unbounded work.
const maxSearchesPerRound = 4

// turn is one client request handled by the search loop: the catalog, the
// session, the active set and the rounds the gateway answered itself.
type turn struct {
	g    *Gateway
	d    rewrite.Dialect
	in   *http.Request
	snap *policy.Snapshot
	req  *rewrite.Request

	cat     *selector.Catalog
	catKey  string // the catalog cache key
	key     string
	st      session.State
	pinned  map[string]bool   // core, tool_choice and this user turn's calls: never evicted
	reasons map[string]string // why each active tool is there
	policy  policy.Bound      // the catalog's policy decisions, for this turn's message
	shown   []bool            // by catalog position: what the policy shows this message
	learned *selector.Transitions
	habits  *selector.Habits

	searchName string // the gateway's search tool: tool_search, unless a client tool has the name
	searchDef  string
	rounds     []rewrite.Round
	usage      []byte
	id         string
	created    int64
	searches   int
	asked      map[string]int // normalised search queries -> times asked this turn
	misses     int
	dropped    []string // earlier turns' guesses never called, dropped by this user turn

	// found holds the tools the latest round's searches returned; while
	// it is not empty, the next round is a search round's answer and
	// offers only those tools and the kept ones (see offered). searched
	// holds what every search of this turn returned.
	found, searched map[string]bool

	rep *report // accounting for headers, metrics and the decision log; nil in bare tests
}

func (g *Gateway) newTurn(ctx context.Context, in *http.Request, snap *policy.Snapshot, req *rewrite.Request) (*turn, error) {
	t := &turn{
		g: g, d: g.chat, in: in, snap: snap, req: req,
		pinned:  map[string]bool{},
		reasons: map[string]string{},
	}
	if !req.ToolsKnown { // the tool cache keeps only arrays that pass
		if err := checkCatalog(req.Tools); err != nil {
			return nil, err
		}
	}
	// The parse hashed the tools text once for its own cache; that hash
	// keys the compiled catalog too.
	tk := req.ToolsKey
	if tk == 0 {
		tk = g.parsed.keyOf(req.ToolsRaw.Raw)
	}
	key := strconv.FormatUint(tk, 36) + ":" + strconv.FormatUint(snap.Generation(), 36)
	cat, err := g.Catalogs.Get(ctx, key, func() ([]selector.Tool, selector.Config) {
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
		return nil, fmt.Errorf("compiling catalog: %w", err)
	}
	t.cat, t.catKey = cat, key
	rules := g.decisions(key, snap, req.Tools, cat)
	t.policy = rules.table.For(req.LastUser)
	t.shown = rules.shownFor(t.policy)
	t.searchName = searchName(snap, req, g.shapeOf(req))
	t.searchDef = g.searchDefinition(key, t.searchName, len(req.Tools), t.searchLimit(), cat)

	tenant := session.Tenant(credential(in))
	t.key = session.Key(tenant, in.Header.Get("X-Session-ID"), req.System, req.FirstUser)
	t.learned = g.Learned.For(tenant)
	t.habits = g.Learned.Habits(tenant)
	st, err := g.Sessions.Get(ctx, t.key)
	if err != nil && !errors.Is(err, session.ErrNotFound) {
		// The session is a cache: losing it costs a search, not the request.
		g.Metrics.sessionStoreFailed("get")
		g.logger().Warn("loading session", "err", err)
	}
	t.st = st
	t.seedActive(ctx)
	return t, nil
}

// credential is what identifies the tenant: the client's Authorization, or
// the api-key header some clients send instead.
func credential(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		return a
	}
	return r.Header.Get("Api-Key")
}

// isVisible applies the policy (deny, allow, risk gating) to one of the
// client's tools; names the client did not send are never visible.
func (t *turn) isVisible(name string) bool { return t.policy.Visible(name) }

func (t *turn) isActive(name string) bool { return t.reasons[name] != "" }

// own returns name as a string the session may keep: the catalog table's
// copy for one of the client's tools, a clone for any other. Names read
// from a request or a response alias its body, and the session (and the
// learned transitions) outlive both: one kept name held the whole body,
// history and all, for as long as the session lived.
func (t *turn) own(name string) string {
	if s, ok := t.policy.Own(name); ok {
		return s
	}
	return strings.Clone(name)
}

func (t *turn) join(name, reason string) {
	name, ok := t.policy.VisibleName(name) // the table's copy: see own
	if !ok {
		return
	}
	if t.st.Join(name) && (reason == reasonPreselect || reason == reasonFollowUp || reason == reasonExplore) {
		t.st.Guess(name)
	}
	// A retried turn finds its preselected tools already in the session;
	// they keep the reason they joined for.
	retried := t.reasons[name] == reasonSession && (reason == reasonPreselect || reason == reasonExplore || reason == reasonFollowUp)
	if t.reasons[name] == "" || retried || reason == reasonCore || reason == reasonChoice || reason == reasonHistory {
		t.reasons[name] = reason
	}
	// Core, the tool_choice target and what this user turn has called are
	// never evicted. Tools called in earlier user turns are active too, but
	// evictable, least recently used first: pinned, a long conversation's
	// history would fill max_active by itself and squeeze out every tool a
	// new request needs.
	if reason == reasonCore || reason == reasonChoice || reason == reasonHistory && slices.Contains(t.req.TurnCalled, name) {
		t.pinned[name] = true
	}
}

// seedActive builds the active set before the first upstream call: core,
// the tool_choice target (or the tools its allowed_tools names), tools
// called in the history (the history is the truth, whatever the session
// remembers), the session's tools and, in hybrid and preselect modes, the
// tools preselected for a user turn or the follow-up tools after its first
// tool result (later results leave the array as it is: a provider's prompt
// cache serves the conversation only while the tools before it stay the
// same). A new user turn first drops the session's guesses that were
// never called.
func (t *turn) seedActive(ctx context.Context) {
	fp := t.fingerprint()
	if t.req.UserTurn && t.st.Turn != fp {
		// A new user turn: the earlier turns' guesses that were never
		// called go (a retry of the same turn keeps them).
		t.dropped = t.st.DropGuesses()
	}
	for _, name := range t.policy.Core() {
		t.join(name, reasonCore)
	}
	if t.req.ToolChoice != "" {
		t.join(t.req.ToolChoice, reasonChoice)
	}
	for _, n := range t.req.Allowed {
		t.join(n, reasonChoice)
	}
	for _, n := range t.req.Called {
		t.join(n, reasonHistory)
		t.st.Touch(t.own(n), recentKeep)
	}
	for _, n := range t.req.CalledTail {
		t.st.Touch(t.own(n), recentKeep)
	}
	for _, n := range slices.Clone(t.st.Active) {
		t.join(n, reasonSession)
	}
	g := t.snap.Gateway
	if g.Mode == policy.ModeHybrid || g.Mode == policy.ModePreselect {
		t.observe(fp)
		// How many: the policy's values, widened for a large catalog
		// (gateway.scale_with_catalog).
		pre, follow := t.snap.PreselectFor(len(t.req.Tools)), t.snap.FollowUpFor(len(t.req.Tools))
		switch {
		case t.req.UserTurn && pre > 0:
			t.preselect(ctx, fp, pre, g.Mode == policy.ModePreselect && g.Explore, reasonPreselect, nil)
		case !t.req.UserTurn && len(t.req.CalledTail) > 0 && t.req.TurnSteps == 1 && follow > 0:
			// Ranked like the user turn, with the call just made feeding
			// the transition, focus and recency signals.
			t.preselect(ctx, fp, follow, false, reasonFollowUp, t.req.TurnCalled)
		}
	}
	t.bound()
}

// observe teaches the tenant's habits what the turn's latest step called
// (the tools it had not called before), by the words of the user's
// request; the turn's first step also counts the turn. A retried request
// (the same fingerprint fp) is not counted again. seedActive calls it
// only in the modes that preselect, the only ones that use what it learns.
func (t *turn) observe(fp string) {
	if t.req.UserTurn || t.req.TurnSteps == 0 || t.req.LastUser == "" || t.st.Observed == fp ||
		t.snap.Search.Weights.Habit <= 0 {
		return
	}
	var called []string
	for _, n := range t.req.TailNew {
		if name, ok := t.policy.Own(n); ok {
			called = append(called, name)
		}
	}
	t.cat.Observe(t.habits, t.req.LastUser, called, t.req.TurnSteps == 1)
	t.st.Observed = fp
}

// preselect joins the n best tools for the conversation that are not
// active yet. A retry of the same turn (same catalog, policy and
// conversation) is offered the tools the first attempt was, without
// ranking again: the upstream's prompt cache keeps its prefix, and the
// active set does not grow by another n tools each time the client retries.
// fp is the turn's fingerprint, which seedActive has already taken.
func (t *turn) preselect(ctx context.Context, fp string, n int, explore bool, reason string, done []string) {
	if t.st.Turn == fp {
		for _, name := range t.st.Preselected {
			t.join(name, reason)
		}
		if t.st.Explored != "" {
			t.join(t.st.Explored, reasonExplore)
		}
		return
	}
	limit := n
	if explore {
		limit = n - 1 + exploreWidth
	}
	q := t.query("", limit)
	q.Done = done
	q.Habits = t.habits
	res, err := t.cat.Preselect(ctx, t.req.Recent, limit, q)
	if err != nil {
		t.g.logger().Warn("preselecting tools", "err", err)
		return
	}
	items, explored := res.Items, ""
	if reason == reasonFollowUp && res.Confidence < followUpMinConfidence {
		items = nil
	}
	if explore && len(items) > n {
		explored = items[n-1+t.exploreDraw(len(items)-(n-1))].Name
		items = items[:n-1]
	}
	picked := make([]string, 0, len(items))
	for _, it := range items {
		t.join(it.Name, reason)
		picked = append(picked, it.Name)
	}
	if explored != "" {
		t.join(explored, reasonExplore)
	}
	t.st.Turn, t.st.Preselected, t.st.Explored = fp, picked, explored
}

// fingerprint identifies a turn: the compiled catalog (tools and
// policy generation), the conversation's length and its recent texts.
func (t *turn) fingerprint() string {
	h := fnv.New64a()
	h.Write([]byte(t.catKey))
	h.Write([]byte{0, byte(t.req.Messages), byte(t.req.Messages >> 8), byte(t.req.Messages >> 16)})
	for _, s := range t.req.Recent {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// followUpMinConfidence is the ranking confidence under which a turn's
// follow-ups are not sent. Follow-ups are ranked for what the request
// still asks once the call just made is discounted; below this the best
// candidate covers almost none of it and barely leads the rest, so the
// follow-ups are a draw from noise that rides along in every later call
// of the turn. In the name-query episodes (selector/README.md, round 20)
// no follow-up under it was ever called: input tokens 0.1-0.5 points
// lower, calls and steps unchanged.
const followUpMinConfidence = 0.05

// exploreWidth is how many ranks, from the last preselected slot down, the
// exploration slot draws from.
const exploreWidth = 4

// exploreDraw picks an index below n for the exploration slot. It is a hash
// of the session and the user's latest message, not a random number: a
// retried request gets the same tools (and the upstream's prompt cache its
// prefix), and each new user turn draws again.
func (t *turn) exploreDraw(n int) int {
	h := fnv.New64a()
	h.Write([]byte(t.key))
	if len(t.req.Recent) > 0 {
		h.Write([]byte(t.req.Recent[len(t.req.Recent)-1]))
	}
	return int(h.Sum64() % uint64(n))
}

// query builds a selector query that skips what is hidden or already
// active; a search query (text not "") skips fewer when search rounds
// offer only what they find (see skipped).
func (t *turn) query(text string, limit int) selector.Query {
	return selector.Query{
		Text:    text,
		Limit:   limit,
		Skip:    t.skipped(text != ""),
		Focus:   t.st.Focus,
		Last:    t.st.Last,
		Recent:  t.st.Recent,
		Learned: t.learned,
	}
}

// skipped returns what a ranking must not return, by catalog position:
// the tools the policy hides from this message, and those already active,
// but for what a search may return again (see searchable). It is a
// snapshot: callers rank right away.
func (t *turn) skipped(search bool) func(int) bool {
	skip := make([]bool, len(t.shown))
	for p, shown := range t.shown {
		skip[p] = !shown
	}
	for name, reason := range t.reasons {
		if reason == "" || search && t.searchable(name) {
			continue
		}
		if p, ok := t.cat.Position(name); ok {
			skip[p] = true
		}
	}
	return func(p int) bool { return skip[p] }
}

// kept reports whether a tool with this reason is offered in every round:
// the policy's core tools, the tool_choice target and the tools the
// conversation has called. The rest (preselected, follow-up, discovered,
// the session's) are guesses.
func kept(reason string) bool {
	return reason == reasonCore || reason == reasonChoice || reason == reasonHistory
}

// offered reports whether the next round's tools include the active tool
// name. A round that answers the model's searches offers the tools they
// found and the kept ones, not the turn's other guesses: the model has just
// said, by searching, that none of them fits the step at hand, and each
// one costs its tokens in every round it rides along. They are still
// active and come back with the client's next request, when the next step
// may need them. Measured on the demo's episodes (selector/README.md,
// round 18): about three points more input tokens saved at the same
// upstream calls and steps.
func (t *turn) offered(name string) bool {
	if !t.isActive(name) {
		return false
	}
	return len(t.found) == 0 || !t.trimsSearchRounds() || t.found[name] || kept(t.reasons[name])
}

// searchable reports whether a search may return the tool name: one not
// active yet, or, where a search round offers only what it finds, a guess
// (see search). Never a kept tool, which every round offers, nor one an
// earlier search of this turn returned, which the model had in hand when
// it searched again.
func (t *turn) searchable(name string) bool {
	reason := t.reasons[name]
	return reason == "" || t.trimsSearchRounds() && !kept(reason) && !t.searched[name]
}

// trimsSearchRounds reports whether a round answering a search offers only
// what it found (gateway.search_round: found, the default).
func (t *turn) trimsSearchRounds() bool { return t.snap.Gateway.SearchRound != policy.SearchRoundAll }

// bound keeps the active set within max_active. Tools from earlier turns
// go first: those not used recently, oldest first, then the least recently
// used; then this turn's own picks (preselected, follow-up, explored,
// discovered), oldest first. Pinned tools stay.
func (t *turn) bound() {
	max := t.snap.Gateway.MaxActive
	if max <= 0 {
		return
	}
	excess := t.count() - max
	if excess <= 0 {
		return
	}
	evictable := func(n string) bool { return !t.pinned[n] && t.isActive(n) }
	// This turn's own picks answer the request at hand: they go last.
	earlier := func(n string) bool {
		switch t.reasons[n] {
		case reasonPreselect, reasonExplore, reasonFollowUp, reasonDiscovered:
			return false
		}
		return true
	}
	victims := make([]string, 0, excess)
	take := func(names []string, ok func(string) bool) {
		for _, n := range names {
			if len(victims) < excess && evictable(n) && ok(n) && !slices.Contains(victims, n) {
				victims = append(victims, n)
			}
		}
	}
	take(t.st.Active, func(n string) bool { return earlier(n) && !slices.Contains(t.st.Recent, n) })
	take(t.st.Recent, earlier)
	take(t.st.Active, func(string) bool { return true })
	for _, n := range victims {
		delete(t.reasons, n)
	}
	t.st.Remove(victims)
}

func (t *turn) count() int {
	n := 0
	for _, name := range t.st.Active {
		if t.isActive(name) {
			n++
		}
	}
	return n
}

// tools returns the upstream tools array: tool_search first (unless
// withSearch is false), then the offered tools in the order they joined;
// pos holds each item's position in the client's tools (-1 for
// tool_search), by which the round's tokens are counted.
func (t *turn) tools(withSearch bool) (raws []string, pos []int) {
	raws = make([]string, 0, len(t.st.Active)+1)
	pos = make([]int, 0, len(t.st.Active)+1)
	if withSearch {
		raws, pos = append(raws, t.searchDef), append(pos, -1)
	}
	for _, n := range t.st.Active {
		if i, ok := t.policy.Position(n); ok && t.offered(n) {
			raws, pos = append(raws, t.req.Tools[i].Raw), append(pos, i)
		}
	}
	return raws, pos
}

// activeNames lists the active tools in upstream order.
func (t *turn) activeNames() []string {
	var out []string
	for _, n := range t.st.Active {
		if t.isActive(n) {
			out = append(out, n)
		}
	}
	return out
}

// withSearch reports whether round i offers tool_search: never in preselect
// mode, and not in the last round the bound allows.
func (t *turn) withSearch(round int) bool {
	if t.snap.Gateway.Mode == policy.ModePreselect {
		return false
	}
	return round < t.maxRounds()
}

// searchLimit is how many tools a search returns when the model does not
// say: search.limit, widened for a large catalog.
func (t *turn) searchLimit() int {
	if n := t.snap.SearchLimitFor(len(t.req.Tools)); n > 0 {
		return min(n, maxSearchLimit)
	}
	return 5
}

// canContinue reports whether the gateway may answer round i's internal
// calls and ask the upstream again: rounds 0..max_rounds-1 may; the round
// after them (without tool_search) is the last.
func (t *turn) canContinue(round int) bool { return round < t.maxRounds() }

func (t *turn) maxRounds() int {
	if n := t.snap.Gateway.MaxRounds; n > 0 {
		return n
	}
	return 4
}

// internal reports whether the gateway answers call c itself: its search
// tool, and calls of tools the policy hides (which must never reach the
// client).
func (t *turn) internal(c rewrite.Call) bool {
	if c.Name == t.searchName {
		return true
	}
	_, known := t.policy.Position(c.Name)
	return known && !t.isVisible(c.Name)
}

// answer runs the internal calls of a round and returns their results; the
// tools found join the active set. Real calls are recorded for recency.
func (t *turn) answer(ctx context.Context, calls []rewrite.Call) []rewrite.ToolResult {
	var results []rewrite.ToolResult
	clear(t.found)
	searched := 0
	for _, c := range calls {
		switch {
		case c.Name == t.searchName && searched >= maxSearchesPerRound:
			results = append(results, rewrite.ToolResult{CallID: c.ID, Content: fmt.Sprintf(
				"Error: too many searches in one step (at most %d); use the tools already found, or search again in your next step.", maxSearchesPerRound)})
		case c.Name == t.searchName:
			searched++
			results = append(results, rewrite.ToolResult{CallID: c.ID, Content: t.search(ctx, c.Arguments)})
		case t.internal(c):
			results = append(results, rewrite.ToolResult{CallID: c.ID, Content: fmt.Sprintf(
				"Error: the tool %q is not available (blocked by policy). Do not call it again; use another tool or answer without it.", c.Name)})
		default:
			if _, known := t.policy.Position(c.Name); known && !t.isActive(c.Name) {
				t.misses++
			}
			name := t.own(c.Name)
			if t.st.Last != "" {
				t.learned.Observe(t.st.Last, name)
			}
			t.st.Touch(name, recentKeep)
			if e := t.cat.Entity(name); e != "" {
				t.st.Focus = e
			}
		}
	}
	t.bound()
	return results
}

func (t *turn) search(ctx context.Context, raw string) string {
	t.searches++
	a := parseSearchArgs(raw)
	if a.Query == "" {
		return "Error: " + t.searchName + " needs a non-empty \"query\" of English keywords."
	}
	limit := a.Limit
	if limit <= 0 {
		// Asking again what was asked this turn means the tools found did
		// not do: each repeat widens the default by another batch.
		limit = t.searchLimit() * (1 + t.repeats(a.Query))
	}
	limit = min(limit, maxSearchLimit)
	// The round that answers this search offers what it finds, not the
	// turn's other guesses (see offered), so guesses are ranked too: one
	// the model overlooked must be findable. They come on top of the limit,
	// which counts new tools only, so a search finds as many new tools as
	// it did when it skipped every active one.
	guesses := 0
	for name, reason := range t.reasons {
		if reason != "" && t.searchable(name) {
			guesses++
		}
	}
	start := time.Now()
	res, err := t.cat.Search(ctx, t.query(a.Query, limit+guesses))
	if err == nil {
		res.Items = t.newUpTo(res.Items, limit)
	}
	t.noteSearch(a.Query, res, time.Since(start))
	if err != nil {
		t.g.logger().Warn("searching tools", "query", a.Query, "err", err)
		return "Error: the search failed; try again with other keywords."
	}
	res.Items = t.withBundles(a.Query, res.Items)
	for _, it := range res.Items {
		t.join(it.Name, reasonDiscovered)
		if t.found == nil {
			t.found = map[string]bool{}
		}
		if t.searched == nil {
			t.searched = map[string]bool{}
		}
		t.found[it.Name], t.searched[it.Name] = true, true
	}
	return formatResults(a.Query, res, t.snap.Hints)
}

// newUpTo cuts ranked search results after their limit-th tool that is not
// active yet; the active guesses ranked above it stay.
func (t *turn) newUpTo(items []selector.Result, limit int) []selector.Result {
	fresh := 0
	for i, it := range items {
		if fresh == limit {
			return items[:i]
		}
		if !t.isActive(it.Name) {
			fresh++
		}
	}
	return items
}

// repeats counts the earlier searches of this turn with the same query
// (case and spacing aside) and records this one.
func (t *turn) repeats(query string) int {
	if t.asked == nil {
		t.asked = map[string]int{}
	}
	k := strings.Join(strings.Fields(strings.ToLower(query)), " ")
	n := t.asked[k]
	t.asked[k] = n + 1
	return n
}

// save stores the session; a failure costs a later search, so it is logged,
// not returned.
func (t *turn) save(ctx context.Context) {
	if err := t.g.Sessions.Put(ctx, t.key, t.st); err != nil {
		t.g.Metrics.sessionStoreFailed("put")
		t.g.logger().Warn("saving session", "err", err)
	}
}

// identify gives each call of round that came without an id one of its
// own. Some servers send calls without ids (StepFun, some Kimi hosts;
// Gemini's compatible endpoint did), and the gateway's answer to a call
// must name it: a tool message with an empty tool_call_id is refused. The
// client's own calls reach it as the upstream sent them; only the rounds
// the gateway answers carry these ids.
func identify(calls []rewrite.Call, round int) {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_toolgate_%d_%d", round, i)
		}
	}
}

// split separates a round's calls into those the gateway answers and those
// the client gets.
func (t *turn) split(calls []rewrite.Call) (internal, real []rewrite.Call) {
	for _, c := range calls {
		if t.internal(c) {
			internal = append(internal, c)
		} else {
			real = append(real, c)
		}
	}
	return internal, real
}

// withBundles puts the tools of every bundle the query names (by its name,
// as a word) ahead of the ranked results: asking for "browser" tools gets
// the browser bundle whole, up to maxSearchLimit tools in all.
func (t *turn) withBundles(query string, items []selector.Result) []selector.Result {
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-'
	})
	var out []selector.Result
	seen := map[string]bool{}
	for _, b := range t.snap.Bundles() {
		if !slices.Contains(words, strings.ToLower(b.Name)) {
			continue
		}
		for _, tool := range t.req.Tools {
			if len(out) >= maxSearchLimit {
				break
			}
			if b.Match(tool.Name) && !seen[tool.Name] && t.searchable(tool.Name) && t.isVisible(tool.Name) {
				seen[tool.Name] = true
				res := selector.Result{Name: tool.Name, Description: tool.Description, Score: 1}
				if st, ok := t.cat.Tool(tool.Name); ok {
					res.Category, res.Hint = st.Meta.Category, st.Meta.Hint
				}
				out = append(out, res)
			}
		}
	}
	if len(out) == 0 {
		return items
	}
	for _, it := range items {
		if len(out) < maxSearchLimit && !seen[it.Name] {
			out = append(out, it)
		}
	}
	return out
}
