package proxy

import (
	"bufio"
	"bytes"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
)

// TestAChunksNullUsageIsWhatTheClientAskedFor: with include_usage, OpenAI
// puts "usage": null on every chunk but the last, and the gateway always
// asks for usage. A client that asked for it has those nulls direct and
// keeps them (removing them cost a copy of every event); one that did not
// ask gets chunks without the member, as direct. A usage object riding on
// a content chunk (vLLM's continuous usage) never reaches the client: it
// gets one summed usage chunk, if it asked.
func TestAChunksNullUsageIsWhatTheClientAskedFor(t *testing.T) {
	withNull := func(chunk string) string {
		return strings.Replace(chunk, `"choices":`, `"usage":null,"choices":`, 1)
	}
	withUsage := func(chunk string) string {
		return strings.Replace(chunk, `"choices":`, `"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8},"choices":`, 1)
	}
	search := callChunk(0, "call_s1", SearchToolName, `{"query":"create issue repository"}`)
	for _, tc := range []struct {
		name     string
		rounds   []string
		asked    bool
		wantNull bool // every chunk but the usage chunk carries "usage": null
	}{
		{"a client that asked for usage keeps the nulls of a round without a search", []string{withNull(textChunk("Hi")) + withNull(finishChunk("stop")) + doneEvent}, true, true},
		{"a client that asked for usage keeps the nulls of a round after a search", []string{withNull(search) + withNull(finishChunk("tool_calls")) + doneEvent, withNull(textChunk("Filed.")) + withNull(finishChunk("stop")) + doneEvent}, true, true},
		{"a client that did not ask gets no usage member", []string{withNull(textChunk("Hi")) + withNull(finishChunk("stop")) + doneEvent}, false, false},
		{"a usage object on a content chunk never reaches the client", []string{withUsage(textChunk("Hi")) + withUsage(finishChunk("stop")) + doneEvent}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			base := newTestGateway(t, sseHandler(&calls, tc.rounds...))
			extra := map[string]any{}
			if tc.asked {
				extra["stream_options"] = map[string]any{"include_usage": true}
			}
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "File a bug."}}, testCatalog(40), true, extra), nil)
			if int(calls.Load()) != len(tc.rounds) {
				t.Fatalf("%d upstream calls, want %d: %s", calls.Load(), len(tc.rounds), x.body)
			}
			var chunks, nulls, objects int
			sc := bufio.NewScanner(bytes.NewReader(x.body))
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				u := gjson.Get(data, "usage")
				switch {
				case u.IsObject() && len(gjson.Get(data, "choices").Array()) == 0:
					continue // the gateway's summed usage chunk
				case u.IsObject():
					objects++
				case u.Exists():
					nulls++
				}
				chunks++
			}
			if objects > 0 {
				t.Errorf("%d content chunks carry a usage object:\n%s", objects, x.body)
			}
			if want := map[bool]int{true: chunks, false: 0}[tc.wantNull]; nulls != want || chunks == 0 {
				t.Errorf("%d of %d chunks carry usage null; want %d:\n%s", nulls, chunks, want, x.body)
			}
		})
	}
}
