package proxy

import (
	"bytes"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
)

// maxUsageTap bounds the whole answer a passthrough keeps to read its
// usage from; a longer one goes uncounted.
const maxUsageTap = 1 << 20

// usageWindow is how much of a stream line a passthrough keeps while the
// line arrives in pieces: its end. A Responses stream's usage is in
// response.completed, which repeats the request's tools and the whole
// output (an image's base64 too) and may be as long as the answer; the
// usage closes it, followed only by a few short members, so the line's
// end holds it, and the tap never holds the line.
const usageWindow = 64 << 10

// usageTap reads a passed-through answer's usage as it is relayed: a
// whole (non-streamed) answer is kept up to maxUsageTap and read at the
// end; a stream is read line by line, each line's last "usage" object
// (within its last usageWindow bytes), and only the latest usage that
// carries input tokens is kept, never the stream. The usage may be
// anywhere: OpenAI's include_usage chunk and Anthropic's message_delta
// come last, the Responses API's response.completed is longer than any
// fixed end of the stream, and an Anthropic-compatible upstream may count
// input tokens in its first event, message_start, alone. Only
// uncompressed 200s with tools are read.
type usageTap struct {
	on     bool
	stream bool
	buf    []byte // a whole answer; the end of a stream's line begun in an earlier read
	last   []byte // a stream's latest usage with input tokens
}

func newUsageTap(req *rewrite.Request, resp *http.Response) *usageTap {
	return &usageTap{
		on:     len(req.Tools) > 0 && resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Encoding") == "",
		stream: req.Stream,
	}
}

func (u *usageTap) see(b []byte) {
	switch {
	case !u.on:
	case u.stream:
		u.seeLines(b)
	case len(u.buf)+len(b) > maxUsageTap:
		u.on, u.buf = false, nil
	default:
		u.buf = append(u.buf, b...)
	}
}

// seeLines reads a stream's next bytes: a line whole in b is read in
// place, one cut by the read is held (its last usageWindow bytes) until
// its end arrives.
func (u *usageTap) seeLines(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if i >= 0 && len(u.buf) == 0 {
			u.line(part)
		} else {
			u.buf = append(u.buf, part...)
			if len(u.buf) > 2*usageWindow {
				// Dropped a window at a time, so that each byte is
				// moved at most twice.
				u.buf = append(u.buf[:0], u.buf[len(u.buf)-usageWindow:]...)
			}
			if i >= 0 {
				u.line(u.buf)
			}
		}
		if i < 0 {
			return
		}
		u.buf, b = u.buf[:0], b[i+1:]
	}
}

// line keeps the usage of a line whose last "usage" member is an object
// that counts input tokens. Most lines are deltas, without one or with
// "usage": null (OpenAI's every chunk, with include_usage): they are
// ruled out by a scan, before gjson reads (and copies) anything.
func (u *usageTap) line(l []byte) {
	if usage, ok := rewrite.LastUsage(l); ok && rewrite.HasInputTokens(usage) {
		u.last = append(u.last[:0], usage.Raw...)
	}
}

// tokens returns the answer's input tokens (usage.prompt_tokens, or the
// Responses API's input_tokens), 0 when it was not kept or has none, and
// of them the prompt-cache hits, -1 when it reports none.
func (u *usageTap) tokens() (prompt, cached int64) {
	usage := u.usage()
	prompt, _ = rewrite.UsageTokens(usage)
	if c, ok := rewrite.CachedTokens(usage); ok {
		return prompt, c
	}
	return prompt, -1
}

// usage returns the answer's usage object: a whole answer's, or a
// stream's last that carries input tokens (a Responses stream carries
// them in its response.completed event's response; a Messages stream in
// its message_delta, or else in its message_start's message).
func (u *usageTap) usage() gjson.Result {
	switch {
	case !u.on:
		return gjson.Result{}
	case !u.stream:
		return gjson.GetBytes(u.buf, "usage")
	}
	if len(u.buf) > 0 {
		// The stream's last line, which no newline ended.
		u.line(u.buf)
		u.buf = u.buf[:0]
	}
	if len(u.last) == 0 {
		return gjson.Result{}
	}
	return gjson.ParseBytes(u.last)
}
