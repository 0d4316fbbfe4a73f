package proxy

import (
	"net/http"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/session"
)

// threadsCacheSize bounds the response ids the gateway remembers: about
// 200 bytes an entry, 13 MB at most.
const threadsCacheSize = 1 << 16

// thread is what the gateway remembers of a response id it gave a client:
// the session of the turn it ended, and the upstream's id that holds the
// turn's context, when that is another (a streamed turn shows its first
// round's id throughout, as clients require, and its context is in its
// last round's).
type thread struct {
	key      string
	upstream string
}

// resolveThread points a request that continues an earlier response by
// its id at the upstream response that holds that turn's context, and
// returns what the gateway remembers of that id (its session key, for
// sessionKey), the zero thread when nothing. The tenant is only worked
// out (a hash of the credential) for such a request.
func (g *Gateway) resolveThread(in *http.Request, req *rewrite.Request) thread {
	if req.Previous == "" {
		return thread{}
	}
	th, _ := g.threads.Get(threadKey(session.Tenant(credential(in)), req.Previous))
	req.PreviousUpstream = th.upstream
	return th
}

// sessionKey returns the store key of a request's session: the client's
// X-Session-ID, or else, for a request that continues an earlier response
// by its id (the Responses API's previous_response_id, whose input holds
// only what is new), the session that response's turn belonged to, or
// else a hash of the conversation's start. chained is that session, as
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
	return session.Key(tenant, explicit, req.System, req.FirstUser)
}

// rememberThread notes that a turn ended with the client seeing response
// id shown, whose context the upstream holds under upstream, so a request
// that continues from it finds the turn's session and context. Only APIs
// that chain by id are noted: a Chat Completions id is never sent back.
func (t *turn) rememberThread(shown, upstream string) {
	if t.req.ChainsByID && shown != "" {
		th := thread{key: t.key}
		if upstream != shown {
			th.upstream = upstream
		}
		t.g.threads.Add(threadKey(t.tenant, shown), th)
	}
}

// threadKey keys a response id within its tenant: an id another tenant
// names leads nowhere.
func threadKey(tenant, id string) string { return tenant + "\x00" + id }
