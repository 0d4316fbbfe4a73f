package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/embeddings"
)

// fourSearches is a model that answers a user message with four
// tool_search calls at once, each query its own, and anything else in
// text.
type fourSearches struct{}

func (fourSearches) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	last := gjson.GetBytes(body, "messages.@reverse.0")
	msg := `{"role":"assistant","content":"done"}`
	if last.Get("role").String() == "user" {
		var calls []map[string]any
		for i, q := range []string{"create an issue", "read a file", "post a chat message", "open a web page"} {
			args, _ := json.Marshal(map[string]string{"query": q + " for " + last.Get("content").String()})
			calls = append(calls, map[string]any{"id": fmt.Sprint("s", i), "type": "function",
				"function": map[string]string{"name": SearchToolName, "arguments": string(args)}})
		}
		b, _ := json.Marshal(calls)
		msg = `{"role":"assistant","content":null,"tool_calls":` + string(b) + `}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":`+msg+`,"finish_reason":"stop"}]}`)
}

func TestATurnsSearchesShareOneQueryTimeout(t *testing.T) {
	// Queries take slow: slower than usual, inside the query timeout, so
	// the endpoint never fails and never cools down. The catalog's
	// vectors come at once.
	const slow, timeout = 150 * time.Millisecond, 250 * time.Millisecond
	var queries atomic.Int32
	emb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Input []string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if len(req.Input) == 1 {
			queries.Add(1)
			select {
			case <-time.After(slow):
			case <-r.Context().Done():
				return
			}
		}
		var data []map[string]any
		for i, s := range req.Input {
			data = append(data, map[string]any{"index": i, "embedding": []float32{1, float32(len(s) % 7), float32(i%5) + 0.5}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(emb.Close)
	e, err := embeddings.NewOpenAI(embeddings.OpenAIOptions{BaseURL: emb.URL, Model: "m", QueryTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	pol := loadPolicy(t, "gateway: {mode: search}\nsearch:\n  embeddings: {provider: openai}\n")
	base := newTestGateway(t, fourSearches{}, withPolicy(pol), func(g *Gateway) { g.Embedder = e })
	tools := testCatalog(40)
	turn := func(ask string) {
		t.Helper()
		resp := post(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": ask}}, tools, false, nil), nil)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || gjson.GetBytes(b, "choices.0.message.content").String() != "done" {
			t.Fatalf("status %d, body %s; want the model's answer after its searches", resp.StatusCode, b)
		}
	}
	// The first turns compile the catalog and wait for its vectors: a
	// query is embedded only once they are in.
	for i := 0; queries.Load() == 0; i++ {
		if i == 50 {
			t.Fatal("no query was ever embedded")
		}
		turn(fmt.Sprint("warm-up ", i))
	}
	t.Run("a turn of four searches waits for two queries at most, not four", func(t *testing.T) {
		before := queries.Load()
		turn("the task")
		if n := queries.Load() - before; n < 1 || n > 2 {
			t.Errorf("the turn embedded %d queries, want 1 or 2: its searches share one query timeout", n)
		}
	})
}
