package rewrite

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestAnOutputCapLeavesWhatTheAPITakes: each dialect reads the client's
// output cap, a later round is sent what the rounds before left of it,
// in every member the client capped it by, and no round is asked for
// when less is left than the API takes as a cap.
func TestAnOutputCapLeavesWhatTheAPITakes(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"hi"}]`
	round := []Round{{Calls: []Call{{ID: "c1", Name: "tool_search", Arguments: "{}"}}, Results: []ToolResult{{CallID: "c1", Content: "found"}}}}
	for _, tc := range []struct {
		name    string
		d       Dialect
		body    string
		used    int64
		left    int64
		ok      bool
		members []string // where Build must write left
	}{
		{"a request without a cap may always go on", Chat{}, `{"model":"m",` + user + `}`, 500, 0, true, nil},
		{"Chat's lower cap of its two names caps the turn, in both", Chat{}, `{"model":"m","max_tokens":90,"max_completion_tokens":60,` + user + `}`, 40, 20, true, []string{"max_tokens", "max_completion_tokens"}},
		{"a Chat cap member left null stays null", Chat{}, `{"model":"m","max_tokens":null,"max_completion_tokens":60,` + user + `}`, 40, 20, true, []string{"max_completion_tokens"}},
		{"Chat takes a cap of one token", Chat{}, `{"model":"m","max_completion_tokens":41,` + user + `}`, 40, 1, true, []string{"max_completion_tokens"}},
		{"a spent Chat cap stops the turn", Chat{}, `{"model":"m","max_completion_tokens":40,` + user + `}`, 40, 0, false, nil},
		{"the Responses API takes no cap under 16", Responses{}, `{"model":"m","max_output_tokens":55,"input":"hi"}`, 40, 15, false, nil},
		{"the Responses API takes 16", Responses{}, `{"model":"m","max_output_tokens":56,"input":"hi"}`, 40, 16, true, []string{"max_output_tokens"}},
		{"Anthropic's cap must exceed the thinking budget", Messages{}, `{"model":"m","max_tokens":2064,"thinking":{"type":"enabled","budget_tokens":1024},` + user + `}`, 1040, 1024, false, nil},
		{"Anthropic's cap above the thinking budget goes on", Messages{}, `{"model":"m","max_tokens":2065,"thinking":{"type":"enabled","budget_tokens":1024},` + user + `}`, 1040, 1025, true, []string{"max_tokens"}},
		{"a thinking budget the client's own cap is under is not the upstream's floor", Messages{}, `{"model":"m","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},` + user + `}`, 1000, 24, true, []string{"max_tokens"}},
		{"Anthropic's cap without thinking takes one token", Messages{}, `{"model":"m","max_tokens":41,` + user + `}`, 40, 1, true, []string{"max_tokens"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.d.ParseRequest([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			left, ok := req.OutputRoom(tc.used)
			if left != tc.left || ok != tc.ok {
				t.Fatalf("OutputRoom(%d) = %d, %v; want %d, %v", tc.used, left, ok, tc.left, tc.ok)
			}
			if !ok {
				return
			}
			req.OutputLeft = left
			body, err := tc.d.Build(req, nil, round)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
				want := gjson.Get(tc.body, m).Int()
				for _, w := range tc.members {
					if w == m {
						want = left
					}
				}
				if got := gjson.GetBytes(body, m).Int(); got != want {
					t.Errorf("the round's %s is %d; want %d", m, got, want)
				}
				if was := gjson.Get(tc.body, m); was.Type == gjson.Null && was.Exists() && gjson.GetBytes(body, m).Type != gjson.Null {
					t.Errorf("the round's %s is %s; the client's null must stay null", m, gjson.GetBytes(body, m).Raw)
				}
			}
		})
	}
}
