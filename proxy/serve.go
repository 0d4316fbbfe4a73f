package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// serveTurn handles a turn of dialect d (POST .../chat/completions,
// .../responses, .../messages): the requests worth rewriting go through
// the search loop, the rest upstream unchanged (minus denied tools).
func (g *Gateway) serveTurn(w http.ResponseWriter, r *http.Request, rest string, d rewrite.Dialect, route string) {
	tr := g.track(w, route)
	defer tr.done(r.Context())
	w = tr
	base := g.policy()
	// A request refused before anything is decided (a body too large or
	// not JSON, no room in flight) is counted under the mode it would
	// have had: the policy's now, its profile's once the model is known.
	tr.rep.mode = string(base.Gateway.Mode)
	buf, held, err := g.readBody(w, tr.timedUpload(r), base.Gateway.BodyLimit)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	defer g.inflight.release(held)
	// The route's dialect reads the tools array: its parse, and the key
	// of the array's shape, catalog and tables, are that dialect's.
	parsed := g.parsed.space(route)
	req, err := d.ParseRequest(buf.b, parsed)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	g.parsed.counted(req.ToolsRaw.Raw, req.ToolsKnown)
	if req.ToolsKey == 0 && req.ToolsRaw.Exists() {
		req.ToolsKey = parsed.keyOf(req.ToolsRaw.Raw)
	}
	if req.Detached() {
		g.bodies.put(buf) // nothing holds the body any more
	}
	th, err := g.resolveThread(r.Context(), r, req)
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	tr.rep.hiddenBefore = th.HiddenTokens
	snap := base.ForRequest(policy.Request{Key: keyLabel(credential(r)), Model: req.Model, Header: r.Header.Values})
	tr.rep.mode = string(snap.Gateway.Mode)
	// A whole answer is bounded as a whole, as the SDKs bound it; a stream
	// is bounded by its silences (first_byte, then idle), as the SDKs
	// bound each read: an answer still streaming after the request timeout
	// (a long output, a slow reasoning model) is healthy, and is not cut.
	if d := snap.Gateway.RequestTimeout; d > 0 && !req.Stream {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if err := checkChoice(snap, req); err != nil {
		g.writeError(w, r, err)
		return
	}
	if why := g.passthroughReason(snap, req, d); why != "" {
		tr.passthrough(why)
		g.forward(tr, r, rest, snap, req, d, why)
		return
	}
	t, err := g.newTurn(r.Context(), r, snap, req, d, th)
	if errors.Is(err, selector.ErrEmptyCatalog) {
		// The policy hides every tool of the request: there is nothing
		// to search, and the upstream gets the request without them.
		const why = "policy hides every tool"
		tr.passthrough(why)
		g.forward(tr, r, rest, snap, req, d, why)
		return
	}
	if err != nil {
		g.writeError(w, r, err)
		return
	}
	tr.attach(r.Context(), t)
	// passthroughReason sent on every stream of a dialect that relays
	// neither kind.
	iw, items := d.(rewrite.ItemEventWriter)
	ew, chunks := d.(rewrite.EventWriter)
	switch {
	case req.Stream && items:
		g.streamItemsTurn(w, r, rest, t, iw)
	case req.Stream && chunks:
		g.streamTurn(w, r, rest, t, ew)
	default:
		g.completeTurn(w, r, rest, t)
	}
}

// checkChoice refuses a tool_choice (or a legacy function_call) that names
// a tool the policy hides from this message: the tool never goes
// upstream, so the upstream would refuse a choice of a tool it was not
// sent, with a message that makes no sense to a client that did send it.
func checkChoice(snap *policy.Snapshot, req *rewrite.Request) error {
	if req.FunctionCall != "" {
		if d := snap.Decide(req.FunctionCall, req.LastUser); !d.Visible {
			return rewrite.WithParam("function_call", fmt.Errorf("%w: function_call names %q, which the gateway's policy hides from the model (%s)", rewrite.ErrBadRequest, clipMarked(req.FunctionCall, maxToolName), d.Rule))
		}
	}
	if len(req.Tools) == 0 || (req.ToolChoice == "" && len(req.Allowed) == 0) {
		return nil
	}
	decide := snap.Decider(req.LastUser)
	for _, name := range append([]string{req.ToolChoice}, req.Allowed...) {
		if name == "" {
			continue
		}
		if d := decide(name); !d.Visible {
			// Clipped: the error is logged and answered, and the name is
			// the client's, as long as a body may be (a 1 MB name
			// would make a 1 MB log line).
			return rewrite.WithParam("tool_choice", fmt.Errorf("%w: tool_choice names %q, which the gateway's policy hides from the model (%s)", rewrite.ErrBadRequest, clipMarked(name, maxToolName), d.Rule))
		}
	}
	return nil
}
