package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// keyClient is an SDK client of the gateway at base with its own key.
func keyClient(base, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// notFound reports whether err is a 404 whose message names id.
func notFound(err error, id string) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && strings.Contains(apiErr.Message, id)
}

// TestWithAnUpstreamKeyATenantReachesOnlyItsOwnResponses: with
// gateway.upstream_key the upstream sees the operator's key on every
// request, so it let any client that held another's response id retrieve
// it, read its input, delete it with its hidden rounds, and continue the
// conversation from it. The gateway now answers another tenant's use of an
// id it remembers as the upstream answers an id it does not know.
func TestWithAnUpstreamKeyATenantReachesOnlyItsOwnResponses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		caller string // the key of the request that names B's response
		op     string // get, items, delete or chain
		stream bool   // B's turn was streamed
		wantOK bool
	}{
		{"another tenant retrieving a streamed turn gets a 404", "sk-tenant-a", "get", true, false},
		{"another tenant retrieving a whole answer gets a 404", "sk-tenant-a", "get", false, false},
		// (fakellm serves no input_items: the owner's read is not tested)
		{"another tenant reading a turn's input items gets a 404", "sk-tenant-a", "items", true, false},
		{"another tenant deleting a turn gets a 404 and deletes nothing", "sk-tenant-a", "delete", true, false},
		{"another tenant continuing a streamed turn gets a 404 and reaches no upstream", "sk-tenant-a", "chain", true, false},
		{"another tenant continuing a whole answer gets a 404 and reaches no upstream", "sk-tenant-a", "chain", false, false},
		{"the turn's own tenant still retrieves it", "sk-tenant-b", "get", true, true},
		{"the turn's own tenant still continues it", "sk-tenant-b", "chain", true, true},
		{"the turn's own tenant still deletes it with its hidden rounds", "sk-tenant-b", "delete", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, "gateway: {upstream_key: sk-operator}\n")))
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			bResp, err := sdkResponse(ctx, t, keyClient(base, "sk-tenant-b"), params, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			stored, calls := len(model.Stored()), len(model.Records())
			if stored < 2 {
				t.Fatalf("B's turn stored %d responses upstream: it did not search", stored)
			}
			client := keyClient(base, tc.caller)
			switch tc.op {
			case "get":
				_, err = client.Responses.Get(ctx, bResp.ID, responses.ResponseGetParams{})
			case "items":
				_, err = client.Responses.InputItems.List(ctx, bResp.ID, responses.InputItemListParams{})
			case "delete":
				err = client.Responses.Delete(ctx, bResp.ID)
			case "chain":
				_, outputs := callOutputs(bResp)
				params.PreviousResponseID = openai.String(bResp.ID)
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
				_, err = sdkResponse(ctx, t, client, params, false)
			}
			if tc.wantOK {
				if err != nil {
					t.Fatalf("%s of its own %s: %v", tc.op, bResp.ID, err)
				}
				if tc.op == "delete" && len(model.Stored()) != 0 {
					t.Errorf("after the owner's delete the upstream still stores %v", model.Stored())
				}
				return
			}
			if !notFound(err, bResp.ID) {
				t.Errorf("%s of B's %s by another tenant: %v; want a 404 naming the id", tc.op, bResp.ID, err)
			}
			if n := len(model.Stored()); n != stored {
				t.Errorf("the upstream stores %d responses after another tenant's %s, %d before", n, tc.op, stored)
			}
			if tc.op == "chain" && len(model.Records()) != calls {
				t.Errorf("another tenant's chain reached the upstream")
			}
		})
	}
}

// TestAnotherAccountsChainLearnsNothingOfTheTurnsRounds: without an
// upstream key each client's own key goes upstream, which decides whether
// it may continue from an id. The gateway still sent a chain from B's id
// under A's key on from B's hidden last round, with the outputs of B's
// pending search calls: the upstream's refusal named a round A was never
// shown, and B's search results went upstream under A's account. Such a
// chain now goes on naming the id A sent, as it sent it, unless the
// upstream lets A's key read that id (a rotated token of one principal,
// TestAChainOutlivesARotatedCredential).
func TestAnotherAccountsChainLearnsNothingOfTheTurnsRounds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		mixed  bool // B's turn ended with the gateway's search next to B's own call
	}{
		{"a chain from a streamed turn goes on from the id it names, not the turn's hidden round", true, false},
		{"a chain from a turn that ended with the gateway's search carries none of its outputs", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var up http.Handler = &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			if tc.mixed {
				m := &mixedUpstream{}
				// mixedUpstream answers any key; its stored responses
				// are B's, and another key's retrieve of them a 404.
				up = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodGet && r.Header.Get("Authorization") != "Bearer sk-tenant-b" {
						w.WriteHeader(http.StatusNotFound)
						return
					}
					m.ServeHTTP(w, r)
				})
			}
			var mu sync.Mutex
			var sent [][]byte // every POST's body, refused or not
			next := up
			up = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					body, _ := io.ReadAll(r.Body)
					mu.Lock()
					sent = append(sent, body)
					mu.Unlock()
					r.Body = io.NopCloser(bytes.NewReader(body))
				}
				next.ServeHTTP(w, r)
			})
			base := newTestGateway(t, up)
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			bResp, err := sdkResponse(ctx, t, keyClient(base, "sk-tenant-b"), params, tc.stream)
			if err != nil {
				t.Fatal(err)
			}
			_, outputs := callOutputs(bResp)
			params.PreviousResponseID = openai.String(bResp.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			_, err = sdkResponse(ctx, t, keyClient(base, "sk-tenant-a"), params, false)
			if err == nil {
				t.Fatal("A's key continued B's turn")
			}
			mu.Lock()
			last := gjson.ParseBytes(sent[len(sent)-1])
			mu.Unlock()
			if got := last.Get("previous_response_id").String(); got != bResp.ID {
				t.Errorf("A's chain went upstream from %s; want the id it named, %s (A's error: %v)", got, bResp.ID, err)
			}
			last.Get("input").ForEach(func(_, it gjson.Result) bool {
				if id := it.Get("call_id").String(); it.Get("type").String() == "function_call_output" &&
					!slices.ContainsFunc(outputs, func(o responses.ResponseInputItemUnionParam) bool {
						return o.OfFunctionCallOutput != nil && o.OfFunctionCallOutput.CallID.Value == id
					}) {
					t.Errorf("A's chain carried the output of %s, a call of B's turn A never saw: %.80s", id, it.Get("output").String())
				}
				return true
			})
		})
	}
}
