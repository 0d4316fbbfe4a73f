package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/session"
)

// deletedID returns the response id a client request deletes
// (DELETE /responses/{id}), or "" for any other request.
func deletedID(r *http.Request, rest string) string {
	if r.Method != http.MethodDelete {
		return ""
	}
	return responseID(rest)
}

// responseID returns the id in API path rest when it names one response
// (/responses/{id}), or "": a path with more after the id (its
// input_items) names something else.
func responseID(rest string) string {
	id, ok := strings.CutPrefix(rest, "/responses/")
	if !ok || id == "" || strings.ContainsAny(id, "/?#") {
		return ""
	}
	return id
}

// deleteHidden deletes, before the client's DELETE of response id goes on
// to the upstream, the turn's other responses the upstream stored: the
// search rounds of a whole answer, and a stream's rounds after the first.
// The client never saw their ids, so only the gateway can delete them,
// and a client that deletes what it was shown means the turn's words to
// be gone. Each is deleted with the client's own credential, so a client
// can delete only what its key can, or with the policy's upstream key,
// as every request is, which serveStoredResponse lets only the turn's
// own tenant reach; what fails is logged, and the client's own DELETE
// still goes on and answers for itself.
//
// Once every hidden round is gone, the thread keeps only its session: a
// request that continues from the deleted id then reaches the upstream
// under that id, and its refusal names the id the client knows instead
// of a round it never saw. th is what the gateway remembers of id.
func (g *Gateway) deleteHidden(ctx context.Context, in *http.Request, id string, th session.Thread) {
	if len(th.Hidden) == 0 {
		return
	}
	// A 404 means deleted before only to the turn's own tenant; to
	// another credential it may mean "not yours", and the turn's thread
	// must then stay whole.
	own := ownedBy(th, in)
	key := g.policy().Gateway.UpstreamKey // one account for every round's delete
	gone := true
	for _, hid := range th.Hidden {
		if strings.ContainsAny(hid, "/?#") {
			continue // not an id the upstream gave: never a path of its own
		}
		status, err := g.deleteUpstream(ctx, in, hid, key)
		switch {
		case err != nil:
			gone = false
			g.logger().Log(ctx, failureLevel(ctx), "deleting a hidden round of a deleted response", "response_id", id, "round_id", hid, "err", err)
		case status/100 == 2, status == http.StatusNotFound && own:
			// Deleted, now or before.
		default:
			gone = false
			g.logger().InfoContext(ctx, "deleting a hidden round of a deleted response", "response_id", id, "round_id", hid, "status", status)
		}
	}
	if gone {
		g.noteThread(ctx, id, session.Thread{Session: th.Session})
	}
}

// deleteTimeout bounds each hidden round's delete: the transport's wait
// for a first byte is sized for a model's generation (minutes), and the
// client's own DELETE waits behind these.
const deleteTimeout = 30 * time.Second

// deleteUpstream sends the upstream DELETE /responses/{id} with the
// client request in's headers and credential (or upstream key), and
// returns its status.
func (g *Gateway) deleteUpstream(ctx context.Context, in *http.Request, id, key string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	resp, err := g.responseCall(ctx, in, http.MethodDelete, id, key)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// responseCall sends the upstream method /responses/{id}, without a body,
// with the client request in's headers, query (Azure's api-version) and
// credential (or the policy's upstream key, key), for a response the
// gateway names on the client's behalf. The caller closes the response's
// body.
func (g *Gateway) responseCall(ctx context.Context, in *http.Request, method, id, key string) (*http.Response, error) {
	u := g.upstreamURL("/responses/"+id, &url.URL{RawQuery: in.URL.RawQuery})
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the upstream %s of %s: %w", method, id, err)
	}
	copyEndToEnd(req.Header, in.Header, requestSkip)
	setAuth(req.Header, in, key)
	resp, err := g.transport().RoundTrip(req)
	if err != nil {
		return nil, upstreamErr(ctx, err)
	}
	return resp, nil
}
