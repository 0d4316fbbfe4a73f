package proxy

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"
)

func TestTheToolsToolChoiceNamesReachTheUpstream(t *testing.T) {
	// The user asks about files; tool_choice names tools the ranking
	// would not pick for that.
	msgs := []map[string]any{{"role": "user", "content": "read the file notes.txt"}}
	fn := func(name string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": name}}
	}
	for _, tc := range []struct {
		name   string
		choice any
		want   []string
	}{
		{"a forced function is offered", fn("calendar_create_event"), []string{"calendar_create_event"}},
		{"every tool allowed_tools allows is offered", map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{
			"mode": "required", "tools": []any{fn("calendar_create_event"), fn("cms_publish_page")}}}, []string{"calendar_create_event", "cms_publish_page"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &recorder{answer: plainAnswer}
			base := newTestGateway(t, up)
			resp := post(t, base, chatRequest(t, msgs, testCatalog(40), false, map[string]any{"tool_choice": tc.choice}), nil)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			offered := map[string]bool{}
			gjson.GetBytes(up.body, "tools.#.function.name").ForEach(func(_, n gjson.Result) bool {
				offered[n.String()] = true
				return true
			})
			if len(offered) >= 40 {
				t.Fatalf("upstream got %d tools; want the gateway's short list", len(offered))
			}
			for _, name := range tc.want {
				if !offered[name] {
					t.Errorf("upstream was not offered %s, which tool_choice names; got %v", name, offered)
				}
			}
			if gjson.GetBytes(up.body, "tool_choice").Raw == "" {
				t.Errorf("tool_choice did not reach the upstream")
			}
		})
	}
}
