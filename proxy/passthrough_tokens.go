package proxy

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
)

// Token accounting for chat requests sent upstream without the search
// loop. They save nothing (or only the tools the policy hides), and the
// token metrics must count them too: a savings ratio read from metrics
// that left them out would claim the gateway's share of the traffic for
// all of it.

// notePassthroughTools counts the client's tools array (once per array,
// as a turn does) and the tools forwarded (raws, at positions pos of the
// client's array).
func (tr *tracker) notePassthroughTools(req *rewrite.Request, raws []string, pos []int) {
	rep := &tr.rep
	// The key serveTurn made sure of: the array's text and dialect.
	if rep.countClient(tr.g, req, strconv.FormatUint(req.ToolsKey, 36)); rep.tokErr != nil {
		return
	}
	if rep.passSent, rep.tokErr = tr.g.tokens.round(rep.enc, rep.catTok, raws, pos); rep.tokErr != nil {
		tr.g.logger().Warn("counting tool tokens", "err", rep.tokErr)
	}
}

// maxUsageTap bounds the whole answer a passthrough keeps to read its
// usage from; a longer one goes uncounted.
const maxUsageTap = 1 << 20

// streamUsageTail is how much of a stream's end a passthrough keeps: the
// usage event (sent when the client asked for stream_options.include_usage)
// is the last before [DONE] and a few hundred bytes long.
const streamUsageTail = 8 << 10

// usageTap keeps a copy of a passed-through answer as it is relayed, to
// read its usage at the end: a whole (non-streamed) answer up to
// maxUsageTap, or a stream's first and last streamUsageTail bytes (an
// Anthropic-compatible upstream may count input tokens in its stream's
// first event, message_start, alone). Only uncompressed 200s with tools
// are read.
type usageTap struct {
	on     bool
	stream bool
	buf    []byte
	head   []byte // a stream's first bytes
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
		if room := streamUsageTail - len(u.head); room > 0 {
			u.head = append(u.head, b[:min(room, len(b))]...)
		}
		if len(b) >= streamUsageTail {
			u.buf = append(u.buf[:0], b[len(b)-streamUsageTail:]...)
			return
		}
		if len(u.buf)+len(b) > 2*streamUsageTail {
			// Slide, not grow: the copy happens once per tail's worth.
			u.buf = append(u.buf[:0], u.buf[len(u.buf)-(streamUsageTail-len(b)):]...)
		}
		u.buf = append(u.buf, b...)
	case len(u.buf)+len(b) > maxUsageTap:
		u.on, u.buf = false, nil
	default:
		u.buf = append(u.buf, b...)
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
// stream's last data line that carries input tokens (a Responses stream
// carries them in its response.completed event's response; a Messages
// stream in its message_delta, or else in its message_start's message).
func (u *usageTap) usage() gjson.Result {
	if !u.on {
		return gjson.Result{}
	}
	if !u.stream {
		return gjson.GetBytes(u.buf, "usage")
	}
	// The tail's first line, and the head's last, may be cut and then
	// are not JSON.
	if usage := lastUsage(u.buf); usage.Exists() {
		return usage
	}
	return lastUsage(u.head)
}

// lastUsage returns the usage of the last data line of stream text b that
// carries input tokens.
func lastUsage(b []byte) gjson.Result {
	for rest := b; len(rest) > 0; {
		i := bytes.LastIndexByte(rest[:len(rest)-1], '\n') + 1
		line := bytes.TrimSpace(rest[i:])
		rest = rest[:max(i-1, 0)]
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		for _, path := range [...]string{"usage", "response.usage", "message.usage"} {
			if usage := gjson.GetBytes(data, path); rewrite.HasInputTokens(usage) {
				return usage
			}
		}
	}
	return gjson.Result{}
}

// passInput returns a passed-through request's input tokens and what
// they would have been direct: its prompt with the client's whole array
// in place of what was forwarded, as for a turn's first call. ok is false
// when its answer's usage was not read, or counts below the gateway's
// count of the tools in the prompt (see turn.inputTokens).
func (rep *report) passInput() (gateway, direct int64, ok bool) {
	if rep.toolsIn == 0 || rep.tokErr != nil || rep.passPrompt <= 0 {
		return 0, 0, false
	}
	direct, ok = rep.directFor(rep.passPrompt, int64(rep.passSent))
	return rep.passPrompt, direct, ok
}

// observePassthrough records a passed-through chat request's tokens: the
// tool tokens of both sides and, when known, its input tokens on both
// paths.
func (m *Metrics) observePassthrough(rep *report) {
	if rep.toolsIn == 0 || rep.tokErr != nil {
		return
	}
	m.toolTokens.WithLabelValues("client").Add(float64(rep.tokIn))
	m.toolTokens.WithLabelValues("upstream").Add(float64(rep.passSent))
	if gw, direct, ok := rep.passInput(); ok {
		m.inputTokens.WithLabelValues("gateway").Add(float64(gw))
		m.inputTokens.WithLabelValues("direct_estimate").Add(float64(direct))
		// Counted with the prompt they are part of, as for a turn: the
		// cached total is a share of toolgate_input_tokens_total{path="gateway"}.
		if rep.passCached >= 0 {
			m.cachedTokens.Add(float64(rep.passCached))
		}
	}
}
