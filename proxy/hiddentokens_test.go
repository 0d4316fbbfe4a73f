package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// TestAChainedTurnsDirectEstimateLeavesOutTheGatewaysOwnItems: a Responses
// turn that searched leaves its tool_search calls and their outputs in
// the context the upstream keeps, and the next turn, chained by
// previous_response_id, pays for them again in its first prompt. A direct
// conversation would never have had them, so the estimate of what that
// turn would have cost direct must not count them: it should come out as
// it does for the same turn resent whole, where the client's input holds
// only what it saw. The fake upstream counts a chained request's input
// tokens over the context it continues, as the API does.
func TestAChainedTurnsDirectEstimateLeavesOutTheGatewaysOwnItems(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	base := newTestGateway(t, model)
	tools, err := json.Marshal(sdkResponseTools(40))
	if err != nil {
		t.Fatal(err)
	}
	send := func(t *testing.T, req map[string]any) (gjson.Result, int, int) {
		t.Helper()
		req["model"], req["tools"] = "gpt-test", json.RawMessage(tools)
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		resp := postPath(t, base+"/responses", body)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, raw)
		}
		direct, gw := arrow(t, resp.Header, "X-Toolgate-Input-Tokens")
		return gjson.ParseBytes(raw), direct, gw
	}

	first, _, _ := send(t, map[string]any{"input": twoStepTask.Prompt})
	if n := len(model.Stored()); n < 2 {
		t.Fatalf("the first turn stored %d responses upstream: it did not search, and left nothing hidden", n)
	}
	call := first.Get(`output.#(type=="function_call")`)
	if call.Get("name").String() != "repo_create_issue" {
		t.Fatalf("first turn's output %s, want a call of repo_create_issue", first.Get("output").Raw)
	}
	output := map[string]any{"type": "function_call_output", "call_id": call.Get("call_id").String(), "output": "Created issue #7."}

	_, chainedDirect, chainedGateway := send(t, map[string]any{
		"previous_response_id": first.Get("id").String(),
		"input":                []any{output},
	})
	_, wholeDirect, _ := send(t, map[string]any{
		"input": []any{
			map[string]any{"role": "user", "content": twoStepTask.Prompt},
			json.RawMessage(call.Raw),
			output,
		},
	})
	// The two estimates differ by how the chain stores the visible items
	// (ids, statuses) against how the client resends them: about ten
	// tokens here. The hidden items, a search's call and its answer
	// listing the tools found, are about 60.
	const slack = 25
	if chainedDirect > wholeDirect+slack {
		t.Errorf("the chained turn's direct estimate is %d, the same turn resent whole %d: the gateway's own items of the turn before are counted as if a direct conversation had them", chainedDirect, wholeDirect)
	}
	t.Logf("chained: direct %d, gateway %d; resent whole: direct %d", chainedDirect, chainedGateway, wholeDirect)
}
