package proxy

import (
	"context"
	"errors"
	"net/http"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/session"
)

// threadsCacheSize bounds the response ids the gateway remembers in
// process: about 200 bytes an entry, 13 MB at most.
const threadsCacheSize = 1 << 16

// resolveThread points a request that continues an earlier response by
// its id at the upstream response that holds that turn's context, and
// returns what the gateway remembers of that id (its session key, for
// sessionKey), the zero thread when nothing. The tenant is only worked
// out (a hash of the credential) for such a request. An id this process
// did not give out is looked up in a shared session store (one that
// implements session.Threads), as another replica, or this one before a
// restart, noted it there.
func (g *Gateway) resolveThread(ctx context.Context, in *http.Request, req *rewrite.Request) session.Thread {
	if req.Previous == "" {
		return session.Thread{}
	}
	key := threadKey(session.Tenant(credential(in)), req.Previous)
	th, ok := g.threads.Get(key)
	if shared, isShared := g.Sessions.(session.Threads); !ok && isShared {
		var err error
		switch th, err = shared.GetThread(ctx, key); {
		case err == nil:
			g.threads.Add(key, th)
		case !errors.Is(err, session.ErrNotFound):
			g.sessionStoreFailed(ctx, "thread_get", key, err)
		}
	}
	req.PreviousUpstream = th.Upstream
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
// that continues from it finds the turn's session and context, on this
// replica and, through a shared session store, on any other. Only APIs
// that chain by id are noted: a Chat Completions id is never sent back.
func (t *turn) rememberThread(ctx context.Context, shown, upstream string) {
	if !t.req.ChainsByID || shown == "" {
		return
	}
	th := session.Thread{Session: t.key}
	if upstream != shown {
		th.Upstream = upstream
	}
	key := threadKey(t.tenant, shown)
	t.g.threads.Add(key, th)
	if shared, ok := t.g.Sessions.(session.Threads); ok {
		if err := shared.PutThread(ctx, key, th); err != nil {
			t.g.sessionStoreFailed(ctx, "thread_put", key, err)
		}
	}
}

// threadKey keys a response id within its tenant (a fixed-length hash, so
// the two parts never run into each other): an id another tenant names
// leads nowhere.
func threadKey(tenant, id string) string { return tenant + ":" + id }
