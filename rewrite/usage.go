package rewrite

// The usage arithmetic of a turn and the finish reasons that end one,
// shared by the three dialects. These functions mix the field names of the
// three APIs on purpose (Chat Completions' prompt_tokens and
// completion_tokens, the Responses API's input_tokens, output_tokens and
// input_tokens_details, Anthropic's cache_read_input_tokens and
// cache_creation_input_tokens; finish_reason, status and stop_reason
// values alike): proxy sums and reports a turn's usage, and passthrough
// reads a response's, without asking which API it speaks. Each API's usage
// object carries only its own names, so looking each name up in turn
// reads any of them, and the names of the other APIs are simply absent.

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// AddUsage adds every number in u to the same path of acc and returns the
// sum; acc nil starts from u. Fields only one side has are kept, so the sum
// keeps whatever detail objects the upstream reports. It sums rounds.
func AddUsage(acc []byte, u gjson.Result) []byte { return mergeUsage(acc, u, addNumbers) }

// LatestUsage sets every number in u at the same path of acc: within one
// stream, a later usage chunk stands for the earlier ones. OpenAI sends one;
// Gemini's compatible endpoint (and vLLM's continuous usage stats) send the
// running total with every chunk, which summing would count once per chunk.
func LatestUsage(acc []byte, u gjson.Result) []byte {
	return mergeUsage(acc, u, func(_, v gjson.Result) string { return v.Raw })
}

// CutShort reports whether a response's finish reason (Chat's
// finish_reason, the Responses API's status, Anthropic's stop_reason)
// says it ended short of its answer: out of tokens or context, filtered
// or refused. A tool call in such a response may be cut off, and asking
// again would end the same way, so no round of the gateway's follows it.
func CutShort(reason string) bool {
	switch reason {
	case "length", "content_filter", "incomplete", "max_tokens", "model_context_window_exceeded", "refusal":
		return true
	}
	return false
}

// ContextUsage returns the summed usage of a turn's rounds with its input
// counts replaced by those of last, the turn's last round: the size of
// the context the model answered from, where the sum counts the
// conversation once per round. The input counts are the members that
// count a request's prompt in each API (prompt_tokens and its details,
// input_tokens and its details, Anthropic's cache reads and writes); the
// rest (output, reasoning, a provider's cost) stays summed, and
// total_tokens is the new input plus the summed output.
func ContextUsage(sum, last []byte) []byte {
	if sum == nil || len(last) == 0 {
		return sum
	}
	out := append([]byte(nil), sum...)
	l := gjson.ParseBytes(last)
	l.ForEach(func(k, v gjson.Result) bool {
		if inputCount(k.Str) {
			out, _ = sjson.SetRawBytes(out, escapePath(k.Str), []byte(v.Raw))
		}
		return true
	})
	if total := gjson.GetBytes(out, "total_tokens"); total.Type == gjson.Number && isWhole(total.Raw) {
		s := gjson.ParseBytes(sum)
		out, _ = sjson.SetBytes(out, "total_tokens", total.Int()-promptCount(s)+promptCount(l))
	}
	return out
}

// inputCount reports whether a usage member counts the request's input.
// DeepSeek splits its prompt_tokens into prompt_cache_hit_tokens and
// prompt_cache_miss_tokens: left summed over rounds, their sum would no
// longer be the prompt the context's usage reports.
func inputCount(member string) bool {
	switch member {
	case "prompt_tokens", "prompt_tokens_details", "input_tokens", "input_tokens_details",
		"cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation",
		"prompt_cache_hit_tokens", "prompt_cache_miss_tokens":
		return true
	}
	return false
}

// promptCount is the usage's prompt tokens as total_tokens counts them.
func promptCount(u gjson.Result) int64 {
	if p := u.Get("prompt_tokens"); p.Exists() {
		return p.Int()
	}
	return u.Get("input_tokens").Int()
}

// addNumbers returns the JSON text of prev + v: a whole number for token
// counts, a decimal when either is fractional (OpenRouter's cost in
// dollars), rounded to 15 significant digits so a sum of two decimals
// reads 0.00034, not 0.00034000000000000003.
func addNumbers(prev, v gjson.Result) string {
	if isWhole(prev.Raw) && isWhole(v.Raw) {
		return strconv.FormatInt(prev.Int()+v.Int(), 10)
	}
	return strconv.FormatFloat(prev.Float()+v.Float(), 'g', 15, 64)
}

// isWhole reports whether a JSON number's text is an integer literal.
func isWhole(raw string) bool { return !strings.ContainsAny(raw, ".eE") }

// mergeUsage combines each number of u with the number at its path in acc
// (a number acc lacks is taken as it is) and returns acc; acc nil starts
// from u. combine returns the JSON text of the merged number.
func mergeUsage(acc []byte, u gjson.Result, combine func(prev, v gjson.Result) string) []byte {
	if !u.IsObject() {
		return acc
	}
	if acc == nil {
		return []byte(u.Raw)
	}
	var walk func(prefix string, r gjson.Result)
	walk = func(prefix string, r gjson.Result) {
		r.ForEach(func(k, v gjson.Result) bool {
			p := prefix + escapePath(k.String())
			switch {
			case v.IsObject():
				walk(p+".", v)
			case v.Type == gjson.Number:
				prev := gjson.GetBytes(acc, p)
				if prev.Type == gjson.Number {
					acc, _ = sjson.SetRawBytes(acc, p, []byte(combine(prev, v)))
				} else if !prev.Exists() || prev.Type == gjson.Null {
					acc, _ = sjson.SetRawBytes(acc, p, []byte(v.Raw))
				}
			}
			return true
		})
	}
	walk("", u)
	return acc
}

// UsageTokens reads prompt and completion tokens of a usage object:
// Chat Completions' prompt_tokens and completion_tokens, or the Responses
// and Messages APIs' input_tokens and output_tokens. The Messages API
// counts the prompt's cache reads and writes apart from its input_tokens;
// they are the prompt's too.
func UsageTokens(u gjson.Result) (prompt, completion int64) {
	if p := u.Get("prompt_tokens"); p.Exists() {
		return p.Int(), u.Get("completion_tokens").Int()
	}
	prompt = u.Get("input_tokens").Int() + u.Get("cache_read_input_tokens").Int() + u.Get("cache_creation_input_tokens").Int()
	return prompt, u.Get("output_tokens").Int()
}

// CachedTokens reads how many of a usage object's input tokens were
// prompt-cache hits (prompt_tokens_details.cached_tokens, the Responses
// API's input_tokens_details.cached_tokens, the Messages API's
// cache_read_input_tokens); ok is false when
// it reports none.
func CachedTokens(u gjson.Result) (cached int64, ok bool) {
	c := u.Get("prompt_tokens_details.cached_tokens")
	if !c.Exists() {
		c = u.Get("input_tokens_details.cached_tokens")
	}
	if !c.Exists() {
		c = u.Get("cache_read_input_tokens")
	}
	return c.Int(), c.Type == gjson.Number && c.Int() >= 0 // a counter cannot go down
}

// HasInputTokens reports whether u counts input tokens, in either API's
// name.
func HasInputTokens(u gjson.Result) bool {
	return u.Get("prompt_tokens").Type == gjson.Number || u.Get("input_tokens").Type == gjson.Number
}

// LastUsage returns the last "usage" member of line, one event of any
// API's stream, whose value is an object; ok is false when it has none.
// It scans for the key before gjson reads (and copies) anything, so the
// many lines without a usage (deltas, or OpenAI's "usage": null in every
// chunk) cost a search only. A key is never inside a JSON string (its
// quotes would be escaped there), and the usage of a Responses event
// follows the tools it repeats, whose schemas may name a property
// "usage": hence the last one. The usage's Raw begins at the object and,
// as gjson.Parse leaves it, runs on to the line's end: read it with Get.
// It does not validate line, nor check where in it the member stands.
func LastUsage(line []byte) (usage gjson.Result, ok bool) {
	key := []byte(`"usage"`)
	for end := len(line); ; {
		i := bytes.LastIndex(line[:end], key)
		if i < 0 {
			return gjson.Result{}, false
		}
		end = i
		v := bytes.TrimLeft(line[i+len(key):], " \t")
		if len(v) == 0 || v[0] != ':' {
			continue
		}
		if v = bytes.TrimLeft(v[1:], " \t"); len(v) > 0 && v[0] == '{' {
			return gjson.ParseBytes(v), true
		}
	}
}

// escapePath escapes the characters gjson and sjson read as path syntax,
// so a usage member's name is one path element whatever it holds.
func escapePath(k string) string {
	out := make([]byte, 0, len(k))
	for i := 0; i < len(k); i++ {
		switch k[i] {
		case '.', '*', '?', '|', '#', '@', '\\', '!', '=', '<', '>', '%':
			out = append(out, '\\')
		}
		out = append(out, k[i])
	}
	return string(out)
}
