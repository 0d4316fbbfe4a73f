package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// TestPooledBodiesNeverMixRequests sends many concurrent requests that
// share a catalog (so their body buffers go back to the pool and are
// reused), each with its own user message, rewritten or passed through:
// every upstream call must carry its own request's message and every
// client must get the answer to its own.
func TestPooledBodiesNeverMixRequests(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var last string
		gjson.GetBytes(b, "messages").ForEach(func(_, m gjson.Result) bool {
			if m.Get("role").String() == "user" {
				last = m.Get("content").String()
			}
			return true
		})
		answer := last + "|" + strconv.Itoa(len(gjson.GetBytes(b, "tools").Array()))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, answer)
	})
	base := newTestGateway(t, upstream)
	tools := testCatalog(120) // about 24 KB: pooled, and a catalog the fast path takes
	if n := len(chatRequest(t, nil, tools, false, nil)); n < minPooledBody {
		t.Fatalf("the request is %d bytes, too small to use the pool", n)
	}
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				msg := fmt.Sprintf("client %d request %d: list the open issues", c, i)
				extra := map[string]any{}
				if i%5 == 4 {
					extra["n"] = 2 // passed through with the client's whole tools array
				}
				body := chatRequest(t, []map[string]any{{"role": "user", "content": msg}}, tools, false, extra)
				resp := post(t, base, body, map[string]string{"X-Session-ID": "pool-" + strconv.Itoa(c)})
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d: %s", resp.StatusCode, out)
					return
				}
				got := gjson.GetBytes(out, "choices.0.message.content").String()
				prefix := msg + "|"
				if len(got) < len(prefix) || got[:len(prefix)] != prefix {
					t.Errorf("request %q got the answer %q", msg, got)
					continue
				}
				// Passed through: the whole catalog; rewritten: a few tools.
				n, _ := strconv.Atoi(got[len(prefix):])
				if passthrough := i%5 == 4; (n == len(tools)) != passthrough || n == 0 {
					t.Errorf("request %q: the upstream saw %d tools", msg, n)
				}
			}
		}()
	}
	wg.Wait()
}
