package proxy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// notFoundError answers a request that names a stored response its
// tenant may not reach, as the upstream answers an id it does not know: a
// 404 (classify), so the client learns nothing of whether the id exists.
type notFoundError struct {
	id string
	// previous: the id is a request's previous_response_id, which the
	// API refuses with a message of its own.
	previous bool
}

func (e *notFoundError) Error() string {
	if e.previous {
		return fmt.Sprintf("Previous response with id '%s' not found.", e.id)
	}
	return fmt.Sprintf("Response with id '%s' not found.", e.id)
}

// code is the error's code, as the API gives it.
func (e *notFoundError) code() string {
	if e.previous {
		return "previous_response_not_found"
	}
	return "not_found"
}

// storedID returns the response id in API path rest when it names a
// stored response or something under it (/responses/{id}, its
// input_items, its cancel), or "".
func storedID(rest string) string {
	id, ok := strings.CutPrefix(rest, "/responses/")
	if !ok {
		return ""
	}
	id, _, _ = strings.Cut(id, "/")
	return id
}

// serveStoredResponse handles a passthrough request that names a stored
// response by its id, and reports whether it answered it: with
// gateway.upstream_key, a 404 for an id the gateway remembers as another
// tenant's turn (foreignThread); a DELETE first deletes the turn's hidden
// rounds (deleteHidden); a GET may be answered with the turn's last round
// (serveRetrieved). Anything else goes on to the upstream.
func (g *Gateway) serveStoredResponse(w http.ResponseWriter, r *http.Request, rest string) bool {
	id := storedID(rest)
	deleted, retrieved := deletedID(r, rest) != "", retrievedID(r, rest) != ""
	oneAccount := g.policy().Gateway.UpstreamKey != ""
	// Without an upstream key only a DELETE or a GET of the id itself
	// needs the thread: the upstream answers the rest for the client's
	// own key, and a lookup is a store round trip.
	if id == "" || !deleted && !retrieved && !oneAccount {
		return false
	}
	ctx := r.Context()
	th, ok := g.lookupThread(ctx, id)
	if !ok {
		return false
	}
	if oneAccount && !ownedBy(th, r) {
		g.writeError(w, r, &notFoundError{id: id})
		return true
	}
	switch {
	case deleted:
		g.deleteHidden(ctx, r, id, th)
	case retrieved:
		return g.serveRetrieved(w, r, id, th)
	}
	return false
}

// foreignThread decides whether a request of another tenant than the one
// whose turn gave out response id continues from the turn's rounds (its
// hidden last round, its pending outputs) or from id alone. With
// gateway.upstream_key the upstream sees one account for every client and
// cannot refuse another client's id, so the gateway does, as the
// upstream refuses an id it does not know (a notFoundError). Without it,
// the client's own credential goes upstream, and the turn's rounds go with
// it only when the upstream lets that credential read id (a token of the
// same principal, rotated since); otherwise the request goes on naming id
// alone, and the upstream's refusal names the id the client knows, not a
// round it was never shown.
func (g *Gateway) foreignThread(ctx context.Context, in *http.Request, id string) (bool, error) {
	if g.policy().Gateway.UpstreamKey != "" {
		return false, &notFoundError{id: id, previous: true}
	}
	return g.mayRead(ctx, in, id), nil
}

// probeTimeout bounds mayRead's retrieve: the transport's wait for a
// first byte is sized for a model's generation (minutes), and the
// client's turn waits behind it.
const probeTimeout = 10 * time.Second

// mayRead reports whether the upstream lets the credential of the client
// request in retrieve response id (GET /responses/{id} answers 200). The
// answer's body is left unread: only its status counts.
func (g *Gateway) mayRead(ctx context.Context, in *http.Request, id string) bool {
	if strings.ContainsAny(id, "/?#") {
		return false // not an id the upstream gave: never a path of its own
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	resp, err := g.responseCall(ctx, in, http.MethodGet, id, "")
	if err != nil {
		g.logger().Log(ctx, failureLevel(ctx), "asking whether another tenant's key may continue a response", "response_id", id, "err", err)
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
