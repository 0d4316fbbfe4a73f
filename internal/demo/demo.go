// Package demo replays scripted multi-step agent tasks against an
// in-process scripted upstream (internal/fakellm), once direct and once
// through an in-process gateway, and measures both at the upstream: tools
// and tokens sent, upstream calls, tasks and tool steps completed. It backs
// `gateway demo`. It needs no network and no API key: every server listens
// on loopback and goes away when Run returns. It must never be wired into
// serve.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/toolgate/toolgate"
	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// DirectMaxTools is the scripted upstream's tools limit in the direct run.
// OpenAI refuses more than 128 tools, so the bundled 183-tool catalog could
// not be sent direct at all; the demo lifts the limit for the direct run to
// compare costs, and keeps 128 for the run through the gateway.
const DirectMaxTools = 1000

// API is an API the demo's agent speaks.
type API string

// The APIs the agent speaks.
const (
	APIChat      API = "chat"
	APIResponses API = "responses"
	APIMessages  API = "messages"
)

// Options configures a run. The zero value replays the bundled tasks over
// the bundled catalog, non-streamed, with the default policy.
type Options struct {
	// Catalog is a JSON array of Chat Completions tools; nil means the
	// bundled testdata/catalog.json.
	Catalog []byte
	// Tasks is a JSON array of fakellm tasks; nil means the bundled
	// testdata/tasks.json.
	Tasks []byte
	// Stream replays every request with stream: true.
	Stream bool
	// API is the API the agent speaks: Chat Completions ("" or APIChat),
	// the Responses API (APIResponses: flat tools, input items,
	// function_call_output) or Anthropic's Messages API (APIMessages:
	// input_schema tools, content blocks, tool_result).
	API API
	// OneSession replays the tasks as successive user turns of one
	// conversation (an agent working through a list), instead of one
	// conversation per task.
	OneSession bool
	// Model is the model name the agent sends (it picks the tokenizer the
	// gateway reports with). "" means gpt-4o.
	Model string
	// CacheRate is what a token served from the provider's prompt cache
	// costs, as a share of an input token's price, for the billed-input
	// row; 0 means 0.5 (gpt-4o's; the gpt-5 family's is 0.1).
	CacheRate float64
	// Policy is the gateway's policy; nil means policy.Default().
	Policy *policy.Snapshot
	// Progress, if set, is called after each task of each run with the
	// number of tasks done and the total (both runs together).
	Progress func(done, total int)
	// Logger receives the gateway's logs; nil discards them.
	Logger *slog.Logger
	// DecisionLog receives the gateway's decision records; nil means none.
	DecisionLog *slog.Logger
}

// Result is what the two runs cost and achieved.
type Result struct {
	CatalogTools int
	Tasks        int
	Steps        int
	Stream       bool
	API          API
	OneSession   bool
	CacheRate    float64
	Direct       Side
	Gateway      Side
	Elapsed      time.Duration
}

// Side is one run, measured at the upstream.
type Side struct {
	usage
	ClientRequests int // requests the agent made
	TasksCompleted int // every step called in order and the final answer given
	StepsCompleted int // tool steps the agent executed, in task order
}

// Run replays the tasks direct, then through the gateway.
func Run(ctx context.Context, o Options) (*Result, error) {
	catalog, tasksJSON := o.Catalog, o.Tasks
	if catalog == nil {
		catalog = toolgate.SampleCatalog()
	}
	if tasksJSON == nil {
		tasksJSON = toolgate.SampleTasks()
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(catalog, &tools); err != nil {
		return nil, fmt.Errorf("reading catalog: %w", err)
	}
	var tasks []fakellm.Task
	if err := json.Unmarshal(tasksJSON, &tasks); err != nil {
		return nil, fmt.Errorf("reading tasks: %w", err)
	}
	if len(tasks) == 0 || len(tools) == 0 {
		return nil, errors.New("demo needs at least one task and one tool")
	}
	if err := checkSteps(catalog, tasks); err != nil {
		return nil, err
	}
	if o.API == "" {
		o.API = APIChat
	}
	convert := map[API]func(string) (string, error){APIResponses: rewrite.FlatTool, APIMessages: rewrite.AnthropicTool}[o.API]
	switch {
	case convert != nil:
		for i, t := range tools {
			out, err := convert(string(t))
			if err != nil {
				return nil, fmt.Errorf("catalog tool %d: %w", i, err)
			}
			tools[i] = json.RawMessage(out)
		}
	case o.API != APIChat:
		return nil, fmt.Errorf("API %q: want %s, %s or %s", o.API, APIChat, APIResponses, APIMessages)
	}
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return nil, fmt.Errorf("loading tokenizer: %w", err)
	}
	if o.Model == "" {
		o.Model = "gpt-4o"
	}
	if o.CacheRate == 0 {
		o.CacheRate = 0.5
	}
	if !(o.CacheRate >= 0 && o.CacheRate <= 1) { // so NaN fails too
		return nil, fmt.Errorf("cache rate %v: want a share of the input price, 0..1", o.CacheRate)
	}
	res := &Result{CatalogTools: len(tools), Tasks: len(tasks), Stream: o.Stream, API: o.API, OneSession: o.OneSession, CacheRate: o.CacheRate}
	for _, t := range tasks {
		res.Steps += len(t.Steps)
	}
	start := time.Now()
	progress := func(done int) {
		if o.Progress != nil {
			o.Progress(done, 2*len(tasks))
		}
	}

	// Direct: the agent talks to the model with its whole catalog.
	direct := newMeter(&fakellm.Model{Tasks: tasks, MaxTools: DirectMaxTools}, codec)
	upDirect := httptest.NewServer(direct)
	defer upDirect.Close()
	a := agent{base: upDirect.URL + "/v1", tools: tools, model: o.Model, stream: o.Stream, oneSession: o.OneSession, api: o.API}
	res.Direct, err = a.replay(ctx, tasks, func(i int) { progress(i) })
	if err != nil {
		return nil, fmt.Errorf("direct run: %w", err)
	}
	res.Direct.usage = direct.usage()

	// Through the gateway: same agent, same tasks, base URL changed.
	via := newMeter(&fakellm.Model{Tasks: tasks}, codec)
	upVia := httptest.NewServer(via)
	defer upVia.Close()
	gw, err := newGateway(upVia.URL+"/v1", o)
	if err != nil {
		return nil, err
	}
	front := httptest.NewServer(gw.Handler())
	defer front.Close()
	a.base = front.URL + "/v1"
	res.Gateway, err = a.replay(ctx, tasks, func(i int) { progress(len(tasks) + i) })
	if err != nil {
		return nil, fmt.Errorf("gateway run: %w", err)
	}
	res.Gateway.usage = via.usage()
	res.Elapsed = time.Since(start)
	return res, nil
}

// ErrMissingTools is returned by Run when a task's step calls a tool the
// catalog does not have.
var ErrMissingTools = errors.New("the tasks call tools the catalog does not have")

// checkSteps refuses a catalog with a duplicate name (the gateway passes
// such a request through, so a run would compare direct with direct) and
// tasks with a step whose tool the
// catalog lacks: no agent can call a tool it is not given, so such a step
// never completes, and a run of them reported 0/N both ways as if it had
// measured something.
func checkSteps(catalog []byte, tasks []fakellm.Task) error {
	tools, err := rewrite.ParseTools(gjson.ParseBytes(catalog))
	if err != nil {
		return fmt.Errorf("reading catalog: %w", err)
	}
	have := make(map[string]bool, len(tools))
	for _, t := range tools {
		have[t.Name] = true
	}
	var missing []string
	seen := map[string]bool{}
	for _, task := range tasks {
		for i, st := range task.Steps {
			if !have[st.Tool] && !seen[st.Tool] {
				seen[st.Tool] = true
				missing = append(missing, fmt.Sprintf("%s (task %s, step %d)", st.Tool, task.Name, i+1))
			}
		}
	}
	const listed = 10
	switch {
	case len(missing) > listed:
		return fmt.Errorf("%w: %s and %d more", ErrMissingTools, strings.Join(missing[:listed], ", "), len(missing)-listed)
	case len(missing) > 0:
		return fmt.Errorf("%w: %s", ErrMissingTools, strings.Join(missing, ", "))
	}
	return nil
}

func newGateway(upstream string, o Options) (*proxy.Gateway, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("parsing upstream: %w", err)
	}
	snap := o.Policy
	if snap == nil {
		snap = policy.Default()
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &proxy.Gateway{
		Upstream:    u,
		Policy:      func() *policy.Snapshot { return snap },
		Sessions:    session.NewMemory(1000, 0),
		Catalogs:    selector.NewCache(8),
		Learned:     proxy.NewLearned(64),
		Logger:      logger,
		DecisionLog: o.DecisionLog,
	}, nil
}

// agent is a minimal tool-calling client: it sends the conversation with
// its tools, executes the tool calls it gets back (with a canned result),
// and stops at the first text answer.
type agent struct {
	base       string
	tools      []json.RawMessage
	model      string
	stream     bool
	oneSession bool
	api        API
	client     http.Client
}

// agentSystem is the agent's instructions.
const agentSystem = "You are a helpful agent. Use the tools to do what the user asks."

// turnReply is one answer as the agent reads it in either API: the items
// it appends to its conversation, the calls it must run, and the text.
type turnReply struct {
	items []any
	calls []toolCall
	text  string
}

type toolCall struct{ id, name string }

// maxTurns bounds one task's client requests, so a confused model cannot
// loop forever.
const maxTurns = 24

func (a *agent) replay(ctx context.Context, tasks []fakellm.Task, done func(int)) (Side, error) {
	var s Side
	var history []any // the conversation so far, when the tasks share one
	for i, task := range tasks {
		if !a.oneSession {
			history = nil
		}
		steps, answered, reqs, msgs, err := a.run(ctx, task, history)
		if err != nil {
			return s, fmt.Errorf("task %s: %w", task.Name, err)
		}
		history = msgs
		s.ClientRequests += reqs
		s.StepsCompleted += steps
		if steps == len(task.Steps) && answered {
			s.TasksCompleted++
		}
		done(i + 1)
	}
	return s, nil
}

// run plays one task after history (nil: a new conversation) and returns
// the steps executed in order, whether the model gave the task's final
// answer, the requests made and the conversation including the answer.
func (a *agent) run(ctx context.Context, task fakellm.Task, history []any) (steps int, answered bool, reqs int, msgs []any, err error) {
	msgs = history
	if msgs == nil && a.api == APIChat { // the other APIs take them apart
		msgs = []any{map[string]any{"role": "system", "content": agentSystem}}
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": task.Prompt})
	for reqs < maxTurns {
		reqs++
		rep, err := a.send(ctx, msgs)
		if err != nil {
			return steps, false, reqs, msgs, err
		}
		msgs = append(msgs, rep.items...)
		if len(rep.calls) == 0 {
			return steps, rep.text == task.Answer, reqs, msgs, nil
		}
		var results []any // the Messages API's, which one user message carries
		for _, c := range rep.calls {
			if steps < len(task.Steps) && c.name == task.Steps[steps].Tool {
				steps++
			}
			out := "ok: " + c.name + " done"
			switch a.api {
			case APIResponses:
				msgs = append(msgs, map[string]any{"type": "function_call_output", "call_id": c.id, "output": out})
			case APIMessages:
				results = append(results, map[string]any{"type": "tool_result", "tool_use_id": c.id, "content": out})
			default:
				msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.id, "content": out})
			}
		}
		if results != nil {
			msgs = append(msgs, map[string]any{"role": "user", "content": results})
		}
	}
	return steps, false, reqs, msgs, nil
}

// send posts the conversation and returns the answer, assembled from the
// stream when streaming.
func (a *agent) send(ctx context.Context, msgs []any) (turnReply, error) {
	path := "/chat/completions"
	fields := map[string]any{"model": a.model, "messages": msgs, "tools": a.tools, "stream": a.stream}
	switch a.api {
	case APIResponses:
		path, fields = "/responses", map[string]any{"model": a.model, "instructions": agentSystem, "input": msgs, "tools": a.tools, "stream": a.stream}
	case APIMessages:
		path, fields = "/messages", map[string]any{"model": a.model, "max_tokens": 1024, "system": agentSystem, "messages": msgs, "tools": a.tools, "stream": a.stream}
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return turnReply{}, fmt.Errorf("encoding request: %w", err)
	}
	raw, err := a.post(ctx, path, body)
	if err != nil {
		return turnReply{}, err
	}
	switch a.api {
	case APIResponses:
		if a.stream {
			return completedReply(raw)
		}
		return outputReply(gjson.GetBytes(raw, "output")), nil
	case APIMessages:
		if a.stream {
			return streamedBlocks(raw)
		}
		return blocksReply(gjson.GetBytes(raw, "content").Array()), nil
	}
	msg := gjson.GetBytes(raw, "choices.0.message")
	if a.stream {
		if msg, err = assemble(raw); err != nil {
			return turnReply{}, err
		}
	}
	rep := turnReply{items: []any{json.RawMessage(msg.Raw)}, text: msg.Get("content").String()}
	for _, c := range msg.Get("tool_calls").Array() {
		rep.calls = append(rep.calls, toolCall{id: c.Get("id").String(), name: c.Get("function.name").String()})
	}
	return rep, nil
}

// outputReply reads a Responses output: every item goes back into the
// conversation as it came (reasoning included), calls by their call_id.
func outputReply(output gjson.Result) turnReply {
	var rep turnReply
	output.ForEach(func(_, it gjson.Result) bool {
		rep.items = append(rep.items, json.RawMessage(it.Raw))
		switch it.Get("type").String() {
		case "function_call":
			rep.calls = append(rep.calls, toolCall{id: it.Get("call_id").String(), name: it.Get("name").String()})
		case "message":
			for _, p := range it.Get("content").Array() {
				rep.text += p.Get("text").String()
			}
		}
		return true
	})
	return rep
}

// completedReply reads a Responses stream's answer from its
// response.completed event, which holds the whole response.
func completedReply(raw []byte) (turnReply, error) {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		switch ev := gjson.ParseBytes(data); ev.Get("type").String() {
		case "response.completed":
			return outputReply(ev.Get("response.output")), nil
		case "error", "response.failed":
			return turnReply{}, fmt.Errorf("stream error: %s", data)
		}
	}
	return turnReply{}, errors.New("the stream ended without response.completed")
}

// blocksReply reads a Messages answer's content: it goes back into the
// conversation as one assistant message, as it came (thinking included),
// calls by their tool_use ids.
func blocksReply(blocks []gjson.Result) turnReply {
	raws := make([]json.RawMessage, 0, len(blocks))
	var rep turnReply
	for _, b := range blocks {
		raws = append(raws, json.RawMessage(b.Raw))
		switch b.Get("type").String() {
		case "tool_use":
			rep.calls = append(rep.calls, toolCall{id: b.Get("id").String(), name: b.Get("name").String()})
		case "text":
			rep.text += b.Get("text").String()
		}
	}
	rep.items = []any{map[string]any{"role": "assistant", "content": raws}}
	return rep
}

// streamedBlocks reads a Messages stream's answer, its blocks built up
// from their deltas by the gateway's own reader of such streams.
func streamedBlocks(raw []byte) (turnReply, error) {
	rd := rewrite.Messages{}.ItemReader()
	for _, line := range bytes.Split(raw, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		ev, err := rd.Read(data)
		switch {
		case err != nil:
			return turnReply{}, fmt.Errorf("reading the stream: %w", err)
		case ev.Failed:
			return turnReply{}, fmt.Errorf("stream error: %s", data)
		case ev.Terminal:
			blocks := make([]gjson.Result, len(ev.Items))
			for i, it := range ev.Items {
				blocks[i] = gjson.Parse(it)
			}
			return blocksReply(blocks), nil
		}
	}
	return turnReply{}, errors.New("the stream ended without message_delta")
}

// post sends body to path and returns the response body of a 200.
func (a *agent) post(ctx context.Context, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo-key-not-a-secret")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sending request: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	return raw, nil
}

// assemble rebuilds the assistant message from an SSE body.
func assemble(raw []byte) (gjson.Result, error) {
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var content string
	var calls []*call
	for _, line := range bytes.Split(raw, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		ev := gjson.ParseBytes(data)
		if ev.Get("error").Exists() {
			return gjson.Result{}, fmt.Errorf("stream error: %s", data)
		}
		d := ev.Get("choices.0.delta")
		content += d.Get("content").String()
		for _, c := range d.Get("tool_calls").Array() {
			i := int(c.Get("index").Int())
			for len(calls) <= i {
				calls = append(calls, &call{Type: "function"})
			}
			if id := c.Get("id").String(); id != "" {
				calls[i].ID = id
			}
			calls[i].Function.Name += c.Get("function.name").String()
			calls[i].Function.Arguments += c.Get("function.arguments").String()
		}
	}
	msg := map[string]any{"role": "assistant", "content": content}
	if len(calls) > 0 {
		msg["content"] = nil
		msg["tool_calls"] = calls
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return gjson.Result{}, fmt.Errorf("assembling stream: %w", err)
	}
	return gjson.ParseBytes(b), nil
}
