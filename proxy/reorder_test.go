package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// recordingSearcher answers a turn's first call with a call of the
// gateway's search tool, and the call after it with text, and keeps
// every request body it was sent.
type recordingSearcher struct {
	query  string
	mu     sync.Mutex
	bodies [][]byte
}

func (u *recordingSearcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, b)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !gjson.GetBytes(b, `messages.#(role=="tool")`).Exists() {
		args, _ := json.Marshal(fmt.Sprintf(`{"query":%q}`, u.query))
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":`+string(args)+`}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":900,"completion_tokens":2,"total_tokens":902}}`)
		return
	}
	_, _ = io.WriteString(w, `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":2,"total_tokens":1002}}`)
}

// taken returns the bodies sent so far and forgets them.
func (u *recordingSearcher) taken() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.bodies
	u.bodies = nil
	return b
}

// reorderPolicy has what speaks in the tools' positions: core tools
// (they join, and go upstream, in the request's order), hidden tools (the
// catalog's positions are not the request's; the decision log lists them
// in the request's order), a preselection and a search that skip what is
// hidden or active.
const reorderPolicy = `gateway: {mode: hybrid, preselect: 3}
core: ["mail_send", "fs_read_file", "chat_post_message"]
deny: ["util_gadget_1*", "browser_*"]
`

// reorderedTools returns the tools in the order that names.
func reorderedTools(tools []map[string]any, order string) []map[string]any {
	out := slices.Clone(tools)
	switch order {
	case "reversed order":
		slices.Reverse(out)
	case "shuffled order":
		r := rand.New(rand.NewPCG(7, 7))
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	case "order shuffled again":
		r := rand.New(rand.NewPCG(8, 8))
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// turnSeen is what a turn shows the world: what went upstream, what the
// client got, and what the decision log says, timings aside.
type turnSeen struct {
	upstream []string // each round's tools array
	status   int
	body     string
	headers  http.Header // X-Toolgate-*
	record   map[string]any
}

func seeTurn(t *testing.T, base string, up *recordingSearcher, log *syncBuffer, body []byte, session string) turnSeen {
	t.Helper()
	before := len(log.lines(t))
	ex := send(t, base, body, map[string]string{"X-Session-ID": session})
	s := turnSeen{status: ex.status, body: string(ex.body), headers: http.Header{}}
	for _, b := range up.taken() {
		s.upstream = append(s.upstream, gjson.GetBytes(b, "tools").Raw)
	}
	for k, v := range ex.header {
		if strings.HasPrefix(k, gatewayPrefix) {
			s.headers[k] = v
		}
	}
	lines := log.waitLines(t, before+1)
	if len(lines) != before+1 {
		t.Fatalf("the turn wrote %d decision log records, want 1", len(lines)-before)
	}
	if err := json.Unmarshal([]byte(lines[before].Raw), &s.record); err != nil {
		t.Fatalf("reading the decision log %q: %v", lines[before].Raw, err)
	}
	for _, k := range []string{"time", "duration_ms", "upstream_ms", "added_ms"} {
		delete(s.record, k)
	}
	for _, sr := range s.record["searches"].([]any) {
		delete(sr.(map[string]any), "took_ms")
	}
	return s
}

// A client that builds its tools array by map iteration sends the same
// tools in a new order every turn. Each order is compiled into one
// catalog, yet every request is answered as a gateway that compiled its
// own order answers it: the same tools upstream, in the same order, with
// the same texts, the same answer, headers (tool tokens by position) and
// decision log (hidden tools and searches in the request's order).
func TestAReorderedToolsArrayIsAnsweredAsItsOwnCatalogWouldAnswerIt(t *testing.T) {
	pol := loadPolicy(t, reorderPolicy)
	tools := testCatalog(40)
	msgs := []map[string]any{{"role": "user", "content": "Create an issue about the crash and delete the old branch."}}
	cache := selector.NewCache(8)
	up := &recordingSearcher{query: "delete branch repository"}
	shared, _, sharedLog := observedGateway(t, up, withPolicy(pol), func(g *Gateway) { g.Catalogs = cache })
	orders := []string{"first order", "reversed order", "shuffled order", "order shuffled again"}
	for i, order := range orders {
		body := chatRequest(t, msgs, reorderedTools(tools, order), false, nil)
		session := "s" + fmt.Sprint(i)
		got := seeTurn(t, shared, up, sharedLog, body, session)
		// A gateway of its own compiles this order, as every order was
		// compiled before orders shared a catalog.
		own, _, ownLog := observedGateway(t, up, withPolicy(pol))
		want := seeTurn(t, own, up, ownLog, body, session)
		t.Run("the "+order+" sends the upstream what its own catalog sends", func(t *testing.T) {
			if len(want.upstream) != 2 {
				t.Fatalf("the turn took %d rounds, want a search round and an answer: the case tests less than it says", len(want.upstream))
			}
			if !reflect.DeepEqual(got.upstream, want.upstream) {
				t.Errorf("upstream tools:\n got %s\nwant %s", got.upstream, want.upstream)
			}
			if got.status != want.status || got.body != want.body {
				t.Errorf("answer: got %d %s, want %d %s", got.status, got.body, want.status, want.body)
			}
		})
		t.Run("the "+order+" gets its own order's headers and decision log", func(t *testing.T) {
			if !reflect.DeepEqual(got.headers, want.headers) {
				t.Errorf("headers: got %v, want %v", got.headers, want.headers)
			}
			if !reflect.DeepEqual(got.record, want.record) {
				g, _ := json.Marshal(got.record)
				w, _ := json.Marshal(want.record)
				t.Errorf("decision log:\n got %s\nwant %s", g, w)
			}
		})
	}
	t.Run("every order of the same tools compiles one catalog", func(t *testing.T) {
		if st := cache.Stats(); st.Misses != 1 || st.Len != 1 {
			t.Errorf("%d orders made %d compiles and %d catalogs, want 1 and 1", len(orders), st.Misses, st.Len)
		}
	})
}

// What a request shows in its positions must be its own even for the
// parts that do depend on the order: the core tools go upstream in the
// request's order, and the decision log lists hidden tools in it.
func TestAReorderedRequestSpeaksInItsOwnOrder(t *testing.T) {
	pol := loadPolicy(t, reorderPolicy)
	tools := testCatalog(40)
	msgs := []map[string]any{{"role": "user", "content": "Create an issue about the crash and delete the old branch."}}
	up := &recordingSearcher{query: "delete branch repository"}
	base, _, log := observedGateway(t, up, withPolicy(pol))
	first := seeTurn(t, base, up, log, chatRequest(t, msgs, tools, false, nil), "a")
	second := seeTurn(t, base, up, log, chatRequest(t, msgs, reorderedTools(tools, "reversed order"), false, nil), "b")
	core := func(s turnSeen) []string {
		var names []string
		for _, n := range gjson.Get(s.upstream[0], "#.function.name").Array() {
			if n := n.String(); n == "mail_send" || n == "fs_read_file" || n == "chat_post_message" {
				names = append(names, n)
			}
		}
		return names
	}
	hidden := func(s turnSeen) []string {
		var names []string
		for _, h := range s.record["hidden"].([]any) {
			names = append(names, h.(map[string]any)["name"].(string))
		}
		return names
	}
	for _, tc := range []struct {
		name  string
		first []string
		got   []string
		want  []string
	}{
		{"the core tools go upstream in the first request's order", nil, core(first), []string{"fs_read_file", "chat_post_message", "mail_send"}},
		{"the core tools go upstream in the reversed request's order", nil, core(second), []string{"mail_send", "chat_post_message", "fs_read_file"}},
		{"the decision log lists the reversed request's hidden tools in its order", nil, hidden(second), reversed(hidden(first))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.want) < 2 {
				t.Fatalf("%d names to compare: the case tests nothing", len(tc.want))
			}
			if !slices.Equal(tc.got, tc.want) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// Tools alike by name are not the same tools: an array whose tools have
// the names of another's, one of them with another text, is another
// catalog, in the same order or another, and its search finds what its
// own text says.
func TestToolsOfTheSameNamesAndAnotherTextDoNotShareACatalog(t *testing.T) {
	tools := testCatalog(40)
	changed := slices.Clone(tools)
	changed[30] = map[string]any{"type": "function", "function": map[string]any{
		"name": tools[30]["function"].(map[string]any)["name"], "description": "Reconcile the ledger of a warehouse shipment.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"id": map[string]any{"type": "string", "description": "Identifier of the target."}}},
	}}
	name := changed[30]["function"].(map[string]any)["name"].(string)
	msgs := []map[string]any{{"role": "user", "content": "Reconcile the warehouse ledger."}}
	for _, tc := range []struct {
		name  string
		order string
	}{
		{"in the same order", "first order"},
		{"in another order", "reversed order"},
	} {
		t.Run("another text of a tool "+tc.name+" compiles its own catalog and is searched by its text", func(t *testing.T) {
			cache := selector.NewCache(8)
			up := &recordingSearcher{query: "reconcile warehouse ledger"}
			base, _, log := observedGateway(t, up, withPolicy(loadPolicy(t, "gateway: {mode: search}\n")), func(g *Gateway) { g.Catalogs = cache })
			seeTurn(t, base, up, log, chatRequest(t, msgs, tools, false, nil), "a")
			got := seeTurn(t, base, up, log, chatRequest(t, msgs, reorderedTools(changed, tc.order), false, nil), "b")
			if st := cache.Stats(); st.Misses != 2 || st.Len != 2 {
				t.Errorf("%d compiles, %d catalogs; want 2 and 2", st.Misses, st.Len)
			}
			var sent string
			for _, tl := range gjson.Get(got.upstream[1], "@this").Array() {
				if tl.Get("function.name").String() == name {
					sent = tl.Get("function.description").String()
				}
			}
			if sent != "Reconcile the ledger of a warehouse shipment." {
				t.Errorf("the search round sent %s as %q, want its new text: %s", name, sent, got.upstream[1])
			}
		})
	}
}

// The Responses API pins the tools that are not functions (a built-in
// web search, a custom tool) out of the catalog, so the catalog's
// positions, the request's and the array's all differ: a reordered array
// of the same tools, pinned ones among them, still goes upstream as its
// own catalog would send it.
func TestAReorderedResponsesArrayWithPinnedToolsIsAnsweredAsItsOwnCatalogWouldAnswerIt(t *testing.T) {
	var tools []map[string]any
	for i, tl := range testCatalog(40) {
		raw, _ := json.Marshal(tl)
		flat, err := rewrite.FlatTool(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(flat), &m)
		tools = append(tools, m)
		switch i {
		case 7:
			tools = append(tools, map[string]any{"type": "web_search"})
		case 22:
			tools = append(tools, map[string]any{"type": "custom", "name": "apply_patch", "description": "Apply a patch to the workspace."})
		}
	}
	pol := loadPolicy(t, reorderPolicy)
	cache := selector.NewCache(8)
	sharedModel := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true} // Keep: the bodies are compared
	shared := newTestGateway(t, sharedModel, withPolicy(pol), func(g *Gateway) { g.Catalogs = cache })
	for i, order := range []string{"first order", "reversed order", "shuffled order"} {
		body, _ := json.Marshal(map[string]any{"model": "gpt-test", "input": twoStepTask.Prompt, "tools": reorderedTools(tools, order)})
		session := map[string]string{"X-Session-ID": "r" + fmt.Sprint(i)}
		sharedModel.Reset()
		got := sendTo(t, shared, "/responses", body, session)
		ownModel := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
		want := sendTo(t, newTestGateway(t, ownModel, withPolicy(pol)), "/responses", body, session)
		t.Run("the "+order+" of a Responses array with pinned tools sends the upstream what its own catalog sends", func(t *testing.T) {
			g, w := sharedModel.Records(), ownModel.Records()
			if len(w) == 0 || len(g) != len(w) {
				t.Fatalf("%d upstream requests, want %d (and some)", len(g), len(w))
			}
			if gjson.GetBytes(w[0].Body, "tools").Raw == "" {
				t.Fatal("the upstream's requests were not kept: nothing to compare")
			}
			for j := range w {
				if gt, wt := gjson.GetBytes(g[j].Body, "tools").Raw, gjson.GetBytes(w[j].Body, "tools").Raw; gt != wt {
					t.Errorf("request %d's tools:\n got %s\nwant %s", j, gt, wt)
				}
			}
			if got.status != 200 || got.status != want.status || got.header.Get("X-Toolgate-Tool-Tokens") != want.header.Get("X-Toolgate-Tool-Tokens") {
				t.Errorf("got %d, tokens %s; want %d, %s", got.status, got.header.Get("X-Toolgate-Tool-Tokens"), want.status, want.header.Get("X-Toolgate-Tool-Tokens"))
			}
		})
	}
	t.Run("every order of the Responses array compiles one catalog", func(t *testing.T) {
		if st := cache.Stats(); st.Misses != 1 {
			t.Errorf("%d compiles, want 1", st.Misses)
		}
	})
}
