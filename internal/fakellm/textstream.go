package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// TextStream is a streamed chat completion that says words: a role chunk,
// a chunk per word, a finish chunk, a usage chunk and [DONE], framed as
// an OpenAI-compatible server sends them. Benchmarks answer with it at
// once, where a Model would decide first.
func TextStream(id, model string, words ...string) string {
	id, model = jsonString(id), jsonString(model)
	head := fmt.Sprintf(`data: {"id":%s,"object":"chat.completion.chunk","created":1700000000,"model":%s,"choices":[{"index":0,"delta":`, id, model)
	var b strings.Builder
	b.WriteString(head + `{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for _, w := range words {
		fmt.Fprintf(&b, "%s{\"content\":%s},\"finish_reason\":null}]}\n\n", head, jsonString(w))
	}
	b.WriteString(head + `{},"finish_reason":"stop"}]}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":%s,"object":"chat.completion.chunk","created":1700000000,"model":%s,"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
		id, model, len(words)+2, 1200+len(words)+2)
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}
