package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// recorder is an upstream that remembers the last request and answers with
// a fixed body.
type recorder struct {
	mu     sync.Mutex
	path   string
	auth   string
	body   []byte
	status int
	answer string
	header map[string]string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.path, rc.auth, rc.body = r.URL.Path, r.Header.Get("Authorization"), b
	rc.mu.Unlock()
	for k, v := range rc.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	if rc.status != 0 {
		w.WriteHeader(rc.status)
	}
	_, _ = io.WriteString(w, rc.answer)
}

const plainAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

func TestRequestsThatDoNotPayPassThroughUnchanged(t *testing.T) {
	msgs := []map[string]any{{"role": "user", "content": "hello"}}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"a request with 3 tools reaches the upstream byte for byte", chatRequest(t, msgs, testCatalog(3), false, nil)},
		{"a request without tools reaches the upstream byte for byte", chatRequest(t, msgs, nil, false, nil)},
		{"a request with n=2 reaches the upstream byte for byte", chatRequest(t, msgs, testCatalog(40), false, map[string]any{"n": 2})},
		{"a request with legacy functions reaches the upstream byte for byte", chatRequest(t, msgs, nil, false, map[string]any{"functions": []any{map[string]any{"name": "f"}}})},
		{"a request that defers tools for the provider's own tool search reaches the upstream byte for byte", chatRequest(t, msgs, append(testCatalog(40),
			map[string]any{"type": "function", "defer_loading": true, "function": map[string]any{"name": "late_tool", "parameters": map[string]any{"type": "object"}}}), false, nil)},
		{"a prefix completion (the assistant's words last, for the model to continue) reaches the upstream byte for byte", chatRequest(t,
			append(slices.Clone(msgs), map[string]any{"role": "assistant", "content": "Sure,", "prefix": true}), testCatalog(40), false, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: plainAnswer}
			base := newTestGateway(t, up)
			resp := post(t, base, tc.body, nil)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Equal(up.body, tc.body) {
				t.Errorf("upstream body differs:\n got %s\nwant %s", up.body, tc.body)
			}
			if string(got) != plainAnswer {
				t.Errorf("client body = %s", got)
			}
			if up.auth != "Bearer sk-test" {
				t.Errorf("upstream Authorization = %q, want the client's", up.auth)
			}
		})
	}
}

// TestDuplicateToolNamesPassThroughUnchanged: two tools of one name are
// the upstream's to accept or refuse, on every route and whatever the
// number of tools: the request reaches it byte for byte, and the client
// gets its answer, not a gateway 400.
func TestDuplicateToolNamesPassThroughUnchanged(t *testing.T) {
	msgs := []map[string]any{{"role": "user", "content": "Open an issue in the repository."}}
	twice := func(tools []map[string]any) []map[string]any { return append(tools, tools[0]) }
	flat := func(n int) []map[string]any {
		var out []map[string]any
		for _, tool := range testCatalog(n) {
			fn := tool["function"].(map[string]any)
			out = append(out, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"]})
		}
		return out
	}
	marshal := func(v any) []byte { b, _ := json.Marshal(v); return b }
	const responsesAnswer = `{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10}}`
	const messagesAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":1}}`
	for _, tc := range []struct {
		name, path, answer, reason string
		body                       []byte
	}{
		{"a Chat request of two tools of one name passes through", "/chat/completions", plainAnswer, "fewer than min_tools",
			[]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather by city","parameters":{"type":"object","properties":{}}}},{"type":"function","function":{"name":"get_weather","description":"Weather by coordinates","parameters":{"type":"object","properties":{}}}}]}`)},
		{"a Chat request of 41 tools, one name twice, passes through", "/chat/completions", plainAnswer, "duplicate tool names",
			chatRequest(t, msgs, twice(testCatalog(40)), false, nil)},
		{"a Responses request of 41 tools, one name twice, passes through", "/responses", responsesAnswer, "duplicate tool names",
			marshal(map[string]any{"model": "gpt-test", "input": "Open an issue in the repository.", "tools": twice(flat(40))})},
		{"a Messages request of 41 tools, one name twice, passes through", "/messages", messagesAnswer, "duplicate tool names",
			marshal(map[string]any{"model": "claude", "max_tokens": 50, "messages": msgs, "tools": append(anthropicTools(40), anthropicTools(1)...)})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: tc.answer}
			base := newTestGateway(t, up, func(g *Gateway) { g.Metrics = NewMetrics() })
			// Twice: the second time the tools array comes from the
			// gateway's caches.
			for range 2 {
				resp := postPath(t, base+tc.path, tc.body)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(got) != tc.answer {
					t.Fatalf("the client got %d %s, want the upstream's answer", resp.StatusCode, got)
				}
				if !bytes.Equal(up.body, tc.body) {
					t.Errorf("upstream body differs:\n got %s\nwant %s", up.body, tc.body)
				}
			}
			series := `toolgate_passthrough_total{reason="` + tc.reason + `"}`
			text := scrapeUntil(t, base, func(text string) bool { return metricValue(t, text, series) == 2 })
			if got := metricValue(t, text, series); got != 2 {
				t.Errorf("%s = %v, want 2", series, got)
			}
		})
	}
}

func TestOtherAPIRoutesAreProxied(t *testing.T) {
	up := &recorder{answer: `{"object":"list","data":[{"id":"gpt-test"}]}`, header: map[string]string{"X-Request-Id": "req_9"}}
	base := newTestGateway(t, up)
	req, _ := http.NewRequest(http.MethodGet, base+"/models?limit=2", nil)
	req.Header.Set("Authorization", "Bearer sk-abc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || gjson.GetBytes(b, "data.0.id").String() != "gpt-test" {
		t.Fatalf("GET /v1/models: %d %s", resp.StatusCode, b)
	}
	if up.path != "/v1/models" || up.auth != "Bearer sk-abc" || resp.Header.Get("X-Request-Id") != "req_9" {
		t.Errorf("upstream path %q auth %q; client X-Request-Id %q", up.path, up.auth, resp.Header.Get("X-Request-Id"))
	}
}

// TestHealthzAnswersOK: probes ask with GET, and some with HEAD (wget
// --spider, curl -I), which must not read as a gateway that is down.
func TestHealthzAnswersOK(t *testing.T) {
	base := newTestGateway(t, &recorder{})
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		t.Run(method+" /healthz answers 200", func(t *testing.T) {
			req, _ := http.NewRequest(method, base[:len(base)-3]+"/healthz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s /healthz = %d", method, resp.StatusCode)
			}
		})
	}
}

func TestKeyLabelNeverRevealsTheCredential(t *testing.T) {
	for _, tc := range []struct{ name, cred, want string }{
		{"a bearer key keeps its prefix and last four characters", "Bearer sk-proj-abcdefghijklmnop", "sk-...mnop"},
		{"a key without dashes keeps only its last four characters", "abcdefghijklmnopqrst", "...qrst"},
		{"a short secret yields no label at all", "Bearer sk-12", ""},
		{"a dash-ended prefix keeps only its text before the first dash", "team-a-0123456789abcdef", "team-...cdef"},
		{"a prefix of 8 characters is kept", "abcdefgh-0123456789", "abcdefgh-...6789"},
		{"a prefix longer than 8 characters is left out", "abcdefghi-0123456789", "...6789"},
		{"a credential of 12 characters is the shortest with a label", "Bearer sk-123456789", "sk-...6789"},
		{"a credential of 11 characters has none", "sk-12345678", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keyLabel(tc.cred); got != tc.want {
				t.Errorf("keyLabel(%q) = %q, want %q", tc.cred, got, tc.want)
			}
		})
	}
}

func TestToolCacheReturnsOnlyTheSameCatalog(t *testing.T) {
	c := newToolCache(4).space(routeChat)
	// Long enough to be kept (headLen), as every catalog worth caching is.
	raw := `[{"type":"function","function":{"name":"a","description":"first ` + strings.Repeat("x", headLen) + `"}}]`
	req, err := rewrite.ParseRequestCached([]byte(`{"messages":[],"tools":`+raw+`}`), c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    string
		hit  bool
	}{
		{"the same text is a hit", raw, true},
		{"the same text followed by the rest of a body is a hit", raw + `,"stream":true}`, true},
		{"a one-byte change is a miss", strings.Replace(raw, "first", "First", 1), false},
		{"a one-byte change at the end is a miss", strings.Replace(raw, `x"}}]`, `y"}}]`, 1), false},
		{"a truncated text is a miss", raw[:len(raw)-1], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.Lookup(tc.s)
			if ok != tc.hit {
				t.Fatalf("hit = %v, want %v", ok, tc.hit)
			}
			if ok && (got.Raw != raw || got.Key != c.keyOf(raw) || got.Tools[0].Name != "a" || got.Tools[0].Raw != req.Tools[0].Raw) {
				t.Errorf("cached = %+v", got)
			}
		})
	}
	// The cached strings must not alias the request body.
	body := []byte(`{"messages":[],"tools":` + raw + `}`)
	c2 := newToolCache(4).space(routeChat)
	if _, err := rewrite.ParseRequestCached(body, c2); err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'x'
	}
	if got, ok := c2.Lookup(raw); !ok || got.Tools[0].Name != "a" || !strings.HasPrefix(got.Tools[0].Raw, `{"type"`) {
		t.Errorf("cache entry changed with the body: %+v", got)
	}
}

// TestToolCacheKeepsEveryUserOfOneAgent: the users of one agent send its
// built-in tools first and their own after, so their arrays share a start;
// each must find its own, not parse it again every turn, however many
// users take turns (a bound per start made the 65th evict the next one
// due, and a rotation of them all missed every time).
func TestToolCacheKeepsEveryUserOfOneAgent(t *testing.T) {
	builtin := func(name string) string {
		return `{"type":"function","function":{"name":"` + name + `","description":"` + strings.Repeat("x", headLen) + `"}}`
	}
	user := func(i int) string {
		return fmt.Sprintf(`{"type":"function","function":{"name":"b%03d"}}`, i)
	}
	for _, tc := range []struct {
		name  string
		users int
		array func(i int) string
	}{
		{"9 users whose own tools come last all hit", 9, func(i int) string { return "[" + builtin("a") + "," + user(i) + "]" }},
		{"200 users whose own tools come last all hit", 200, func(i int) string { return "[" + builtin("a") + "," + user(i) + "]" }},
		{"200 users whose arrays end alike and are as long, their own tools in the middle, all hit", 200, func(i int) string {
			return "[" + builtin("a") + "," + user(i) + "," + builtin("z") + "]"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newToolCache(256).space(routeChat)
			var raws []string
			for i := range tc.users {
				raw := tc.array(i)
				raws = append(raws, raw)
				c.Add(raw, []rewrite.Tool{{Name: "a"}, {Name: fmt.Sprintf("b%03d", i)}})
			}
			for round := range 2 {
				for i, raw := range raws {
					got, ok := c.Lookup(raw + `,"stream":true}`)
					if !ok || got.Tools[1].Name != fmt.Sprintf("b%03d", i) {
						t.Fatalf("round %d, user %d: hit = %v, tools %+v", round, i, ok, got.Tools)
					}
				}
			}
		})
	}
}

// TestToolCacheBoundsCatalogsThatShareTheirStart: arrays that share a
// start are held to the cache's size like any others, the least recent
// first.
func TestToolCacheBoundsCatalogsThatShareTheirStart(t *testing.T) {
	const size = 64
	cache := newToolCache(size)
	c := cache.space(routeChat)
	head := `[{"type":"function","function":{"name":"a","description":"` + strings.Repeat("x", headLen) + `"}}`
	var raws []string
	for i := range size + 3 {
		raw := head + `,{"type":"function","function":{"name":"b` + strconv.Itoa(i) + `"}}]`
		raws = append(raws, raw)
		c.Add(raw, []rewrite.Tool{{Name: "a"}, {Name: "b" + strconv.Itoa(i)}})
	}
	for i, raw := range raws {
		_, ok := c.Lookup(raw)
		if want := i >= 3; ok != want {
			t.Errorf("catalog %d: hit = %v, want %v (the oldest make way)", i, ok, want)
		}
	}
	if n := cache.lru.Len(); n != size {
		t.Errorf("%d entries kept, want %d", n, size)
	}
	cache.mu.Lock()
	indexed := 0
	for _, same := range cache.byHead {
		indexed += len(same)
	}
	cache.mu.Unlock()
	if indexed != size {
		t.Errorf("%d entries indexed by their start, want %d", indexed, size)
	}
}

// TestLongConversationsPassThroughWhenConfigured: past
// passthrough_history_tokens the gateway stops rewriting, so a provider's
// prompt cache can serve the whole stable prompt; shorter conversations and
// the default (0) are rewritten as ever.
func TestLongConversationsPassThroughWhenConfigured(t *testing.T) {
	tools := testCatalog(40)
	long := []map[string]any{{"role": "user", "content": "Create an issue about the crash."}}
	for i := range 40 { // ~4,000 bytes of earlier turns: ~1,000 tokens
		long = append(long,
			map[string]any{"role": "assistant", "content": "Noted, step " + strconv.Itoa(i) + " of the plan is done and checked."},
			map[string]any{"role": "user", "content": "Good, carry on with the next step of the plan."})
	}
	short := long[:1]
	for _, tc := range []struct {
		name    string
		policy  string
		msgs    []map[string]any
		through bool
	}{
		{"a conversation over the threshold reaches the upstream byte for byte", "gateway: {passthrough_history_tokens: 500}\n", long, true},
		{"a conversation under the threshold is rewritten", "gateway: {passthrough_history_tokens: 500}\n", short, false},
		{"by default no conversation is too long", "", long, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: plainAnswer}
			var opts []func(*Gateway)
			if tc.policy != "" {
				opts = append(opts, withPolicy(loadPolicy(t, tc.policy)))
			}
			base := newTestGateway(t, up, opts...)
			body := chatRequest(t, tc.msgs, tools, false, nil)
			mustRead(t, post(t, base, body, nil))
			if got := bytes.Equal(up.body, body); got != tc.through {
				t.Errorf("upstream got the client's body unchanged: %v, want %v (%d tools upstream)", got, tc.through, len(gjson.GetBytes(up.body, "tools").Array()))
			}
		})
	}
}

// registrySearch is a client tool that happens to be named name.
func registrySearch(name string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{
		"name": name, "description": "Search the internal registry of command-line tools by keyword.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}}}}
}

func TestAClientToolNamedToolSearchIsNeverShadowed(t *testing.T) {
	task := fakellm.Task{
		Name:   "registry lookup",
		Prompt: "Search the registry for a command-line tool that resizes images.",
		Steps: []fakellm.Step{{Tool: SearchToolName, Query: "search registry command-line tools",
			Args: json.RawMessage(`{"query":"resize images"}`)}},
		Answer: "Found one.",
	}
	msgs := []map[string]any{{"role": "user", "content": task.Prompt}}
	for _, tc := range []struct {
		name   string
		policy string
		taken  []string // the client's tools with a search tool's name
		// gateway is the name the gateway's search tool takes, "" for a
		// request that passes through byte for byte.
		gateway string
		// clientCall: the client gets the call of its own tool_search.
		clientCall bool
	}{
		{"the gateway's search takes another name, and the client gets the call of its own tool_search",
			"{}\n", []string{SearchToolName}, AltSearchToolName, true},
		{"a policy that denies the client's tool_search gives the name back to the gateway",
			"deny: [tool_search]\n", []string{SearchToolName}, SearchToolName, false},
		{"a client that takes both names passes through unchanged, with its call",
			"{}\n", []string{SearchToolName, AltSearchToolName}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools := testCatalog(40)
			for i, n := range tc.taken {
				tools[20+i] = registrySearch(n)
			}
			model := &fakellm.Model{Tasks: []fakellm.Task{task}, Keep: true}
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, tc.policy)))
			body := chatRequest(t, msgs, tools, false, nil)
			resp := post(t, base, body, nil)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			recs := model.Records()
			if len(recs) == 0 {
				t.Fatal("the upstream saw no request")
			}
			for i, rec := range recs {
				names := toolNames(rec.Body)
				for _, n := range []string{SearchToolName, AltSearchToolName} {
					if c := strings.Count(" "+strings.Join(names, " ")+" ", " "+n+" "); c > 1 {
						t.Errorf("upstream request %d offers %d tools named %s; want at most one", i, c, n)
					}
				}
			}
			switch first := toolNames(recs[0].Body); {
			case tc.gateway == "" && !bytes.Equal(recs[0].Body, body):
				t.Errorf("the upstream got a rewritten request; want the client's bytes")
			case tc.gateway != "" && (len(first) == 0 || first[0] != tc.gateway || len(recs[0].Body) >= len(body)):
				t.Errorf("the upstream got tools %v (%d bytes of %d); want the gateway's smaller request, %s first", first, len(recs[0].Body), len(body), tc.gateway)
			}
			call := gjson.GetBytes(got, "choices.0.message.tool_calls.0.function.name").String()
			if tc.clientCall != (call == SearchToolName) {
				t.Errorf("the client got %s; want its own %s call: %v", got, SearchToolName, tc.clientCall)
			}
		})
	}
}

func TestARequestWithACustomToolPassesThroughWithItsCalls(t *testing.T) {
	tools := append(testCatalog(40), map[string]any{"type": "custom", "custom": map[string]any{
		"name": "run_python", "description": "Run Python code and return what it prints."}})
	msgs := []map[string]any{{"role": "user", "content": "work out 3 to the power of 3 with python"}}
	const customCall = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"custom","custom":{"name":"run_python","input":"print(3**3)"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	for _, tc := range []struct {
		name   string
		policy string
		// gone is a tool the upstream must not get; "" means the body
		// must arrive byte for byte.
		gone string
	}{
		{"the request reaches the upstream byte for byte", "{}\n", ""},
		{"a denied function tool is still removed and the custom tool kept", "deny: [mail_send]\n", "mail_send"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: customCall}
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, tc.policy)))
			body := chatRequest(t, msgs, tools, false, nil)
			// The second request finds the array in the gateway's caches.
			for i := range 2 {
				resp := post(t, base, body, nil)
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(got) != customCall {
					t.Fatalf("request %d: client got %d %s; want the upstream's custom call unchanged", i, resp.StatusCode, got)
				}
			}
			names := map[string]bool{}
			gjson.GetBytes(up.body, "tools").ForEach(func(_, v gjson.Result) bool {
				names[v.Get("function.name").String()+v.Get("custom.name").String()] = true
				return true
			})
			want := len(tools)
			if tc.gone != "" {
				want--
			}
			if !names["run_python"] || len(names) != want {
				t.Errorf("upstream got %d tools (run_python: %v); want %d with it", len(names), names["run_python"], want)
			}
			if tc.gone == "" && !bytes.Equal(up.body, body) {
				t.Errorf("upstream body differs from the client's")
			}
			if tc.gone != "" && names[tc.gone] {
				t.Errorf("upstream got %s, which the policy denies", tc.gone)
			}
		})
	}
}

// TestTheUpstreamGetsTheClientsPathAndBothQueries: the upstream receives
// the path as the client escaped it and its base URL's query (Azure's
// ?api-version=) before the client's, on every route, as a reverse proxy
// sends them.
func TestTheUpstreamGetsTheClientsPathAndBothQueries(t *testing.T) {
	tests := []struct {
		name, base, method, path, want string
	}{
		{"a model id with an escaped slash keeps it", "/v1", http.MethodGet, "/v1/models/meta-llama%2FLlama-3.1-8B", "/v1/models/meta-llama%2FLlama-3.1-8B"},
		{"escaped letters stay escaped", "/v1", http.MethodGet, "/v1/files/%66ile-abc/content", "/v1/files/%66ile-abc/content"},
		{"the client's query reaches the upstream", "/v1", http.MethodGet, "/v1/models?limit=2&after=a%2Fb", "/v1/models?limit=2&after=a%2Fb"},
		{"the base URL's query reaches a passthrough route", "/openai/v1?api-version=2024-10-21", http.MethodGet, "/v1/models", "/openai/v1/models?api-version=2024-10-21"},
		{"the base URL's query comes before the client's", "/openai/v1?api-version=2024-10-21", http.MethodGet, "/openai/v1/models?limit=2", "/openai/v1/models?api-version=2024-10-21&limit=2"},
		{"the base URL's query reaches a chat request", "/openai/v1?api-version=2024-10-21", http.MethodPost, "/v1/chat/completions", "/openai/v1/chat/completions?api-version=2024-10-21"},
		{"a parameter the client sets itself is not sent twice", "/openai/v1?api-version=2024-10-21&x=1", http.MethodGet, "/openai/v1/models?api-version=2025-01-01", "/openai/v1/models?x=1&api-version=2025-01-01"},
		{"nor when it is all the base URL has", "/openai/v1?api-version=2024-10-21", http.MethodPost, "/openai/v1/chat/completions?api-version=2024-10-21", "/openai/v1/chat/completions?api-version=2024-10-21"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan string, 1)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.RequestURI
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
			}))
			defer up.Close()
			u, err := url.Parse(up.URL + tt.base)
			if err != nil {
				t.Fatal(err)
			}
			snap := policy.Default()
			g := &Gateway{Upstream: u, Policy: func() *policy.Snapshot { return snap }, Sessions: session.NewMemory(10, 0), Catalogs: selector.NewCache(2)}
			srv := httptest.NewServer(g.Handler())
			defer srv.Close()
			var body io.Reader
			if tt.method == http.MethodPost {
				body = strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			}
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if uri := <-got; uri != tt.want {
				t.Errorf("upstream got %s, want %s", uri, tt.want)
			}
		})
	}
}

// TestAChatRequestKeepsItsHeadersAsAReverseProxyWould: what a client sends
// and gets back through the gateway differs from direct only where the
// gateway must change it.
func TestAChatRequestKeepsItsHeadersAsAReverseProxyWould(t *testing.T) {
	const answer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`
	tests := []struct {
		name       string
		tools      int
		header     map[string]string
		wantUpType string // Content-Type the upstream gets
		wantUA     string // User-Agent the upstream gets
		passed     bool   // passed through: the client gets the upstream's Content-Length
	}{
		{"a request passed through keeps its content type and sends no user agent it did not have", 3,
			map[string]string{"Content-Type": "application/json; charset=utf-8", "X-Forwarded-For": "6.6.6.6", "Forwarded": "for=6.6.6.6"},
			"application/json; charset=utf-8", "", true},
		{"a request passed through keeps its user agent", 3,
			map[string]string{"User-Agent": "OpenAI/Python 1.0", "X-Forwarded-Proto": "https"},
			"application/json", "OpenAI/Python 1.0", true},
		{"a rewritten request is JSON and sends no user agent it did not have", 40,
			map[string]string{"Content-Type": "text/plain", "X-Forwarded-For": "6.6.6.6"},
			"application/json", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make(chan http.Header, 4)
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Clone()
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
				_, _ = io.WriteString(w, answer)
			})
			base := newTestGateway(t, up)
			req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions",
				bytes.NewReader(chatRequest(t, []map[string]any{{"role": "user", "content": "open an issue"}}, testCatalog(tt.tools), false, nil)))
			req.Header["User-Agent"] = []string{""} // this test's client sends none unless the case sets one
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			h := <-got
			if ct := h.Get("Content-Type"); ct != tt.wantUpType {
				t.Errorf("upstream Content-Type %q, want %q", ct, tt.wantUpType)
			}
			if ua := h.Get("User-Agent"); ua != tt.wantUA {
				t.Errorf("upstream User-Agent %q, want %q", ua, tt.wantUA)
			}
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "Forwarded"} {
				if v := h.Get(k); v != "" {
					t.Errorf("upstream got the client's %s: %q", k, v)
				}
			}
			if tt.passed && resp.ContentLength != int64(len(answer)) {
				t.Errorf("client Content-Length %d; want the upstream's %d", resp.ContentLength, len(answer))
			}
		})
	}
}

func TestToolCacheBoundsTheBytesItKeeps(t *testing.T) {
	const maxBytes = 64 << 10
	cache := newToolCacheBytes(256, maxBytes)
	c := cache.space(routeChat)
	array := func(i, descLen int) string {
		return `[{"type":"function","function":{"name":"t` + strconv.Itoa(i) + `","description":"` + strings.Repeat("d", descLen) + `"}}]`
	}
	var raws []string
	for i := range 20 {
		raw := array(i, 6<<10) // about 6 KB each: 20 of them are twice the bound
		raws = append(raws, raw)
		c.Add(raw, []rewrite.Tool{{Name: "t" + strconv.Itoa(i), Raw: raw[1 : len(raw)-1]}})
	}
	t.Run("the text kept stays within the bound", func(t *testing.T) {
		if cache.bytes > maxBytes || cache.bytes <= 0 {
			t.Errorf("%d bytes kept, want at most %d", cache.bytes, maxBytes)
		}
	})
	t.Run("the least recent arrays made way and the newest are kept", func(t *testing.T) {
		if _, ok := c.Lookup(raws[0]); ok {
			t.Error("the oldest array is still kept")
		}
		if _, ok := c.Lookup(raws[len(raws)-1]); !ok {
			t.Error("the newest array is not kept")
		}
	})
	t.Run("an array over an eighth of the bound is not kept", func(t *testing.T) {
		huge := array(99, maxBytes/8)
		c.Add(huge, []rewrite.Tool{{Name: "t99"}})
		if _, ok := c.Lookup(huge); ok {
			t.Error("a huge array was kept")
		}
	})
}

// TestOneToolsArrayIsReadByEachRoutesDialect: the same tools bytes mean
// other tools to another dialect (a "custom" tool is a Messages client
// tool, and a free-form tool the Responses route pins), so what one route
// parsed, and the shape and catalog it keyed, must not answer another
// route's request.
func TestOneToolsArrayIsReadByEachRoutesDialect(t *testing.T) {
	var tools []map[string]any
	for _, tool := range testCatalog(40) {
		fn := tool["function"].(map[string]any)
		tools = append(tools, map[string]any{"type": "custom", "name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]})
	}
	responses, _ := json.Marshal(map[string]any{"model": "gpt-test", "input": "Open an issue in the repository.", "tools": tools})
	messages, _ := json.Marshal(map[string]any{"model": "claude", "max_tokens": 50, "tools": tools,
		"messages": []map[string]any{{"role": "user", "content": "Open an issue in the repository."}}})
	const responsesAnswer = `{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10}}`
	const messagesAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":9,"output_tokens":1}}`
	// check: a Messages request of 40 client tools reaches the upstream
	// with the gateway's search tool instead of them; a Responses one,
	// whose custom tools are free-form tools the loop cannot search,
	// passes through unchanged.
	check := func(t *testing.T, path string, got []byte) {
		t.Helper()
		names := gjson.GetBytes(got, "tools.#.name").Array()
		switch path {
		case "/v1/messages":
			if len(names) >= 40 || !slices.ContainsFunc(names, func(n gjson.Result) bool { return n.Str == SearchToolName }) {
				t.Errorf("the Messages request reached the upstream with %d tools and no %s: read as another dialect's tools", len(names), SearchToolName)
			}
		case "/v1/responses":
			if !bytes.Equal(got, responses) {
				t.Errorf("the Responses request reached the upstream with %d tools, changed: read as another dialect's tools", len(names))
			}
		}
	}
	for _, tc := range []struct {
		name  string
		order []string
	}{
		{"a Messages request after the same tools on the Responses route is searched as Messages tools", []string{"/responses", "/messages"}},
		{"a Responses request after the same tools on the Messages route passes through as Responses tools", []string{"/messages", "/responses"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			got := map[string][]byte{}
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				if _, ok := got[r.URL.Path]; !ok {
					got[r.URL.Path] = b // the route's first upstream request
				}
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/v1/messages" {
					_, _ = io.WriteString(w, messagesAnswer)
					return
				}
				_, _ = io.WriteString(w, responsesAnswer)
			})
			base := newTestGateway(t, up)
			for _, path := range tc.order {
				body := responses
				if path == "/messages" {
					body = messages
				}
				resp := postPath(t, base+path, body)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
				}
			}
			last := "/v1" + tc.order[1]
			check(t, last, got[last])
		})
	}
}

// TestAnUpstreamsToolgateHeadersNeverReachTheClient: a gateway's own
// X-Toolgate-* fields say what this gateway did, and an upstream's (a
// second toolgate in front of the provider, or a server that sets them)
// would be read as this one's. The chat passthrough dropped them; the
// other routes' reverse proxy relayed them, trailers too.
func TestAnUpstreamsToolgateHeadersNeverReachTheClient(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "X-Toolgate-Input-Tokens, X-Upstream-Trailer")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Toolgate-Tools", "500->3")
		w.Header().Set("X-Toolgate-Rounds", "9")
		w.Header().Set("X-Upstream-Own", "kept")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
		w.Header().Set("X-Toolgate-Input-Tokens", "90000->1000")
		w.Header().Set("X-Upstream-Trailer", "kept")
	})
	base := newTestGateway(t, up)
	for _, tc := range []struct {
		name, method, path string
		body               string
		trailers           bool // the route relays the upstream's trailers
	}{
		{"a model list", http.MethodGet, "/models", "", true},
		{"an embeddings call", http.MethodPost, "/embeddings", `{"model":"m","input":"hi"}`, true},
		{"a chat request passed through", http.MethodPost, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false},
	} {
		t.Run(tc.name+" gets none of the upstream's X-Toolgate fields and all its others", func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			for _, h := range []http.Header{resp.Header, resp.Trailer} {
				for k, v := range h {
					if strings.HasPrefix(k, gatewayPrefix) {
						t.Errorf("the client got the upstream's %s: %q", k, v)
					}
				}
			}
			if resp.Header.Get("X-Upstream-Own") != "kept" || tc.trailers && resp.Trailer.Get("X-Upstream-Trailer") != "kept" {
				t.Errorf("headers %v, trailers %v; want the upstream's others relayed", resp.Header, resp.Trailer)
			}
		})
	}
}

// TestToolCacheLookupsOutsideTheLockSeeNoBucketChangedInPlace: lookups walk a start's bucket
// outside the lock while adds append to it and evictions drop from it;
// under -race, a bucket changed in place shows.
func TestToolCacheLookupsOutsideTheLockSeeNoBucketChangedInPlace(t *testing.T) {
	c := newToolCacheBytes(8, 1<<30)
	sp := c.space(routeChat)
	head := `[` + strings.Repeat(`{"type":"function","function":{"name":"shared","description":"x"}},`, 10)
	arrays := make([]string, 64)
	for i := range arrays {
		arrays[i] = head + fmt.Sprintf(`{"type":"function","function":{"name":"own%d","description":"%s"}}]`, i, strings.Repeat("y", i))
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for n := range 3000 {
				raw := arrays[(n*7+w)%len(arrays)]
				if k, ok := sp.Lookup(raw + `,"x":1}`); ok {
					if k.Raw != raw {
						t.Errorf("a lookup of one array found another")
						return
					}
					continue
				}
				sp.Add(raw, []rewrite.Tool{{Name: "shared", Raw: raw[1:20]}})
			}
		})
	}
	wg.Wait()
}
