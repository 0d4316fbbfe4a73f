package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// newTestGateway starts a gateway in front of upstream and returns its base
// URL (ending in /v1).
func newTestGateway(t *testing.T, upstream http.Handler, opts ...func(*Gateway)) string {
	t.Helper()
	srv := httptest.NewServer(testGateway(t, upstream, opts...).Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// testGateway is newTestGateway's gateway, for a test that serves it
// itself.
func testGateway(t *testing.T, upstream http.Handler, opts ...func(*Gateway)) *Gateway {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL + "/v1")
	snap := policy.Default()
	g := &Gateway{
		Upstream: u,
		Policy:   func() *policy.Snapshot { return snap },
		Sessions: session.NewMemory(100, 0),
		Catalogs: selector.NewCache(8),
		Logger:   slog.New(slog.NewTextHandler(testLogOut(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, o := range opts {
		o(g)
	}
	return g
}

// observedGateway is newTestGateway with metrics and a JSON decision log
// of its own, which it returns for the test to read. opts apply after
// them.
func observedGateway(t *testing.T, upstream http.Handler, opts ...func(*Gateway)) (base string, m *Metrics, log *syncBuffer) {
	t.Helper()
	g, m, log := observedTestGateway(t, upstream, opts...)
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", m, log
}

// observedTestGateway is observedGateway's gateway, for a test that
// serves it itself.
func observedTestGateway(t *testing.T, upstream http.Handler, opts ...func(*Gateway)) (*Gateway, *Metrics, *syncBuffer) {
	t.Helper()
	m, log := NewMetrics(), &syncBuffer{}
	observe := func(g *Gateway) {
		g.Metrics = m
		g.DecisionLog = slog.New(slog.NewJSONHandler(log, nil))
	}
	return testGateway(t, upstream, append([]func(*Gateway){observe}, opts...)...), m, log
}

// domainTools are realistic tools the tests' catalog is built from.
var domainTools = []struct{ name, desc string }{
	{"repo_create_issue", "Create a new issue in a repository with a title and body."},
	{"repo_list_issues", "List open issues of a repository, optionally filtered by label."},
	{"repo_create_pull_request", "Open a pull request from a branch into the default branch."},
	{"repo_merge_pull_request", "Merge an open pull request."},
	{"repo_delete_branch", "Delete a branch from a repository."},
	{"fs_read_file", "Read the contents of a file from the local workspace."},
	{"fs_write_file", "Write text to a file, creating it if needed."},
	{"fs_delete_file", "Delete a file from the local workspace."},
	{"browser_navigate", "Open a URL in the browser tab."},
	{"browser_screenshot", "Take a screenshot of the current browser page."},
	{"chat_post_message", "Send a message to a chat channel."},
	{"chat_list_channels", "List the chat channels the bot can see."},
	{"cms_create_page", "Create a new page in the website CMS."},
	{"cms_publish_page", "Publish a draft page of the website."},
	{"calendar_create_event", "Create a calendar event with attendees."},
	{"mail_send", "Send an email to one or more recipients."},
}

// testCatalog returns n tools: the domain tools, then filler tools that
// match nothing the tests ask for.
func testCatalog(n int) []map[string]any {
	var out []map[string]any
	for i := 0; i < n; i++ {
		name, desc := fmt.Sprintf("util_gadget_%02d", i), fmt.Sprintf("Compute the quantum flux of gadget number %d.", i)
		if i < len(domainTools) {
			name, desc = domainTools[i].name, domainTools[i].desc
		}
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name": name, "description": desc,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"id": map[string]any{"type": "string", "description": "Identifier of the target."}}},
		}})
	}
	return out
}

// twoStepTask needs an issue created, then a chat message sent.
var twoStepTask = fakellm.Task{
	Name:   "issue then chat",
	Prompt: "File a bug about the login crash and tell the team in chat.",
	Steps: []fakellm.Step{
		{Tool: "repo_create_issue", Query: "create issue repository", Args: json.RawMessage(`{"id":"acme/web"}`)},
		{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{"id":"eng"}`)},
	},
	Answer: "Filed the bug and told the team.",
}

// chatRequest builds a request body.
func chatRequest(t *testing.T, msgs []map[string]any, tools []map[string]any, stream bool, extra map[string]any) []byte {
	t.Helper()
	body := map[string]any{"model": "gpt-test", "messages": msgs}
	if tools != nil {
		body["tools"] = tools
	}
	if stream {
		body["stream"] = true
	}
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t *testing.T, base string, body []byte, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// toolNames lists the function names of a request body's tools, in order.
func toolNames(body []byte) []string {
	var names []string
	gjson.GetBytes(body, "tools.#.function.name").ForEach(func(_, n gjson.Result) bool {
		names = append(names, n.String())
		return true
	})
	return names
}

// streamReply is what a client assembled from one streamed response.
type streamReply struct {
	content    string
	calls      []gjson.Result // assembled {index,id,name,arguments}
	ids        map[string]bool
	finishes   []string
	usage      []gjson.Result
	dones      int
	comments   int
	indexes    []int64
	raw        []string
	errorEvent bool
	roles      []string // every delta.role, in order
	lateRole   bool     // content or a call came before the first role
}

func readStream(t *testing.T, r io.Reader) streamReply {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	rep := streamReply{ids: map[string]bool{}}
	type acc struct{ id, name, args string }
	var calls []*acc
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, ":") {
			rep.comments++
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		rep.raw = append(rep.raw, data)
		if data == "[DONE]" {
			rep.dones++
			continue
		}
		ev := gjson.Parse(data)
		if e := ev.Get("error"); e.Exists() && e.Type != gjson.Null {
			rep.errorEvent = true
			continue
		}
		rep.ids[ev.Get("id").String()] = true
		if u := ev.Get("usage"); u.IsObject() {
			rep.usage = append(rep.usage, u)
		}
		ch := ev.Get("choices.0")
		// A null member is none, as the SDKs read it (SGLang writes
		// every member of a delta).
		if r := ch.Get("delta.role"); r.Type == gjson.String {
			rep.roles = append(rep.roles, r.String())
		} else if len(rep.roles) == 0 && (ch.Get("delta.content").String() != "" || ch.Get("delta.tool_calls").IsArray()) {
			rep.lateRole = true
		}
		rep.content += ch.Get("delta.content").String()
		if f := ch.Get("finish_reason").String(); f != "" {
			rep.finishes = append(rep.finishes, f)
		}
		deltaCalls := ch.Get("delta.tool_calls")
		if !deltaCalls.IsArray() {
			deltaCalls = gjson.Result{}
		}
		deltaCalls.ForEach(func(_, c gjson.Result) bool {
			i := int(c.Get("index").Int())
			rep.indexes = append(rep.indexes, int64(i))
			for len(calls) <= i {
				calls = append(calls, &acc{})
			}
			if id := c.Get("id").String(); id != "" {
				calls[i].id = id
			}
			calls[i].name += c.Get("function.name").String()
			calls[i].args += c.Get("function.arguments").String()
			return true
		})
	}
	for _, c := range calls {
		j, _ := json.Marshal(map[string]string{"id": c.id, "name": c.name, "arguments": c.args})
		rep.calls = append(rep.calls, gjson.ParseBytes(j))
	}
	return rep
}

func testLogOut() io.Writer {
	if os.Getenv("TOOLGATE_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// syncBuffer is a log sink safe for concurrent handlers and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// searchOnly runs the gateway in search mode: nothing is preselected, so a
// test can count on the model having to search.
func searchOnly(t *testing.T) func(*Gateway) {
	return withPolicy(loadPolicy(t, "gateway: {mode: search}\n"))
}

// twoStepRun is how an SDK agent's run of twoStepTask through the gateway
// ended.
type twoStepRun struct {
	answer   string
	called   []string // the client's calls the agent got, in order
	requests int      // the agent's requests
	billed   int64    // the input tokens its responses' usage reported
	narrated int      // answers that led with what the model said before a search
	narrate  string   // what the model says before each search ("": nothing)
}

// checkTwoStepRun checks a run of twoStepTask against the scripted model
// that answered it: the task's answer and calls, what the model said
// before its search reaching the agent, a search round taken, every
// upstream request carrying tool_search and under half the agent's 40
// tools, and the usage the agent got adding up to what the upstream
// counted. It returns the upstream's records.
func checkTwoStepRun(t *testing.T, model *fakellm.Model, run twoStepRun) []fakellm.Record {
	t.Helper()
	if run.answer != twoStepTask.Answer {
		t.Errorf("answer = %q, want %q", run.answer, twoStepTask.Answer)
	}
	if run.narrate != "" && run.narrated == 0 {
		t.Errorf("no answer carried what the model said before its search")
	}
	if want := []string{"repo_create_issue", "chat_post_message"}; !slices.Equal(run.called, want) {
		t.Errorf("SDK saw calls %v, want %v", run.called, want)
	}
	recs := model.Records()
	if len(recs) <= run.requests {
		t.Errorf("the upstream got %d requests for the agent's %d: no search round was tested", len(recs), run.requests)
	}
	var upstream int64
	for i, r := range recs {
		upstream += r.PromptTokens
		if r.Tools >= 20 || !slices.Contains(r.Names, SearchToolName) {
			t.Errorf("upstream request %d carried %d tools %v, want tool_search and under half the client's 40", i, r.Tools, r.Names)
		}
	}
	if run.billed != upstream {
		t.Errorf("SDK was billed %d input tokens, upstream counted %d", run.billed, upstream)
	}
	return recs
}

// replicas returns what starts one more gateway in front of upstream and
// returns its base URL: each shares one Redis session store, as replicas
// of a deployment do.
func replicas(t *testing.T, upstream http.Handler) func() string {
	t.Helper()
	srv := miniredis.RunT(t)
	return func() string {
		store, err := session.NewRedis("redis://"+srv.Addr(), time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		return newTestGateway(t, upstream, func(g *Gateway) { g.Sessions = store })
	}
}

// storedSearchedTurn runs twoStepTask's first turn over the Responses API
// through the gateway at base, streamed or not, and returns its request
// and the response the client was shown; the turn must have searched, so
// that model stores more rounds than the client saw.
func storedSearchedTurn(t *testing.T, model *fakellm.Model, base string, stream bool) (responses.ResponseNewParams, *responses.Response) {
	t.Helper()
	params := responses.ResponseNewParams{
		Model: "gpt-test", Tools: sdkResponseTools(40),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(twoStepTask.Prompt)},
	}
	resp, err := sdkResponse(context.Background(), t, sdkClient(base), params, stream)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(model.Stored()); n < 2 {
		t.Fatalf("the turn stored %d responses upstream: it did not search", n)
	}
	return params, resp
}
