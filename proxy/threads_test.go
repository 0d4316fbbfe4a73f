package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/alicebob/miniredis/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/session"
)

// TestAChainedResponseContinuesOnAnyReplica drives a Responses agent that
// chains by previous_response_id (the official openai-go client) through
// two gateway replicas sharing a Redis session store, each turn on the
// other replica than the last, as a load balancer may send it. A streamed
// turn that searched shows the client its first round's id, whose context
// at the upstream ends in the gateway's own call: only the replica that
// served it knew where the turn's context is, and the other sent the
// upstream a conversation it refuses.
func TestAChainedResponseContinuesOnAnyReplica(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a streamed turn that searched continues on the other replica", true},
		{"a whole turn that searched continues on the other replica", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
			gateway := replicas(t, model)
			replicas := []openai.Client{sdkClient(gateway()), sdkClient(gateway())}
			ctx := context.Background()
			params := responses.ResponseNewParams{
				Model:        "gpt-test",
				Instructions: openai.String("You are an agent."),
				Tools:        sdkResponseTools(40),
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			var called []string
			answer := ""
			for turn := 0; turn < 6 && answer == ""; turn++ {
				client := replicas[turn%2]
				before := len(model.Records())
				resp, err := sdkResponse(ctx, t, client, params, tc.stream)
				if err != nil {
					t.Fatalf("turn %d on replica %d: %v", turn, turn%2, err)
				}
				if turn > 0 {
					// A chained request holds only the call outputs: the
					// tools offered for what it continues come from the
					// session the other replica saved.
					first := model.Records()[before]
					if !slices.Contains(first.Names, called[len(called)-1]) {
						t.Errorf("turn %d: replica %d offered %v, not %s, which the other replica's turn found", turn, turn%2, first.Names, called[len(called)-1])
					}
				}
				names, outputs := callOutputs(resp)
				called = append(called, names...)
				if len(outputs) == 0 {
					answer = resp.OutputText()
				}
				params.PreviousResponseID = openai.String(resp.ID)
				params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			}
			if answer != twoStepTask.Answer {
				t.Errorf("answer = %q, want %q", answer, twoStepTask.Answer)
			}
			if want := []string{"repo_create_issue", "chat_post_message"}; !slices.Equal(called, want) {
				t.Errorf("calls %v, want %v", called, want)
			}
			if len(model.Records()) <= 3 {
				t.Errorf("the upstream got %d requests: no turn searched, nothing was tested", len(model.Records()))
			}
		})
	}
}

// failingThreadStore is a shared session store whose every operation,
// threads included, fails with err.
type failingThreadStore struct{ failingStore }

func (s failingThreadStore) GetThread(context.Context, string) (session.Thread, error) {
	return session.Thread{}, s.err
}
func (s failingThreadStore) PutThread(context.Context, string, session.Thread) error { return s.err }

func TestAFailingThreadStoreCostsNoTurnThisReplicaServed(t *testing.T) {
	m := NewMetrics()
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	base := newTestGateway(t, model, func(g *Gateway) {
		g.Metrics = m
		g.Sessions = failingThreadStore{failingStore{errors.New("decoding thread from redis: unexpected end of JSON input")}}
	})
	client := sdkClient(base)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: "gpt-test", Tools: sdkResponseTools(40),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
	}
	var called []string
	for turn := 0; turn < 6 && len(called) < 2; turn++ {
		resp, err := streamedResponse(t, client.Responses.NewStreaming(ctx, params))
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		names, outputs := callOutputs(resp)
		called = append(called, names...)
		params.PreviousResponseID = openai.String(resp.ID)
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
	}
	if want := []string{"repo_create_issue", "chat_post_message"}; !slices.Equal(called, want) {
		t.Errorf("calls %v, want %v: the replica that served the turns lost their threads", called, want)
	}
	// An id this replica never gave out is asked of the store, whose
	// failure is counted; the upstream then answers for its own ids.
	params.PreviousResponseID = openai.String("resp_from_elsewhere")
	if _, err := client.Responses.New(ctx, params); err == nil {
		t.Error("an id neither the gateway nor the upstream knows was accepted")
	}
	var put, get float64
	scrapeUntil(t, base, func(text string) bool {
		put = metricValue(t, text, `toolgate_session_store_errors_total{op="thread_put"}`)
		get = metricValue(t, text, `toolgate_session_store_errors_total{op="thread_get"}`)
		return put >= 2 && get >= 1
	})
	if put < 2 || get != 1 {
		t.Errorf("thread store errors put = %v, get = %v; want one put per turn and one get, of the id the replica did not give out", put, get)
	}
}

func TestOnlyAResponseTheUpstreamStoresIsNotedAsAThread(t *testing.T) {
	for _, tc := range []struct {
		name    string
		store   *bool
		threads int
	}{
		{"a response stored by default is noted", nil, 1},
		{"a response the client asked to store is noted", ptr(true), 1},
		{"a response the client asked not to store is not noted (nothing can continue from it)", ptr(false), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := miniredis.RunT(t)
			store, err := session.NewRedis("redis://"+srv.Addr(), time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			client := sdkClient(newTestGateway(t, model, func(g *Gateway) { g.Sessions = store }))
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			if tc.store != nil {
				params.Store = openai.Bool(*tc.store)
			}
			if _, err := client.Responses.New(context.Background(), params); err != nil {
				t.Fatal(err)
			}
			threads := 0
			for _, k := range srv.Keys() {
				if strings.HasPrefix(k, "toolgate:thread:") {
					threads++
				}
			}
			if threads != tc.threads {
				t.Errorf("%d threads in the store %q, want %d", threads, srv.Keys(), tc.threads)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// sdkResponse sends params with the SDK's client, streamed or not; a
// stream is read and checked as streamedResponse does.
func sdkResponse(ctx context.Context, t *testing.T, client openai.Client, params responses.ResponseNewParams, stream bool) (*responses.Response, error) {
	t.Helper()
	if stream {
		return streamedResponse(t, client.Responses.NewStreaming(ctx, params))
	}
	return client.Responses.New(ctx, params)
}

// callOutputs answers each function call of resp as an agent does: it
// returns the calls' names and an output for each, the input of a
// request that chains from resp.
func callOutputs(resp *responses.Response) (names []string, outputs responses.ResponseInputParam) {
	for _, it := range resp.Output {
		if it.Type == "function_call" {
			names = append(names, it.Name)
			out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"ok":true}`)
			out.OfFunctionCallOutput.CallID = openai.String(it.CallID)
			outputs = append(outputs, out)
		}
	}
	return names, outputs
}

// TestAChainTheGatewayLostIsRefusedSayingWhatToDo restarts the gateway
// (a new one, with the in-memory store, against the same upstream) between
// a streamed turn that searched and the request that continues from it:
// the upstream's refusal names only a call id the client never saw, and
// the client is told why and what to do.
func TestAChainTheGatewayLostIsRefusedSayingWhatToDo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restart  bool
		stream   bool // the continuing request's
		forget   bool // the client sends no output for its own call
		tools    int  // the continuing request's
		wantNote bool
	}{
		{"a chain from a streamed turn, continued after a restart, is refused with the note", true, false, false, 40, true},
		{"a streamed chain continued after a restart is refused with the note", true, true, false, 40, true},
		{"a chain continued after a restart with too few tools to search, passed through, is refused with the note", true, false, false, 3, true},
		{"a chain the gateway remembers continues", false, false, false, 40, false},
		{"a client that forgets its own call's output on a chain the gateway remembers gets the upstream's refusal alone", false, false, true, 40, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
			ctx := context.Background()
			client := sdkClient(newTestGateway(t, model))
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			resp, err := sdkResponse(ctx, t, client, params, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(model.Records()) < 2 {
				t.Fatalf("the first turn made %d upstream calls: it did not search", len(model.Records()))
			}
			if tc.restart {
				client = sdkClient(newTestGateway(t, model))
			}
			_, outputs := callOutputs(resp)
			if tc.forget {
				outputs = nil
			}
			params.PreviousResponseID = openai.String(resp.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			params.Tools = sdkResponseTools(tc.tools)
			_, err = sdkResponse(ctx, t, client, params, tc.stream)
			var apiErr *openai.Error
			switch {
			case !tc.restart && !tc.forget:
				if err != nil {
					t.Fatalf("the chain failed: %v", err)
				}
				return
			case !errors.As(err, &apiErr) || apiErr.StatusCode != 400:
				t.Fatalf("err = %v, want the upstream's 400", err)
			}
			if !strings.Contains(apiErr.Message, "No tool output found for function call") {
				t.Errorf("message %q lost the upstream's words", apiErr.Message)
			}
			if got := strings.Contains(apiErr.Message, "resend the conversation"); got != tc.wantNote {
				t.Errorf("note in %q: %v, want %v", apiErr.Message, got, tc.wantNote)
			}
		})
	}
}

// TestARememberedThreadKeepsNoUpstreamAnswerAlive: the ids and call ids
// a turn notes are read in place from the upstream's answers, which repeat
// the request's instructions and tools; the thread the gateway remembers
// (up to 65,536 of them) must hold copies, not the answers they were read
// from.
func TestARememberedThreadKeepsNoUpstreamAnswerAlive(t *testing.T) {
	answer := []byte(`{"id":"resp_a","next":"resp_b","output":[{"call_id":"call_gw"}],"instructions":"` + strings.Repeat("x", 1<<16) + `"}`)
	in := func(s string) bool { // s's bytes lie in answer's
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		start := uintptr(unsafe.Pointer(&answer[0]))
		return s != "" && p >= start && p < start+uintptr(len(answer))
	}
	view := unsafe.String(&answer[0], len(answer)) // as gjson reads a body in place
	at := func(sub string) string { i := strings.Index(view, sub); return view[i : i+len(sub)] }
	searchRound, last, callID := at("resp_a"), at("resp_b"), at("call_gw")
	for _, tc := range []struct {
		name          string
		shown, upstrm string
	}{
		{"a whole answer's hidden search round", last, last},
		{"a stream's later round", searchRound, last},
	} {
		t.Run(tc.name+" is remembered by a copy of its id", func(t *testing.T) {
			g := testGateway(t, http.NotFoundHandler())
			g.init()
			tr := &turn{g: g, req: &rewrite.Request{ChainsByID: true}, tenant: "t", key: "k",
				upstreamIDs: []string{searchRound, last},
				pending:     []rewrite.ToolResult{{CallID: callID, Content: "Found 1 tool."}}}
			tr.rememberThread(context.Background(), tc.shown, tc.upstrm, nil)
			th, ok := g.threads.Get(tc.shown)
			if !ok {
				t.Fatal("no thread remembered")
			}
			kept := append([]string{th.Session, th.Upstream}, th.Hidden...)
			for _, p := range th.Pending {
				kept = append(kept, p.CallID, p.Output)
			}
			for _, s := range kept {
				if in(s) {
					t.Errorf("the thread keeps %q in place in the upstream's answer", s)
				}
			}
		})
	}
}

// TestAChainOutlivesARotatedCredential streams a turn that searched under
// one bearer token and continues from it under the next, as Azure Entra ID
// and OAuth clients do when their token is refreshed: the upstream knows
// both for one principal, and the chain must reach the turn's last round.
// The gateway's session stays with the credential that made it.
func TestAChainOutlivesARotatedCredential(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replica bool // the continuation reaches another replica, sharing a Redis store
	}{
		{"on the same gateway", false},
		{"on another replica sharing the store", true},
	} {
		t.Run("a chain continued under a refreshed token works "+tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true,
				Owner: func(*http.Request) string { return "one principal" }}
			gateway := replicas(t, model)
			base := gateway()
			ctx := context.Background()
			token := func(base, tok string) openai.Client {
				return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey(tok), option.WithMaxRetries(0))
			}
			params := responses.ResponseNewParams{
				Model: "gpt-test", Tools: sdkResponseTools(40),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
			}
			first, err := sdkResponse(ctx, t, token(base, "eyJ-token-before-refresh-1111"), params, true)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(model.Stored()); n < 2 {
				t.Fatalf("the turn stored %d responses upstream: it did not search", n)
			}
			if tc.replica {
				base = gateway()
			}
			_, outputs := callOutputs(first)
			params.PreviousResponseID = openai.String(first.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
			if _, err := sdkResponse(ctx, t, token(base, "eyJ-token-after-refresh-2222"), params, true); err != nil {
				t.Errorf("continuing from %s under the refreshed token: %v", first.ID, err)
			}
		})
	}
}

// issueTwiceTask's two steps are found by one search, so a request that
// comes back with the first step's output finds the second step's tool
// active, if the gateway still knows what that search found.
var issueTwiceTask = fakellm.Task{
	Name:   "issue, then the list",
	Prompt: "File the login bug, then show me the open issues.",
	Steps: []fakellm.Step{
		{Tool: "repo_create_issue", Query: "issue", Args: json.RawMessage(`{"id":"acme/web"}`)},
		{Tool: "repo_list_issues", Query: "issue", Args: json.RawMessage(`{"id":"acme/web"}`)},
	},
	Answer: "Filed it; here are the open issues.",
}

// chainRun is what an agent chaining by previous_response_id through the
// gateway got: the tools of each of its requests' first upstream call,
// and how many upstream calls it cost in all.
type chainRun struct {
	offered [][]string
	calls   int
	records []gjson.Result // the decision log's, when the run kept one
}

// TestAChainedResponseKeepsItsToolsWhenItsSessionIsGone: a request that
// continues a response by its id holds only the outputs of the calls,
// which name no tool, so its tools came from the session alone. Once the
// session was gone (expired, evicted) while the gateway still remembered
// the response id, the request went upstream with tool_search alone: even
// the tool just called was gone, and the next step searched again. The
// thread keeps the turn's tools, and such a request offers what it would
// have with its session.
func TestAChainedResponseKeepsItsToolsWhenItsSessionIsGone(t *testing.T) {
	ctx := context.Background()
	// run plays issueTwiceTask to its answer; between requests, forget
	// (when not nil) deletes every session.
	run := func(t *testing.T, gateways []string, stream bool, forget func(), model *fakellm.Model) chainRun {
		t.Helper()
		params := responses.ResponseNewParams{
			Model: "gpt-test", Tools: sdkResponseTools(40),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(issueTwiceTask.Prompt)},
		}
		var r chainRun
		answer := ""
		for turn := 0; turn < 6 && answer == ""; turn++ {
			before := len(model.Records())
			resp, err := sdkResponse(ctx, t, sdkClient(gateways[turn%len(gateways)]), params, stream)
			if err != nil {
				t.Fatalf("turn %d: %v", turn, err)
			}
			r.offered = append(r.offered, model.Records()[before].Names)
			_, outputs := callOutputs(resp)
			if len(outputs) == 0 {
				answer = resp.OutputText()
			}
			if forget != nil {
				forget()
			}
			params.PreviousResponseID = openai.String(resp.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: outputs}
		}
		if answer != issueTwiceTask.Answer {
			t.Errorf("answer = %q, want %q", answer, issueTwiceTask.Answer)
		}
		r.calls = len(model.Records())
		return r
	}
	// kept is the run of an agent whose session stays.
	kept := func(t *testing.T, stream bool) chainRun {
		model := &fakellm.Model{Tasks: []fakellm.Task{issueTwiceTask}}
		return run(t, []string{newTestGateway(t, model, searchOnly(t))}, stream, nil, model)
	}
	for _, tc := range []struct {
		name   string
		stream bool
		// gone runs the task on gateways whose sessions are deleted
		// after every request.
		gone func(t *testing.T, model *fakellm.Model, stream bool) chainRun
	}{
		{"a chain whose in-memory session expired offers what its session would have", false,
			func(t *testing.T, model *fakellm.Model, stream bool) chainRun {
				mem := session.NewMemory(100, 0)
				var buf syncBuffer
				base := newTestGateway(t, model, searchOnly(t), func(g *Gateway) {
					g.Sessions = mem
					g.DecisionLog = slog.New(slog.NewJSONHandler(&buf, nil))
				})
				r := run(t, []string{base}, stream, func() {
					for _, k := range mem.Keys() {
						_ = mem.Delete(ctx, k)
					}
				}, model)
				r.records = buf.waitLines(t, len(r.offered))
				return r
			}},
		{"a streamed chain whose in-memory session expired offers what its session would have", true,
			func(t *testing.T, model *fakellm.Model, stream bool) chainRun {
				mem := session.NewMemory(100, 0)
				return run(t, []string{newTestGateway(t, model, searchOnly(t), func(g *Gateway) { g.Sessions = mem })}, stream, func() {
					for _, k := range mem.Keys() {
						_ = mem.Delete(ctx, k)
					}
				}, model)
			}},
		{"a chain whose session Redis lost offers on the other replica what its session would have", false,
			func(t *testing.T, model *fakellm.Model, stream bool) chainRun {
				srv := miniredis.RunT(t)
				var gateways []string
				for range 2 {
					store, err := session.NewRedis("redis://"+srv.Addr(), time.Hour, nil)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = store.Close() })
					gateways = append(gateways, newTestGateway(t, model, searchOnly(t), func(g *Gateway) { g.Sessions = store }))
				}
				return run(t, gateways, stream, func() {
					for _, k := range srv.Keys() {
						if strings.HasPrefix(k, "toolgate:session:") {
							srv.Del(k)
						}
					}
				}, model)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := kept(t, tc.stream)
			if len(want.offered) < 2 || !slices.Contains(want.offered[1], "repo_list_issues") {
				t.Fatalf("with its session the chained request was offered %v: the test needs it to hold the search's finds", want.offered)
			}
			got := tc.gone(t, &fakellm.Model{Tasks: []fakellm.Task{issueTwiceTask}}, tc.stream)
			if !slices.EqualFunc(got.offered, want.offered, slices.Equal) {
				t.Errorf("requests' first upstream calls offered %v, want %v as with the session", got.offered, want.offered)
			}
			if got.calls != want.calls {
				t.Errorf("%d upstream calls, want %d as with the session", got.calls, want.calls)
			}
			if got.records != nil {
				reason := ""
				for _, a := range got.records[1].Get("active").Array() {
					if a.Get("name").String() == "repo_list_issues" {
						reason = a.Get("reason").String()
					}
				}
				if reason != reasonThread {
					t.Errorf("the decision log gives repo_list_issues the reason %q, want %q", reason, reasonThread)
				}
			}
		})
	}
}
