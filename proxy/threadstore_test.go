package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// plainResponses answers every Responses request with a small stored
// response of an id of its own, which names no other round.
type plainResponses struct{ n atomic.Int64 }

func (p *plainResponses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	id := p.n.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"resp_plain_%d","object":"response","status":"completed","model":"m","output":[{"type":"message","id":"msg_%d","role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10}}`, id, id)
}

// TestAChainOutlivesOtherTenantsPlainTurns: the gateway's records of the
// response ids it gave out were one LRU for every tenant, so another
// tenant's plain Responses turns (each noting the id that links its
// session) let go of B's record of the round its streamed turn ended in,
// and B's next chained request was refused by the upstream ("No tool
// output found"). Records that name other rounds are now kept apart from
// those that only link a session. The bound is the gateway's MaxThreads,
// small here; the default is 65,536 in each part.
func TestAChainOutlivesOtherTenantsPlainTurns(t *testing.T) {
	const bound = 8
	for _, tc := range []struct {
		name        string
		turns       int
		credentials int // the other tenants' turns go under this many keys
	}{
		{"B's chain continues after one other tenant's plain turns fill the bound twice", 2 * bound, 1},
		{"B's chain continues after plain turns under as many new credentials", 2 * bound, 2 * bound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			plain := &plainResponses{}
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer sk-tenant-b" {
					plain.ServeHTTP(w, r)
					return
				}
				model.ServeHTTP(w, r)
			})
			g := testGateway(t, up, func(g *Gateway) { g.MaxThreads = bound })
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			ctx := context.Background()
			b := keyClient(srv.URL+"/v1", "sk-tenant-b")
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			first, err := sdkResponse(ctx, t, b, params, true)
			if err != nil {
				t.Fatal(err)
			}
			body := fmt.Appendf(nil, `{"model":"m","input":"hi","tools":%s}`, flatTools(t, 13))
			for i := range tc.turns {
				r := httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(body))
				r.Header.Set("Authorization", fmt.Sprintf("Bearer sk-tenant-%d", i%tc.credentials))
				w := httptest.NewRecorder()
				g.Handler().ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("another tenant's turn: %d %s", w.Code, w.Body)
				}
			}
			if n := g.threads.Len(); n != bound+1 {
				t.Errorf("the gateway remembers %d response ids; want B's and %d of the others'", n, bound)
			}
			_, outputs := callOutputs(first)
			params.PreviousResponseID = openai.String(first.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			if _, err := sdkResponse(ctx, t, b, params, false); err != nil {
				t.Errorf("B continuing its chain after %d other turns: %v", tc.turns, err)
			}
		})
	}
}
