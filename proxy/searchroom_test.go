package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// searchesInOneRound is a model that answers the user with one round of
// tool_search calls, one per query, and anything else in text. It records
// the tools each upstream call offered and the answers to its searches.
type searchesInOneRound struct {
	queries []string

	mu      sync.Mutex
	offered [][]string
	answers []string
}

func (s *searchesInOneRound) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	last := gjson.GetBytes(body, "messages.@reverse.0")
	s.mu.Lock()
	s.offered = append(s.offered, toolNames(body))
	if last.Get("role").String() == "tool" {
		for _, a := range gjson.GetBytes(body, `messages.#(role=="tool")#.content`).Array() {
			s.answers = append(s.answers, a.String())
		}
	}
	s.mu.Unlock()
	msg := `{"role":"assistant","content":"ok"}`
	if last.Get("role").String() == "user" {
		var calls []map[string]any
		for i, q := range s.queries {
			args, _ := json.Marshal(map[string]string{"query": q})
			calls = append(calls, map[string]any{"id": fmt.Sprintf("s%d", i), "type": "function",
				"function": map[string]string{"name": SearchToolName, "arguments": string(args)}})
		}
		b, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
		msg = string(b)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":`+msg+`,"finish_reason":"stop"}]}`)
}

// TestASearchListsOnlyWhatTheNextRoundOffers: a search's answer tells the
// model its tools are now in its list, so the round that answers it must
// offer every one. Under max_active the tools that are never evicted
// (here core) and the round's earlier finds come first; a search that
// can keep nothing lists nothing and says the list is full. Before, it
// listed one tool (core filling max_active) or all it found (core over
// max_active), and bound evicted them all from the round.
func TestASearchListsOnlyWhatTheNextRoundOffers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		core    []string
		queries []string
		listed  []int    // how many tools each search's answer lists
		full    []string // what each answer says of a full list, "" for nothing
	}{
		{"a search lists what fits beside the core tools",
			[]string{"util_gadget_30", "util_gadget_31"}, []string{"send email recipients"},
			[]int{1}, []string{""}},
		{"a search lists nothing and says the list is full when the core tools fill max_active",
			[]string{"util_gadget_30", "util_gadget_31", "util_gadget_32"}, []string{"send email recipients"},
			[]int{0}, []string{"Your tool list is full (at most 3 tools"}},
		{"a search lists nothing and says the list is full when the core tools exceed max_active",
			[]string{"util_gadget_30", "util_gadget_31", "util_gadget_32", "util_gadget_33"}, []string{"send email recipients"},
			[]int{0}, []string{"Do not search again"}},
		{"a search lists nothing when the step's earlier search took the last places",
			[]string{"util_gadget_30"}, []string{"send email recipients", "create issue repository"},
			[]int{2, 0}, []string{"", "full for this step"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &searchesInOneRound{queries: tc.queries}
			pol := fmt.Sprintf("gateway: {mode: search, max_active: 3}\ncore: [%s]\n", strings.Join(tc.core, ", "))
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, pol)))
			resp := post(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "Email the team."}}, testCatalog(40), false, nil), nil)
			resp.Body.Close()
			model.mu.Lock()
			defer model.mu.Unlock()
			if resp.StatusCode != http.StatusOK || len(model.offered) != 2 || len(model.answers) != len(tc.queries) {
				t.Fatalf("status %d after %d upstream calls and %d search answers; want 200 after 2 calls and %d answers",
					resp.StatusCode, len(model.offered), len(model.answers), len(tc.queries))
			}
			next := model.offered[1]
			for i, answer := range model.answers {
				listed := foundTools(answer)
				if len(listed) != tc.listed[i] {
					t.Errorf("search %d listed %v; want %d tools:\n%s", i, listed, tc.listed[i], answer)
				}
				for _, n := range listed {
					if !slices.Contains(next, n) {
						t.Errorf("search %d says %s is now in the tool list; the next round offered %v", i, n, next)
					}
				}
				if tc.full[i] == "" && strings.Contains(answer, "full") || tc.full[i] != "" && !strings.Contains(answer, tc.full[i]) {
					t.Errorf("search %d answered %q; want it to say %q of a full list", i, answer, tc.full[i])
				}
			}
			for _, c := range tc.core {
				if !slices.Contains(next, c) {
					t.Errorf("the next round offered %v; the core tool %s is missing", next, c)
				}
			}
		})
	}
}
