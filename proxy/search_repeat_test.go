package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// repeatSearcher is a model that calls tool_search with each of its queries in
// turn, one per round, then answers in text; it keeps what each search
// returned.
type repeatSearcher struct {
	queries []string
	mu      sync.Mutex
	results []string
	desc    string // tool_search's description, as the model was offered it
}

func (s *repeatSearcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msgs := gjson.GetBytes(body, "messages").Array()
	done := 0
	for _, m := range msgs {
		if m.Get("role").String() == "tool" {
			done++
		}
	}
	s.mu.Lock()
	s.desc = gjson.GetBytes(body, `tools.#(function.name=="tool_search").function.description`).String()
	if done > 0 {
		s.results = append(s.results, msgs[len(msgs)-1].Get("content").String())
	}
	s.mu.Unlock()
	msg := `{"role":"assistant","content":"ok"}`
	if done < len(s.queries) {
		args, _ := json.Marshal(map[string]string{"query": s.queries[done]})
		call, _ := json.Marshal(map[string]any{"id": "s" + string(rune('a'+done)), "type": "function",
			"function": map[string]string{"name": "tool_search", "arguments": string(args)}})
		msg = `{"role":"assistant","content":null,"tool_calls":[` + string(call) + `]}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":`+msg+`,"finish_reason":"stop"}]}`)
}

func TestRepeatedSearchWidens(t *testing.T) {
	found := regexp.MustCompile(`^Found (\d+) tool`)
	var desc string
	counts := func(t *testing.T, queries ...string) []string {
		t.Helper()
		model := &repeatSearcher{queries: queries}
		base := newTestGateway(t, model, withPolicy(loadPolicy(t, "gateway: {mode: search, max_rounds: 4}\nsearch: {limit: 3}\n")))
		body := chatRequest(t, []map[string]any{{"role": "user", "content": "Help me with the gadgets."}}, testCatalog(60), false, nil)
		resp := post(t, base, body, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		desc = model.desc
		var out []string
		for _, r := range model.results {
			m := found.FindStringSubmatch(r)
			if m == nil {
				t.Fatalf("search result without a count: %q", r)
			}
			out = append(out, m[1])
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		queries []string
		want    []string
	}{
		{"the same query asked again gets a second batch on top of the first", []string{"quantum flux gadget", "Quantum  flux GADGET"}, []string{"3", "6"}},
		{"a third time, a third batch (up to the 10 a search may return)", []string{"quantum flux gadget", "quantum flux gadget", "quantum flux gadget"}, []string{"3", "6", "9"}},
		{"a different query gets the default", []string{"quantum flux gadget", "gadget number"}, []string{"3", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := counts(t, tc.queries...)
			if len(got) != len(tc.want) {
				t.Fatalf("searches returned %v tools, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("searches returned %v tools, want %v", got, tc.want)
					break
				}
			}
		})
	}
	t.Run("the tool_search description tells the model so", func(t *testing.T) {
		if !strings.Contains(desc, "the same query again returns the next matches") {
			t.Errorf("description %q does not say a repeated query returns more", desc)
		}
	})
}

// A larger catalog gets wider searches by default
// (gateway.scale_with_catalog).
func TestALargerCatalogsSearchReturnsMore(t *testing.T) {
	found := regexp.MustCompile(`^Found (\d+) tool`)
	for _, tc := range []struct {
		name   string
		policy string
		tools  int
		want   string
	}{
		{"a 60-tool catalog's search returns the configured 4", "gateway: {mode: search}\n", 60, "4"},
		{"a 210-tool catalog's returns 6", "gateway: {mode: search}\n", 210, "6"},
		{"with scale_with_catalog: false, 4", "gateway: {mode: search, scale_with_catalog: false}\n", 210, "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &repeatSearcher{queries: []string{"quantum flux gadget"}}
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, tc.policy)))
			body := chatRequest(t, []map[string]any{{"role": "user", "content": "Help me with the gadgets."}}, testCatalog(tc.tools), false, nil)
			resp := post(t, base, body, nil)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || len(model.results) != 1 {
				t.Fatalf("status %d, %d search results", resp.StatusCode, len(model.results))
			}
			if m := found.FindStringSubmatch(model.results[0]); m == nil || m[1] != tc.want {
				t.Errorf("search result %q; want %s tools", model.results[0], tc.want)
			}
		})
	}
}
