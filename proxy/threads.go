package proxy

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/session"
)

// resolveThread points a request that continues an earlier response by
// its id at the upstream response that holds that turn's context, and
// returns what the gateway remembers of that id (its session key, for
// sessionKey), the zero thread when nothing. An id this process did not
// give out is looked up in a shared session store (one that implements
// session.Threads), as another replica, or this one before a restart,
// noted it there.
//
// Threads are kept by response id, and a request under another tenant (a
// hash of the credential) than the one that made the turn gets them only
// as far as the upstream would let it continue from the id itself (see
// foreignThread): a credential that rotates (Azure Entra ID and OAuth
// tokens, every hour or so) is a new tenant, and a chain it continues must
// still reach the round that holds its context, but a key of another
// account must learn nothing of the turn's rounds, and with
// gateway.upstream_key every client is one account to the upstream, so
// the gateway refuses another tenant's id itself (a notFoundError).
// The session, the gateway's own state, stays with its tenant, and so do
// the turn's tools the thread keeps for when the session is gone: a
// request under another credential starts a session of its own.
func (g *Gateway) resolveThread(ctx context.Context, in *http.Request, req *rewrite.Request) (session.Thread, error) {
	if req.Previous == "" {
		return session.Thread{}, nil
	}
	th, ok := g.lookupThread(ctx, req.Previous)
	if !ok {
		return session.Thread{}, nil
	}
	if !ownedBy(th, in) {
		may, err := g.foreignThread(ctx, in, req.Previous)
		if err != nil {
			return session.Thread{}, rewrite.WithParam("previous_response_id", err)
		}
		if !may {
			return session.Thread{}, nil
		}
		th.Session, th.Tools = "", nil
	}
	req.PreviousUpstream = th.Upstream
	for _, p := range th.Pending {
		req.PendingOutputs = append(req.PendingOutputs, rewrite.ToolResult{CallID: p.CallID, Content: p.Output})
	}
	return th, nil
}

// ownedBy reports whether th is a turn of the tenant whose credential
// request in carries.
func ownedBy(th session.Thread, in *http.Request) bool {
	return session.InTenant(th.Session, session.Tenant(credential(in)))
}

// lookupThread returns what the gateway remembers of response id: in this
// process, or else in a shared session store.
func (g *Gateway) lookupThread(ctx context.Context, key string) (session.Thread, bool) {
	if th, ok := g.threads.Get(key); ok {
		return th, true
	}
	shared, ok := g.Sessions.(session.Threads)
	if !ok {
		return session.Thread{}, false
	}
	th, err := shared.GetThread(ctx, key)
	switch {
	case err == nil:
		g.threads.Add(key, th)
		return th, true
	case !errors.Is(err, session.ErrNotFound):
		g.sessionStoreFailed(ctx, "thread_get", key, err)
	}
	return session.Thread{}, false
}

// sessionKey returns the store key of a request's session: the client's
// X-Session-ID, or else, for a request that continues an earlier response
// by its id (the Responses API's previous_response_id, whose input holds
// only what is new), the session that response's turn belonged to, or
// else a hash of the conversation's start and its prompt_cache_key (see
// session.Key). chained is that session, as
// resolveThread found it ("" when it did not). A chain whose earlier turns
// the gateway has not seen (another replica answered them, or it
// restarted) starts a session of its own: its input may hold no user
// message, and a hash of the instructions alone would share one session
// among every conversation that has them.
func sessionKey(in *http.Request, tenant string, req *rewrite.Request, chained string) string {
	explicit := in.Header.Get("X-Session-ID")
	if explicit == "" && req.Previous != "" {
		if chained != "" {
			return chained
		}
		explicit = "previous_response_id:" + req.Previous
	}
	return session.Key(tenant, explicit, req.Conversation, req.System, req.FirstUser)
}

// rememberThread notes that a turn ended with the client seeing response
// id shown, whose context the upstream holds under upstream, and with
// calls (the last round's calls of the client's), so a request that
// continues from it finds the turn's session, context and tools, on this
// replica and, through a shared session store, on any other. Only APIs
// that chain by id are noted: a Chat Completions id is never sent back.
//
// Every string is copied: ids and call ids are read in place from the
// upstream's answers, and one kept as it is would keep a whole response
// (its instructions, tools and reasoning) alive as long as the thread.
// The tool names are the catalog table's own (see own), which the
// session holds too.
func (t *turn) rememberThread(ctx context.Context, shown, upstream string, calls []rewrite.Call) {
	if !t.req.ChainsByID || shown == "" {
		return
	}
	th := session.Thread{Session: strings.Clone(t.key), Tools: t.threadTools(calls)}
	if t.rep != nil {
		th.HiddenTokens = t.rep.hiddenBefore + t.rep.hidden
	}
	if upstream != shown {
		th.Upstream = strings.Clone(upstream)
	}
	for _, id := range t.upstreamIDs {
		if id != shown {
			th.Hidden = append(th.Hidden, strings.Clone(id))
		}
	}
	for _, res := range t.pending {
		th.Pending = append(th.Pending, session.Output{CallID: strings.Clone(res.CallID),
			Output: strings.Clone(clipMarked(res.Content, session.MaxPendingOutput))})
	}
	t.g.noteThread(ctx, shown, th)
}

// threadTools lists the tools a request that continues from the turn
// rejoins when its session is gone (rejoin): the active tools, in the
// order they joined, and the client tools of calls, which the request
// answers; not the policy's core tools, which every turn joins. At most
// max_active (and session.MaxThreadTools) of them, the oldest active
// tools going first.
func (t *turn) threadTools(calls []rewrite.Call) []string {
	var out []string
	for _, n := range t.st.Active {
		if t.isActive(n) && t.reasons[n] != reasonCore {
			out = append(out, n)
		}
	}
	for _, c := range calls {
		if n, ok := t.policy.Own(c.Name); ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil
	}
	limit := min(t.snap.Gateway.MaxActive, session.MaxThreadTools)
	if limit <= 0 {
		limit = session.MaxThreadTools
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}

// rejoin makes a chained request's tools active when its session is gone:
// those of the turn it continues from (the thread's), after the policy's
// core tools, as that turn had them.
func (t *turn) rejoin(names []string) {
	if len(names) == 0 {
		return
	}
	for _, name := range t.policy.Core() {
		t.join(name, reasonCore)
	}
	for _, n := range names {
		t.join(n, reasonThread)
	}
}

// noteThread keeps th under key in this process and, when the session
// store is shared, there.
func (g *Gateway) noteThread(ctx context.Context, key string, th session.Thread) {
	g.threads.Add(key, th)
	if shared, ok := g.Sessions.(session.Threads); ok {
		if err := shared.PutThread(ctx, key, th); err != nil {
			g.sessionStoreFailed(ctx, "thread_put", key, err)
		}
	}
}

// noteUpstreamID notes the id of a round's upstream response, for a
// request whose responses can be continued by id (rememberThread).
func (t *turn) noteUpstreamID(id string) {
	if t.req.ChainsByID && id != "" {
		t.upstreamIDs = append(t.upstreamIDs, id)
	}
}

// lostThreadNote ends the upstream's refusal of a request that continues
// from a response id the gateway does not remember, when the refusal is
// the one such a request gets if the id is a streamed turn's that searched.
const lostThreadNote = " (toolgate: this gateway does not remember the response previous_response_id names. " +
	"If the gateway streamed that response and searched for tools during it, the turn's context is in a later " +
	"response that only the gateway which served it knew, and it has restarted since or another replica served " +
	"it: resend the conversation instead of chaining from that id, and give replicas a shared " +
	"sessions.store (redis://...), which keeps these ids.)"

// explainLostThread adds lostThreadNote to err when it is the upstream's
// 400 for a call without its output and req continues from an id the
// gateway does not remember. Where a client forgot an output of its own
// call the note says "if", and the upstream's message names the call.
func (g *Gateway) explainLostThread(in *http.Request, req *rewrite.Request, err error) error {
	var se *statusError
	if req.Previous == "" || !errors.As(err, &se) || se.resp.StatusCode != http.StatusBadRequest ||
		!rewrite.MissingCallOutput(se.body) || g.threads.Contains(req.Previous) {
		return err
	}
	body, ok := rewrite.NoteErrorMessage(se.body, lostThreadNote)
	if !ok {
		return err
	}
	return &statusError{resp: se.resp, body: body}
}
