package proxy

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
)

// toolRecorder records the tool names each request offered the upstream
// and answers it with the next of replies (the last repeats), or in text
// when there are none.
type toolRecorder struct {
	replies []string

	mu   sync.Mutex
	seen [][]string
}

func (r *toolRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	names := toolNames(body)
	r.mu.Lock()
	n := len(r.seen)
	r.seen = append(r.seen, names)
	r.mu.Unlock()
	reply := `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`
	if len(r.replies) > 0 {
		reply = r.replies[min(n, len(r.replies)-1)]
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, reply)
}

func (r *toolRecorder) last() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[len(r.seen)-1]
}

// offer sends msgs with tools to the gateway at base (in front of r) with
// the headers hdr and returns the tool names the upstream was offered.
func (r *toolRecorder) offer(t *testing.T, base string, tools, msgs []map[string]any, hdr map[string]string) []string {
	t.Helper()
	resp := post(t, base, chatRequest(t, msgs, tools, false, nil), hdr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return r.last()
}

// toolStep is one step of a conversation: the assistant's call of name
// with args, and the tool's result.
func toolStep(id, name, args, result string) []map[string]any {
	return []map[string]any{
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}},
		{"role": "tool", "tool_call_id": id, "content": result},
	}
}

func TestExplorationSlot(t *testing.T) {
	const ask = "Create an issue, merge the pull request, delete the branch, read the file, post in the chat channel and send an email."
	tools := testCatalog(40)
	offered := func(t *testing.T, policyText, session string) []string {
		t.Helper()
		rec := &toolRecorder{}
		base := newTestGateway(t, rec, withPolicy(loadPolicy(t, policyText)))
		return rec.offer(t, base, tools, []map[string]any{{"role": "user", "content": ask}}, map[string]string{"X-Session-ID": session})
	}
	ranked := offered(t, "gateway: {mode: preselect, preselect: 6}\n", "s")
	if len(ranked) != 6 {
		t.Fatalf("the ranking to compare with has %d tools: %v", len(ranked), ranked)
	}

	t.Run("without explore, preselect mode offers the top tools", func(t *testing.T) {
		got := offered(t, "gateway: {mode: preselect, preselect: 3}\n", "s")
		if !slices.Equal(got, ranked[:3]) {
			t.Errorf("offered %v, want the top 3 of %v", got, ranked)
		}
	})

	const exploring = "gateway: {mode: preselect, preselect: 3, explore: true}\n"
	drawn := map[string]bool{}
	for i := range 12 {
		session := fmt.Sprintf("conv-%d", i)
		got := offered(t, exploring, session)
		t.Run(fmt.Sprintf("with explore, %s keeps the top two and draws the third from just below the cut", session), func(t *testing.T) {
			if len(got) != 3 || !slices.Equal(got[:2], ranked[:2]) || !slices.Contains(ranked[2:], got[2]) {
				t.Fatalf("offered %v; ranking %v", got, ranked)
			}
			drawn[got[2]] = true
		})
		if i == 0 {
			t.Run("a retried turn draws the same tool", func(t *testing.T) {
				if again := offered(t, exploring, session); !slices.Equal(again, got) {
					t.Errorf("first %v, retry %v", got, again)
				}
			})
		}
	}
	t.Run("different conversations explore different tools", func(t *testing.T) {
		if len(drawn) < 2 {
			t.Errorf("12 conversations all drew %v", drawn)
		}
	})

	t.Run("hybrid mode ignores explore: the model can search instead", func(t *testing.T) {
		got := offered(t, "gateway: {mode: hybrid, preselect: 3, explore: true}\n", "s")
		if !slices.Equal(got, append([]string{"tool_search"}, ranked[:3]...)) {
			t.Errorf("offered %v, want tool_search and the top 3 of %v", got, ranked)
		}
	})
}
