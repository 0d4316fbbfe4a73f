package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
)

// serveChat handles POST .../chat/completions: the requests worth rewriting
// go through the search loop, the rest upstream unchanged (minus denied
// tools).
func (g *Gateway) serveChat(w http.ResponseWriter, r *http.Request, rest string) {
	base := g.policy()
	body, err := readBody(w, r, base.Gateway.BodyLimit)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	req, err := rewrite.ParseRequest(body)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	snap := base.ForRequest(policy.Request{Model: req.Model, Header: r.Header.Get})
	if d := snap.Gateway.RequestTimeout; d > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if why := passthroughReason(snap, req); why != "" {
		g.forwardChat(w, r, rest, snap, req, why)
		return
	}
	t, err := g.newTurn(r.Context(), r, snap, req)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	if req.Stream {
		g.streamTurn(w, r, rest, t)
	} else {
		g.completeTurn(w, r, rest, t)
	}
}

// passthroughReason says why a request goes upstream without the search
// loop, or "" when the loop pays.
func passthroughReason(snap *policy.Snapshot, req *rewrite.Request) string {
	switch {
	case snap.Gateway.Mode == policy.ModePassthrough:
		return "mode passthrough"
	case len(req.Tools) == 0:
		return "no tools"
	case len(req.Tools) < snap.Gateway.MinTools:
		return "fewer than min_tools"
	case req.N > 1:
		return "n > 1"
	case req.HasFunctions:
		return "legacy functions"
	}
	return ""
}

// forwardChat sends a request upstream as the client wrote it, except that
// tools the policy denies are removed; the response streams back unchanged.
func (g *Gateway) forwardChat(w http.ResponseWriter, r *http.Request, rest string, snap *policy.Snapshot, req *rewrite.Request, why string) {
	body := req.Body
	if len(req.Tools) > 0 {
		kept := make([]string, 0, len(req.Tools))
		decide := snap.Decider(req.LastUser)
		for _, t := range req.Tools {
			if decide(t.Name).Visible {
				kept = append(kept, t.Raw)
			}
		}
		if len(kept) != len(req.Tools) {
			var err error
			if body, err = rewrite.Build(&rewrite.Request{Body: body}, kept, nil); err != nil {
				g.writeError(w, r, err)
				return
			}
		}
	}
	g.logger().Debug("chat passthrough", "reason", why, "tools", len(req.Tools))
	resp, err := g.send(r.Context(), r, sendOptions{rest: rest, body: body, stream: req.Stream, retries: g.retries(snap)})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	defer resp.Body.Close()
	copyEndToEnd(w.Header(), resp.Header, responseSkip...)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if rerr != nil {
			return
		}
	}
}

// fail writes err to the client: an upstream status verbatim, anything else
// through writeError.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *statusError
	if errors.As(err, &se) {
		relayStatus(w, se)
		return
	}
	g.writeError(w, r, err)
}

func (g *Gateway) retries(snap *policy.Snapshot) int { return max(snap.Gateway.Retries, 0) }

// readBody reads the request body up to limit bytes: a declared length over
// the limit is refused before reading, a chunked body is cut at the limit.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = 32 << 20
	}
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes declared, the limit is %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, limit)
		}
		return nil, fmt.Errorf("%w: reading request body: %w", rewrite.ErrBadRequest, err)
	}
	return body, nil
}

// setToolgateHeaders reports what the gateway did, on every rewritten
// response.
func setToolgateHeaders(h http.Header, t *turn) {
	h.Set("X-Toolgate-Tools", strconv.Itoa(len(t.req.Tools))+"->"+strconv.Itoa(len(t.activeNames())+1))
	h.Set("X-Toolgate-Rounds", strconv.Itoa(len(t.rounds)+1))
}
