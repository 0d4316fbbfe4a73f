package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/session"
)

// TestRetrievingAResponseGivesTheTurnTheClientSaw has the official
// openai-go client retrieve the response it was shown after a turn that
// searched. A stream shows its first round's id, which the upstream
// stores as a call of tool_search: the client must get the turn's answer
// under that id instead.
func TestRetrievingAResponseGivesTheTurnTheClientSaw(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stream   bool
		replica  bool // the GET reaches another replica, sharing a Redis store
		otherKey bool // the GET comes with another tenant's key
	}{
		{"a whole answer comes back as it was answered", false, false, false},
		{"a stream's turn comes back with its answer, not its search round", true, false, false},
		{"another replica sharing the store gives the answer too", true, true, false},
		{"another tenant's key gets the upstream's refusal, nothing of the turn", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			gateway := replicas(t, model)
			base := gateway()
			ctx := context.Background()
			_, resp := storedSearchedTurn(t, model, base, tc.stream)
			shown, _ := callOutputs(resp)
			if len(shown) == 0 || slices.Contains(shown, "tool_search") {
				t.Fatalf("the client was shown calls %v", shown)
			}
			if tc.replica {
				base = gateway()
			}
			client := sdkClient(base)
			if tc.otherKey {
				client = openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey("sk-other-tenant"), option.WithMaxRetries(0))
			}
			got, err := client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
			if tc.otherKey {
				// The upstream refuses a key that may not read the turn,
				// and the gateway gives it nothing of its own.
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
					t.Errorf("another tenant's key got %+v, %v; want the upstream's 404", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("retrieving %s: %v", resp.ID, err)
			}
			if got.ID != resp.ID {
				t.Errorf("retrieved id %s; want the one shown, %s", got.ID, resp.ID)
			}
			names, _ := callOutputs(got)
			if !slices.Equal(names, shown) {
				t.Errorf("the retrieved response calls %v; the client was shown %v", names, shown)
			}
		})
	}
}

// TestAShownResponseLeavesOutOnlyTheGatewaysOwnCalls: a turn's last round
// may end with a call of the gateway's next to the client's (a mixed
// round); retrieved, it keeps the client's calls and messages only.
func TestAShownResponseLeavesOutOnlyTheGatewaysOwnCalls(t *testing.T) {
	round := `{"id":"resp_last","object":"response","output":[` +
		`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"On it."}]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_gw","name":"tool_search","arguments":"{}"},` +
		`{"type":"function_call","id":"fc_2","call_id":"call_client","name":"repo_create_issue","arguments":"{}"}]}`
	for _, tc := range []struct {
		name    string
		pending []session.Output
		want    []string // the output items' ids
	}{
		{"a round without the gateway's calls keeps every item", nil, []string{"msg_1", "fc_1", "fc_2"}},
		{"the gateway's pending call is left out", []session.Output{{CallID: "call_gw"}}, []string{"msg_1", "fc_2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := shownResponse([]byte(round), "resp_first", session.Thread{Pending: tc.pending})
			if err != nil {
				t.Fatal(err)
			}
			if id := gjson.GetBytes(out, "id").String(); id != "resp_first" {
				t.Errorf("id %s; want resp_first", id)
			}
			var ids []string
			for _, it := range gjson.GetBytes(out, "output").Array() {
				ids = append(ids, it.Get("id").String())
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("output items %v; want %v", ids, tc.want)
			}
		})
	}
}

// TestRetrievingAMixedRoundLeavesOutTheGatewaysSearch: a turn of one
// round that called tool_search next to the client's fs_read_file ends
// there, and the client is shown that round, id and all, without the
// search. Retrieved by that id, it must read the same: the upstream
// stored the round with the search in it.
func TestRetrievingAMixedRoundLeavesOutTheGatewaysSearch(t *testing.T) {
	const output = `[{"type":"function_call","id":"fc_s","call_id":"call_search","name":"tool_search","arguments":"{\"query\":\"read a file\"}","status":"completed"},` +
		`{"type":"function_call","id":"fc_r","call_id":"call_read","name":"fs_read_file","arguments":"{}","status":"completed"}]`
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			writeResponse(w, "resp_mixed", output, false)
			return
		}
		body, _ := io.ReadAll(r.Body)
		writeResponse(w, "resp_mixed", output, gjson.GetBytes(body, "stream").Bool())
	})
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a whole answer comes back without the search", false},
		{"a streamed one comes back without the search", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := sdkClient(newTestGateway(t, upstream))
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Show me the config file.")},
			}
			resp, err := sdkResponse(ctx, t, client, params, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			shown, _ := callOutputs(resp)
			if !slices.Equal(shown, []string{"fs_read_file"}) {
				t.Fatalf("the client was shown calls %v; want fs_read_file alone", shown)
			}
			got, err := client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatalf("retrieving %s: %v", resp.ID, err)
			}
			if names, _ := callOutputs(got); got.ID != resp.ID || !slices.Equal(names, shown) {
				t.Errorf("retrieved %s calling %v; the client was shown %s calling %v", got.ID, names, resp.ID, shown)
			}
		})
	}
}
