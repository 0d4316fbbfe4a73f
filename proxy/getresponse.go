package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/session"
)

// retrievedID returns the id of the response a client request retrieves
// whole (GET /responses/{id}), or "" for any other request. A replay of
// a stream (stream=true) is not one: it passes through.
func retrievedID(r *http.Request, rest string) string {
	if r.Method != http.MethodGet || r.URL.Query().Get("stream") == "true" {
		return ""
	}
	return responseID(rest)
}

// serveRetrieved answers GET /responses/{id} for a turn whose id the
// upstream stores as other than what the client was shown, and reports
// whether it did. A streamed turn that searched shows the id of its
// first round, which the upstream stores as that round: an answer whose
// output is a call of the gateway's tool_search, a tool the client never
// declared. The turn's answer is its last round, which only the gateway
// knows (the thread's Upstream). A turn whose last round ended with the
// gateway's own calls next to the client's (the thread's Pending) shows
// that round without them, under its own id when it is the round shown.
// The last round is fetched with the client's credential and returned
// under the id the client knows, without the gateway's calls. th is what
// the gateway remembers of id. Anything else, or a last round the
// upstream no longer has, passes through as asked.
func (g *Gateway) serveRetrieved(w http.ResponseWriter, in *http.Request, id string, th session.Thread) bool {
	ctx := in.Context()
	round := th.Upstream
	if round == "" {
		round = id
	}
	if round == id && len(th.Pending) == 0 || strings.ContainsAny(round, "/?#") {
		return false
	}
	body, header, err := g.retrieveUpstream(ctx, in, round, g.policy().Gateway.UpstreamKey)
	if err != nil {
		g.logger().Log(ctx, failureLevel(ctx), "retrieving a turn's last round", "response_id", id, "round_id", round, "err", err)
		return false
	}
	if body, err = shownResponse(body, id, th); err != nil {
		g.logger().WarnContext(ctx, "retrieving a turn's last round", "response_id", id, "round_id", round, "err", err)
		return false
	}
	copyEndToEnd(w.Header(), header, responseSkip)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return true
}

// retrieveUpstream returns the upstream's JSON of response id and its
// headers, or an error for any answer but a 200 of JSON.
func (g *Gateway) retrieveUpstream(ctx context.Context, in *http.Request, id, key string) ([]byte, http.Header, error) {
	resp, err := g.responseCall(ctx, in, http.MethodGet, id, key)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil, nil, fmt.Errorf("the upstream answered %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	if err != nil {
		return nil, nil, upstreamErr(ctx, fmt.Errorf("reading the upstream's response %s: %w", id, err))
	}
	if len(body) > maxResponseBody || !gjson.ValidBytes(body) || !gjson.GetBytes(body, "output").IsArray() {
		return nil, nil, fmt.Errorf("the upstream's response %s is not a response object", id)
	}
	return body, resp.Header, nil
}

// shownResponse returns a turn's last round as the client knows its turn:
// under the id it was shown, without the calls the gateway answered
// itself (th.Pending).
func shownResponse(body []byte, id string, th session.Thread) ([]byte, error) {
	var gateway func(callID string) bool
	if len(th.Pending) > 0 {
		gateway = func(callID string) bool {
			return slices.ContainsFunc(th.Pending, func(p session.Output) bool { return p.CallID == callID })
		}
	}
	return rewrite.RetrievedResponse(body, id, gateway)
}
