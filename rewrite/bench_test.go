package rewrite

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParseEvent is the relay's per-event parse, for the chunks a
// streamed answer is made of: it runs once per event of every streamed
// round, and a short answer's nine events, parsed at 0.9 µs each, measure
// as most of what a streamed turn costs over a json one.
func BenchmarkParseEvent(b *testing.B) {
	for _, tc := range []struct{ name, data string }{
		{"content chunk", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"report "},"finish_reason":null}]}`},
		{"tool call chunk", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"repo_search","arguments":"{\"q\":\"retry\"}"}}]},"finish_reason":null}]}`},
		{"usage chunk", `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":7,"total_tokens":1207}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			data := []byte(tc.data)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var ev Event
			for b.Loop() {
				if err := (Chat{}).ParseEvent(data, &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// historyOfCalls is a Chat Completions request whose one assistant message
// makes n calls, each of another name: the turn's history a client can
// send in a few MB.
func historyOfCalls(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function","function":{"name":"f%d"}}`, i)
	}
	b.WriteString(`]}]}`)
	return []byte(b.String())
}

// BenchmarkParseHistoryCalls parses a history of n calls of distinct
// names: the time per call must not grow with n.
func BenchmarkParseHistoryCalls(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		body := historyOfCalls(n)
		b.Run(fmt.Sprintf("%d calls", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseRequest(body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/call")
		})
	}
}
