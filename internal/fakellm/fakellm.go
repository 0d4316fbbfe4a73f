// Package fakellm is a scripted upstream speaking OpenAI's Chat Completions
// and Responses APIs and Anthropic's Messages API that behaves like a
// tool-calling model: given tasks (a prompt and the tool steps it needs),
// it calls each step's tool when that tool is in the request, calls
// tool_search with the step's keywords when it is not, and answers in text
// when the steps are done; a tool_choice of "none" keeps it from calling.
// It refuses more than MaxTools tools on every route, as OpenAI does. Tests, `gateway demo` and `gateway bench` use it;
// it must never be wired into serve.
package fakellm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// Step is one tool call a task needs.
type Step struct {
	Tool  string          `json:"tool"`
	Query string          `json:"query"`
	Args  json.RawMessage `json:"args"`
}

// Task is one scripted conversation, matched by its prompt (the first user
// message).
type Task struct {
	Name   string `json:"name"`
	Prompt string `json:"prompt"`
	Steps  []Step `json:"steps"`
	Answer string `json:"answer"`
}

// Record is what the model saw in one request.
type Record struct {
	Tools      int
	ToolsBytes int
	BodyBytes  int
	// PromptTokens is the input tokens the reply reported: a quarter of
	// the body's bytes, and of the context a chained Responses request
	// continues.
	PromptTokens int64
	Stream       bool
	Names        []string
	Body         []byte
}

// Model is the scripted upstream. Set its fields before serving.
type Model struct {
	Tasks []Task
	// MaxTools refuses requests with more tools (0 means 128).
	MaxTools int
	// ChunkDelay is slept between streamed chunks.
	ChunkDelay time.Duration
	// Whole sends a streamed reply in one write, as a fast server does
	// with a short answer, instead of flushing each chunk.
	Whole bool
	// MaxSearches is how many tool_search calls the model makes for one step
	// before it gives up (0 means 2).
	MaxSearches int
	// Keep records every request's body when true.
	Keep bool
	// Reckless makes the model call each step's tool even when the request
	// does not offer it, as real models sometimes do.
	Reckless bool
	// Reasoning makes Responses API replies lead with a reasoning item
	// that must come back with the call it led to (responses.go), and
	// Messages API replies with a signed thinking block that must come
	// back at the head of the calls it led to (messages.go).
	Reasoning bool
	// ThinkOnce makes Messages API reasoning that of Claude's models
	// without interleaved thinking: a thinking block leads only the reply
	// to a user's own message, none the replies to tool results (the
	// assistant's turn goes on from the thinking it began with), and the
	// turn's first assistant message with calls, not its last, must start
	// with it.
	ThinkOnce bool
	// Owner names who a request is from, for the stored responses' owners:
	// by default its credential (Authorization, else X-Api-Key). A test of
	// a credential that rotates maps its tokens to one owner.
	Owner func(r *http.Request) string
	// Narrate is what the model says before each search: the content of
	// its Chat Completions message, a message item of its Responses API
	// reply or a text block of its Messages API reply ("Let me look that
	// up.").
	Narrate string

	seq     atomic.Int64
	mu      sync.Mutex
	records []Record
	// stored keeps every Responses API response's items (its input and
	// output), for previous_response_id; reasoned marks the calls that
	// came with a reasoning item.
	stored map[string][]gjson.Result
	// wholes keeps each stored response as it was answered, for GET.
	wholes map[string]string
	// owners keeps whose each stored response is (Owner): another's
	// retrieve, delete or chain from it finds nothing, as the API answers
	// a key of another organisation.
	owners map[string]string
	// ephemeral holds the item ids of responses to store-false requests,
	// which OpenAI cannot look up later.
	ephemeral map[string]bool
	reasoned  map[string]bool
	follows   map[string]string // reasoning item id -> the type of the item after it
	// signed maps each Messages API thinking signature to the thinking
	// it came with, so an edited or forged thinking block is refused.
	signed map[string]string
}

// owner returns who r is from (Owner).
func (m *Model) owner(r *http.Request) string {
	if m.Owner != nil {
		return m.Owner(r)
	}
	if a := r.Header.Get("Authorization"); a != "" {
		return a
	}
	return r.Header.Get("X-Api-Key")
}

// mine returns the stored response id's items, if it is stored and r's
// owner's; the caller holds mu.
func (m *Model) mine(r *http.Request, id string) ([]gjson.Result, bool) {
	items, ok := m.stored[id]
	return items, ok && m.owners[id] == m.owner(r)
}

// Records returns what the model saw, in order.
func (m *Model) Records() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.records...)
}

// Stored returns the ids of the Responses API responses the model keeps.
func (m *Model) Stored() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.stored))
	for id := range m.stored {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Reset forgets the records.
func (m *Model) Reset() {
	m.mu.Lock()
	m.records = nil
	m.mu.Unlock()
}

// ServeHTTP answers POST /chat/completions, POST /responses and POST
// /messages (under any prefix), GET /models, and GET and DELETE
// /responses/{id}.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"fake-model","object":"model","created":1700000000,"owned_by":"toolgate"}]}`)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		m.chat(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		m.responses(w, r)
	case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/responses/"):
		m.deleteResponse(w, r)
	case r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/responses/"):
		m.getResponse(w, r)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		m.messages(w, r)
	default:
		writeErr(w, http.StatusNotFound, "unknown path "+r.URL.Path, "not_found")
	}
}

func writeErr(w http.ResponseWriter, status int, msg, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
	_, _ = w.Write(b)
}

// refusal writes an error in the shape of a route's API.
type refusal func(w http.ResponseWriter, status int, msg, code string)

// readRequest reads a request's body and tools, or refuses it as the
// upstream would (ok false): a body that is not JSON, more than MaxTools
// tools.
func (m *Model) readRequest(w http.ResponseWriter, r *http.Request, refuse refusal) (body []byte, req gjson.Result, tools []gjson.Result, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil || !gjson.ValidBytes(body) {
		refuse(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_json")
		return nil, req, nil, false
	}
	req = gjson.ParseBytes(body)
	tools = req.Get("tools").Array()
	if max := cmp.Or(m.MaxTools, 128); len(tools) > max {
		refuse(w, http.StatusBadRequest, fmt.Sprintf("Invalid 'tools': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", max, len(tools)), "array_above_max_length")
		return nil, req, nil, false
	}
	return body, req, tools, true
}

// recordOf is the record of a request readRequest read: its tools, its
// size and whether it streams; each route adds the names it offers.
func recordOf(body []byte, req gjson.Result, tools []gjson.Result) Record {
	return Record{Tools: len(tools), ToolsBytes: len(req.Get("tools").Raw), BodyBytes: len(body), PromptTokens: int64(len(body) / 4), Stream: req.Get("stream").Bool()}
}

func (m *Model) chat(w http.ResponseWriter, r *http.Request) {
	body, req, tools, ok := m.readRequest(w, r, writeErr)
	if !ok {
		return
	}
	rec := recordOf(body, req, tools)
	avail := map[string]bool{}
	for _, t := range tools {
		n := t.Get("function.name").String()
		avail[n] = true
		rec.Names = append(rec.Names, n)
	}
	search := SearchTool(rec.Names)
	if callsForbidden(req) {
		avail, search = nil, ""
	}
	if m.Keep {
		rec.Body = body
	}
	m.mu.Lock()
	m.records = append(m.records, rec)
	m.mu.Unlock()

	reply := m.decide(req, avail, search)
	reply.promptTokens = rec.PromptTokens
	if m.Narrate != "" && reply.call != nil && reply.call.name == search {
		reply.content = m.Narrate
	}
	if rec.Stream {
		m.stream(w, r, reply, req.Get("stream_options.include_usage").Bool())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_fake")
	_, _ = w.Write(reply.json(m))
}

// SearchTool returns the name of the gateway's search tool among a
// request's tool names: toolgate_search where the gateway took that name
// (the client has a tool_search of its own), else tool_search, else "".
// A real model reads the tools' descriptions; a scripted one goes by name.
func SearchTool(names []string) string {
	for _, want := range [...]string{"toolgate_search", "tool_search"} {
		for _, n := range names {
			if n == want {
				return want
			}
		}
	}
	return ""
}

// callsForbidden reports whether a request's tool_choice is the API's
// "none" (Chat and Responses "none", Messages {"type":"none"}): the model
// calls nothing and answers from what it has.
func callsForbidden(req gjson.Result) bool {
	c := req.Get("tool_choice")
	return c.String() == "none" || c.Get("type").String() == "none"
}

// decide plays the model's turn from the conversation so far; search is
// the gateway's search tool, "" if the request has none.
func (m *Model) decide(req gjson.Result, avail map[string]bool, search string) reply {
	msgs := req.Get("messages").Array()
	// The task is the latest user message's; only what happened after it
	// counts, so a conversation can go through several tasks in turn.
	var latest string
	var called []string
	searches := 0
	for _, msg := range msgs {
		switch msg.Get("role").String() {
		case "user":
			latest, called, searches = text(msg.Get("content")), nil, 0
		case "assistant":
			msg.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
				n := c.Get("function.name").String()
				if n == search {
					searches++
				} else {
					called = append(called, n)
					searches = 0
				}
				return true
			})
		}
	}
	task := m.find(latest)
	if task == nil {
		return reply{content: "Hello! How can I help?"}
	}
	done := 0
	for _, n := range called {
		if done < len(task.Steps) && n == task.Steps[done].Tool {
			done++
		}
	}
	if done == len(task.Steps) {
		return reply{content: task.Answer}
	}
	step := task.Steps[done]
	limit := m.MaxSearches
	if limit == 0 {
		limit = 2
	}
	switch {
	case avail[step.Tool] || m.Reckless:
		args := string(step.Args)
		if args == "" {
			args = "{}"
		}
		return reply{call: &call{name: step.Tool, args: args}}
	case search != "" && searches < limit:
		q, _ := json.Marshal(map[string]string{"query": step.Query})
		return reply{call: &call{name: search, args: string(q)}}
	default:
		return reply{content: "I could not find a tool to " + step.Query + "."}
	}
}

func (m *Model) find(prompt string) *Task {
	for i := range m.Tasks {
		if m.Tasks[i].Prompt == prompt {
			return &m.Tasks[i]
		}
	}
	return nil
}

func text(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.String()
	}
	var parts []string
	c.ForEach(func(_, p gjson.Result) bool {
		parts = append(parts, p.Get("text").String())
		return true
	})
	return strings.Join(parts, "\n")
}
