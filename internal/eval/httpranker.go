package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// HTTPRanker measures what a model behind the gateway is offered: each
// query goes, as the only user message with its catalog's whole tools
// array, through an in-process gateway to a scripted model that calls
// tool_search once with the query's own text and then answers. The ranking
// is the client tools the model saw, in the order it first saw them: the
// preselected tools of the first request, then what the search added. Its
// recall is the recall of the product, not of the selector alone.
type HTTPRanker struct {
	gw      http.Handler
	tools   map[string]json.RawMessage // catalog id -> tools array
	model   *SearchOnceModel
	offered []int // tools offered per query, for the summary
}

// NewHTTPRanker starts the scripted model and builds the gateway in front
// of it, with policy snap, for the catalogs of a catalog file; the func it
// returns stops the model.
func NewHTTPRanker(snap *policy.Snapshot, defs map[string][]rewrite.Tool) (*HTTPRanker, func()) {
	tools := make(map[string]json.RawMessage, len(defs))
	for id, ts := range defs {
		tools[id] = ToolsArray(ts)
	}
	model := &SearchOnceModel{}
	up := httptest.NewServer(model)
	u, _ := url.Parse(up.URL + "/v1")
	gw := &proxy.Gateway{
		Upstream: u,
		Policy:   func() *policy.Snapshot { return snap },
		Sessions: session.NewMemory(1000, 0),
		Catalogs: selector.NewCache(8),
		Learned:  proxy.NewLearned(64),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	return &HTTPRanker{gw: gw.Handler(), tools: tools, model: model}, up.Close
}

// Rank sends one query through the gateway: a selector.Ranker.
// selector.Evaluate calls it sequentially, so the model's record is this
// query's alone.
func (h *HTTPRanker) Rank(ctx context.Context, q selector.EvalQuery) ([]string, error) {
	tools, ok := h.tools[q.Catalog]
	if !ok && len(h.tools) == 1 {
		for _, only := range h.tools {
			tools = only
		}
	} else if !ok {
		return nil, fmt.Errorf("query %s: unknown catalog %q", q.ID, q.Catalog)
	}
	body, err := json.Marshal(map[string]any{
		"model":    "gpt-4o",
		"messages": []map[string]string{{"role": "user", "content": q.Query}},
		"tools":    tools,
	})
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q.ID, err)
	}
	h.model.Reset()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session-ID", q.ID)
	rec := httptest.NewRecorder()
	h.gw.ServeHTTP(rec, req)
	// A canceled request gets whatever answer the gateway's handler had
	// then (a 404 page, for one): the cancellation is the news.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("query %s: %w", q.ID, err)
	}
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("query %s: gateway answered %d: %s", q.ID, rec.Code, rec.Body.Bytes())
	}
	seen := h.model.Seen()
	h.offered = append(h.offered, len(seen))
	return seen, nil
}

// Offered returns how many queries were ranked and how many tools the
// model was offered per query, on average and at most: the summary under
// recall.
func (h *HTTPRanker) Offered() (queries int, mean float64, most int) {
	if len(h.offered) == 0 {
		return 0, 0, 0
	}
	sum := 0
	for _, n := range h.offered {
		sum += n
		most = max(most, n)
	}
	return len(h.offered), float64(sum) / float64(len(h.offered)), most
}

// SearchOnceModel plays a model that searches once per user turn with the
// user's words and then answers in text; it records the client tools each
// request offered it (tool_search left out). Serve it with httptest.
type SearchOnceModel struct {
	mu       sync.Mutex
	requests [][]string
}

// Reset forgets the requests recorded so far.
func (m *SearchOnceModel) Reset() {
	m.mu.Lock()
	m.requests = nil
	m.mu.Unlock()
}

// Offered returns the client tools of each request since Reset, in order.
func (m *SearchOnceModel) Offered() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// Seen returns every client tool offered since Reset, in the order first
// offered.
func (m *SearchOnceModel) Seen() []string {
	var out []string
	for _, names := range m.Offered() {
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// ServeHTTP answers a Chat Completions request: a tool_search call with
// the user's words when the last message is the user's and the request
// offers a search tool, otherwise the text "done".
func (m *SearchOnceModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := gjson.ParseBytes(body)
	var all []string
	req.Get("tools.#.function.name").ForEach(func(_, v gjson.Result) bool {
		all = append(all, v.String())
		return true
	})
	search := fakellm.SearchTool(all)
	names := slices.DeleteFunc(all, func(n string) bool { return n == search })
	m.mu.Lock()
	m.requests = append(m.requests, names)
	m.mu.Unlock()
	last := req.Get("messages.@reverse.0")
	msg := `{"role":"assistant","content":"done"}`
	if search != "" && last.Get("role").String() == "user" {
		args, _ := json.Marshal(map[string]string{"query": last.Get("content").String()})
		call, _ := json.Marshal(map[string]any{"id": "call_1", "type": "function",
			"function": map[string]string{"name": search, "arguments": string(args)}})
		msg = `{"role":"assistant","content":null,"tool_calls":[` + string(call) + `]}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":`+
		msg+`,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
}
