package demo

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"
)

// meter sits in front of the scripted upstream and counts what each
// request would cost a real one: the tokens of the tools array and of the
// rest of the body (messages and settings), with o200k_base, the BPE of the
// current OpenAI models. It measures the upstream's side of the wire, so
// the direct and the gateway runs are counted the same way whatever the
// gateway reports about itself.
type meter struct {
	next  http.Handler
	codec tokenizer.Codec

	mu     sync.Mutex
	counts map[string]int // text -> tokens: tools arrays, tools and messages repeat
	cache  *prefixCache
	stats  usage
}

// usage is what a run cost at the upstream.
type usage struct {
	Calls       int   // upstream requests
	Tools       int   // tools summed over requests
	ToolTokens  int64 // tool-definition tokens summed over requests
	InputTokens int64 // whole-prompt tokens summed over requests
	// CachedTokens is how many of InputTokens a provider's prompt cache
	// would serve (prefixCache's estimate).
	CachedTokens int64
	Refused      int // requests the upstream refused (4xx/5xx)
}

// billed is the input a run is billed for when cached tokens cost rate
// times the input price (OpenAI: 0.5 for gpt-4o, 0.1 for the gpt-5 family).
func (u usage) billed(rate float64) float64 {
	return float64(u.InputTokens) - (1-rate)*float64(u.CachedTokens)
}

func newMeter(next http.Handler, codec tokenizer.Codec) *meter {
	return &meter{next: next, codec: codec, counts: map[string]int{}, cache: newPrefixCache()}
}

func (m *meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		m.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	toolTok, restTok, n, err := m.count(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	items, err := m.promptItems(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	m.next.ServeHTTP(sw, r)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.Calls++
	if sw.status >= 400 {
		m.stats.Refused++
		return
	}
	m.stats.Tools += n
	m.stats.ToolTokens += int64(toolTok)
	m.stats.InputTokens += int64(toolTok + restTok)
	// A refused request caches nothing: only accepted prompts are served
	// from or fill the estimate.
	m.stats.CachedTokens += int64(min(m.cache.serve(items), toolTok+restTok))
}

// promptItems returns body's tools, then its messages (or input items), each with its
// tokens, in the order a provider lays out the prompt.
func (m *meter) promptItems(body []byte) ([]promptItem, error) {
	var items []promptItem
	var err error
	add := func(_, v gjson.Result) bool {
		var n int
		if n, err = m.tokens(v.Raw); err != nil {
			err = fmt.Errorf("counting prompt tokens: %w", err)
			return false
		}
		items = append(items, promptItem{text: v.Raw, tokens: n})
		return true
	}
	gjson.GetBytes(body, "tools").ForEach(add)
	if sys := gjson.GetBytes(body, "system"); err == nil && sys.Exists() { // the Messages API's, between the two
		add(gjson.Result{}, sys)
	}
	if err == nil {
		gjson.GetBytes(body, "messages").ForEach(add)
	}
	if err == nil { // a Responses API body's conversation
		gjson.GetBytes(body, "input").ForEach(add)
	}
	return items, err
}

// count returns the tokens of body's tools array, of the rest of the body,
// and the number of tools.
func (m *meter) count(body []byte) (tools, rest, n int, err error) {
	t := gjson.GetBytes(body, "tools")
	restText := string(body)
	if t.Exists() && t.Index > 0 {
		restText = string(body[:t.Index]) + string(body[t.Index+len(t.Raw):])
		n = len(t.Array())
		if tools, err = m.tokens(t.Raw); err != nil {
			return 0, 0, 0, fmt.Errorf("counting tool tokens: %w", err)
		}
	}
	if rest, err = m.codec.Count(restText); err != nil {
		return 0, 0, 0, fmt.Errorf("counting prompt tokens: %w", err)
	}
	return tools, rest, n, nil
}

func (m *meter) usage() usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// tokens returns text's tokens, counted once per text: catalogs, their
// tools and a conversation's earlier messages come back with every request.
func (m *meter) tokens(text string) (int, error) {
	m.mu.Lock()
	n, ok := m.counts[text]
	m.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := m.codec.Count(text)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	m.counts[text] = n
	m.mu.Unlock()
	return n, nil
}
