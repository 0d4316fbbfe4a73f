package proxy

import (
	"context"
	"io"
	"net/http"
	"slices"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
)

// passthroughReason says why a request of dialect d goes upstream without
// the search loop, or "" when the loop pays.
func (g *Gateway) passthroughReason(snap *policy.Snapshot, req *rewrite.Request, d rewrite.Dialect) string {
	_, chunks := d.(rewrite.EventWriter)
	_, items := d.(rewrite.ItemEventWriter)
	// A request the loop would not pay for by its size still goes through
	// it when the policy hides one of its tools: only the loop answers a
	// model's call of a hidden tool, which passed through reaches the
	// client. It offers every other tool there, and no search (allShown).
	sized := smallOrLong(snap, req)
	hides := sized && hidesAny(snap, req)
	switch {
	case snap.Gateway.Mode == policy.ModePassthrough:
		return "mode passthrough"
	case len(req.Tools) == 0:
		return "no tools"
	case req.Stream && !chunks && !items:
		return "a stream of an API the gateway does not relay"
	case req.ServerConversation:
		// The upstream would write each of the gateway's rounds into the
		// client's conversation, and the re-sent input twice.
		return "a conversation kept upstream"
	case req.Background:
		// The upstream answers later, to the client's own fetch: no
		// round of the gateway's could answer its searches.
		return "a background response"
	case len(req.Tools) < snap.Gateway.MinTools && !hides:
		return "fewer than min_tools"
	case req.N > 1:
		return "n > 1"
	case req.HasFunctions:
		return "legacy functions"
	case req.Prefill:
		// The model continues the assistant's words: a round appended
		// after them would split the answer in two.
		return "an assistant prefill"
	case longConversation(snap, req) && !hides:
		return "long conversation"
	case !choosesOwnTools(req):
		// The upstream answers such a request as it would direct (it
		// refuses it); through the loop, a choice of tool_search would
		// force the model into the gateway's search round after round.
		return "tool_choice names no tool of the request"
	}
	// The loop reads and forwards function calls only: a call of a custom
	// tool would not reach the client. The reasons are fixed strings,
	// never the client's type, for they label a metric and fill log lines.
	switch shape := g.shapeOf(req); {
	case shape.duplicate:
		// Which of two tools of one name a call means is the
		// upstream's to decide (or to refuse): the gateway could not
		// index, search or answer for them, and refusing itself what
		// it would not rewrite would not be transparent.
		return "duplicate tool names"
	case shape.deferred:
		// The client runs a tool search of its own (the provider's
		// tool_search with defer_loading, on a tool or on the tools a
		// namespace or an MCP toolset groups): a second one inside the
		// gateway would hide what the client means to reveal.
		return "the client defers its own tools"
	case shape.providerSearch:
		// The client sends the provider's hosted tool search (it has
		// no name, so no search name is taken): the model would see
		// two search tools, and the gateway would withhold tools the
		// provider's search is there to find.
		return "the client uses the provider's tool search"
	case shape.kind == "custom":
		return "a custom tool"
	case shape.kind != "":
		return "a tool of an unknown type"
	case searchName(snap, req, shape) == "":
		return "client tools take both search names"
	}
	return ""
}

// smallOrLong reports whether req would pass through for its size alone:
// fewer tools than min_tools, or a conversation past
// passthrough_history_tokens.
func smallOrLong(snap *policy.Snapshot, req *rewrite.Request) bool {
	return len(req.Tools) < snap.Gateway.MinTools || longConversation(snap, req)
}

// longConversation reports whether req's conversation is past
// passthrough_history_tokens.
func longConversation(snap *policy.Snapshot, req *rewrite.Request) bool {
	return snap.Gateway.PassthroughHistoryTokens > 0 && historyTokens(req) > snap.Gateway.PassthroughHistoryTokens
}

// hidesAny reports whether the policy hides one of req's tools from its
// latest user message.
func hidesAny(snap *policy.Snapshot, req *rewrite.Request) bool {
	decide := snap.Decider(req.LastUser)
	return slices.ContainsFunc(req.Tools, func(t rewrite.Tool) bool { return !decide(t.Name).Visible })
}

// choosesOwnTools reports whether every tool tool_choice names (or its
// allowed_tools list) is one of the request's tools.
func choosesOwnTools(req *rewrite.Request) bool {
	if req.ToolChoice == "" && len(req.Allowed) == 0 {
		return true
	}
	has := func(name string) bool {
		return slices.ContainsFunc(req.Tools, func(t rewrite.Tool) bool { return t.Name == name })
	}
	if req.ToolChoice != "" && !has(req.ToolChoice) {
		return false
	}
	for _, n := range req.Allowed {
		if !has(n) {
			return false
		}
	}
	return true
}

// searchName is the name the gateway's search tool takes in req:
// tool_search, or AltSearchToolName when one of the client's own tools
// shown to the model has that name (a policy that hides it gives the name
// back), or "" when both are taken, and the request passes through.
func searchName(snap *policy.Snapshot, req *rewrite.Request, shape arrayShape) string {
	if !shape.searchName && !shape.altName && !shape.pinnedSearch && !shape.pinnedAlt {
		return SearchToolName
	}
	visible := snap.Decider(req.LastUser)
	for _, n := range [...]struct {
		name          string
		taken, pinned bool
	}{{SearchToolName, shape.searchName, shape.pinnedSearch}, {AltSearchToolName, shape.altName, shape.pinnedAlt}} {
		// A pinned tool rides along in every call whatever the policy
		// says, so its name is taken even where the policy hides it.
		if !n.pinned && (!n.taken || !visible(n.name).Visible) {
			return n.name
		}
	}
	return ""
}

// arrayShape is what passthroughReason asks of a tools array beyond its
// length: the first tool that is not a function (its type), whether one
// takes a name of the gateway's search tool, whether the client defers
// any, whether it sends the provider's own tool search, and whether two
// tools share a name.
type arrayShape struct {
	kind                                                     string
	searchName, altName, deferred, providerSearch, duplicate bool
	// pinnedSearch and pinnedAlt: a tool the loop pins (a Responses
	// custom tool, a server tool) takes the name.
	pinnedSearch, pinnedAlt bool
}

// shapeOf reads a tools array's shape once per array: agents resend
// theirs every turn, and reading 200 tools' structs per request cost more
// in cache misses than the rest of the check.
func (g *Gateway) shapeOf(req *rewrite.Request) arrayShape {
	if req.ToolsKey != 0 {
		if s, ok := g.shapes.Get(req.ToolsKey); ok {
			return s
		}
	}
	var s arrayShape
	names := make(map[string]struct{}, len(req.Tools)+len(req.Pinned))
	seen := func(name string) bool {
		if name == "" { // a built-in tool's: no name to share
			return false
		}
		_, dup := names[name]
		names[name] = struct{}{}
		return dup
	}
	for _, t := range req.Tools {
		s.duplicate = seen(t.Name) || s.duplicate
		if s.kind == "" && t.Kind != "" {
			s.kind = t.Kind // its own string, never the body's
		}
		s.searchName = s.searchName || t.Name == SearchToolName
		s.altName = s.altName || t.Name == AltSearchToolName
		s.deferred = s.deferred || t.Deferred
		s.providerSearch = s.providerSearch || rewrite.ProviderSearchType(t.Kind)
	}
	// The pinned tools (the Responses and Messages dialects' tools that
	// are not functions) are no longer in Tools: a namespace or an MCP
	// toolset that defers its tools, and the provider's tool search, are
	// read from their JSON.
	for _, raw := range req.Pinned {
		s.deferred = s.deferred || rewrite.DefersLoading(raw)
		s.providerSearch = s.providerSearch || rewrite.ProviderSearchType(gjson.Get(raw, "type").String())
		name := gjson.Get(raw, "name").String()
		s.duplicate = seen(name) || s.duplicate
		s.pinnedSearch = s.pinnedSearch || name == SearchToolName
		s.pinnedAlt = s.pinnedAlt || name == AltSearchToolName
	}
	if req.ToolsKey != 0 {
		g.shapes.Add(req.ToolsKey, s)
	}
	return s
}

// historyTokens estimates the tokens of a request's messages and settings,
// its body without the tools array, at 4 bytes a token: what a provider's
// prompt cache serves when the tools array stays the same.
func historyTokens(req *rewrite.Request) int {
	n := len(req.Body)
	if !req.Detached() { // a detached body holds [] where the array stood
		n -= len(req.ToolsRaw.Raw)
	}
	return n / 4
}

// forward sends a request of dialect d upstream as the client wrote it,
// except that tools (and legacy functions) the policy hides are removed
// and a response id the gateway showed for another is translated
// (threads.go); the response streams back unchanged.
func (g *Gateway) forward(w *tracker, r *http.Request, rest string, snap *policy.Snapshot, req *rewrite.Request, d rewrite.Dialect, why string) {
	body := req.Original()
	var decide func(string) policy.Decision
	if len(req.Tools) > 0 || len(req.Functions) > 0 {
		decide = snap.Decider(req.LastUser)
	}
	if len(req.Tools) > 0 {
		kept := make([]string, 0, len(req.Tools))
		pos := make([]int, 0, len(req.Tools))
		for i, t := range req.Tools {
			if decide(t.Name).Visible {
				kept, pos = append(kept, t.Raw), append(pos, i)
			}
		}
		w.notePassthroughTools(r.Context(), req, kept, pos)
		if len(kept) != len(req.Tools) {
			var err error
			if body, err = d.Build(&rewrite.Request{Body: body, Pinned: req.Pinned}, kept, nil); err != nil {
				g.writeError(w, r, err)
				return
			}
		}
	}
	if slices.ContainsFunc(req.Functions, func(name string) bool { return !decide(name).Visible }) {
		var err error
		if body, err = rewrite.KeepFunctions(body, func(name string) bool { return decide(name).Visible }); err != nil {
			g.writeError(w, r, err)
			return
		}
	}
	if req.Previous != "" {
		var err error
		if body, err = rewrite.Continue(body, req); err != nil {
			g.writeError(w, r, err)
			return
		}
	}
	g.logger().DebugContext(r.Context(), "turn passthrough", "route", w.route, "reason", why, "tools", len(req.Tools))
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// Sent once, as a reverse proxy sends it: the client's SDK retries a
	// 5xx with its own backoff and the upstream's Retry-After, and a retry
	// here would multiply its attempts.
	resp, err := g.send(ctx, r, sendOptions{rest: rest, body: body, stream: req.Stream, asIs: true, key: snap.Gateway.UpstreamKey})
	if err != nil {
		g.fail(w, r, g.explainLostThread(r, req, err))
		return
	}
	iw, _ := d.(rewrite.ItemEventWriter)
	g.guardStream(ctx, resp, g.streamSilences(snap.Gateway), cancel, iw)
	defer resp.Body.Close()
	// The body goes back as it came, so its length and encoding stay true
	// (a body the transport decoded has neither header left).
	copyEndToEnd(w.Header(), resp.Header, nil)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	usage := newUsageTap(req, resp)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			usage.see(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if rerr != nil {
			if rerr == io.EOF {
				w.rep.passPrompt, w.rep.passCached = usage.tokens()
			}
			return
		}
	}
}
