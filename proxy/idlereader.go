package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
)

// silences are how long a stream may stay silent: before its output
// begins, and between data after that. A reasoning model streams nothing
// while it thinks, which can take minutes, so the wait for output is
// bounded like a whole answer's first byte (gateway.timeouts.first_byte);
// after that, gateway.timeouts.idle. OpenAI Chat Completions sends no
// event until output begins; the Responses and Messages APIs send their
// lifecycle events first (response.created, message_start) and then think
// in silence, so those do not count as output (rewrite.Lifecycle).
type silences struct{ first, between time.Duration }

// streamSilences returns a stream's silences under p: two minutes between
// data for a snapshot built without defaults, as tests build them.
func (g *Gateway) streamSilences(p policy.Gateway) silences {
	between := p.IdleTimeout
	if between <= 0 {
		between = 2 * time.Minute
	}
	return silences{first: max(g.firstByte(p), between), between: between}
}

// firstByte is how long an upstream answer may take to begin. The
// transport waits that long for the headers, and it is built once, at
// start-up, with the policy's first_byte then; the wait for a stream's
// first data takes the same value, so a reload that changes first_byte
// changes neither (the log says it applies at the next start). A
// transport the gateway did not build (tests) leaves it to the policy.
func (g *Gateway) firstByte(p policy.Gateway) time.Duration {
	if tr, ok := g.Transport.(*http.Transport); ok {
		return tr.ResponseHeaderTimeout
	}
	return p.HeaderTimeout
}

// idleReader cancels the upstream request when no data arrives for the
// silence allowed.
type idleReader struct {
	r       io.Reader
	s       silences
	got     atomic.Bool // output began: the silence allowed is s.between
	timer   *time.Timer
	fired   atomic.Bool
	stopped atomic.Bool
	sawEOF  bool // a read returned io.EOF
	scan    eventScan
}

func newIdleReader(r io.Reader, s silences, cancel context.CancelFunc) *idleReader {
	ir := &idleReader{r: r, s: s}
	ir.timer = time.AfterFunc(s.first, func() {
		if !ir.stopped.Load() {
			ir.fired.Store(true)
			cancel()
		}
	})
	return ir
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		if !ir.got.Load() && ir.scan.output(p[:n]) {
			ir.got.Store(true)
		}
		if ir.got.Load() {
			ir.timer.Reset(ir.s.between)
		} else {
			ir.timer.Reset(ir.s.first)
		}
	}
	ir.sawEOF = ir.sawEOF || err == io.EOF
	return n, err
}

// eventScan reads an event stream's lines until its output begins: an
// event named other than a lifecycle event, or data without a name (Chat
// Completions names none). It reads below the dialect (a passed-through
// stream has none), so any API's lifecycle event counts
// (rewrite.AnyLifecycleEvent). It keeps only a line's first bytes, as much
// as an event name needs, so it costs nothing once output has begun and
// little before.
type eventScan struct {
	line  [48]byte
	n     int  // bytes of the current line in line, up to len(line)
	named bool // the current event has a lifecycle event's name
}

// output reports whether b, the next bytes of the stream, hold the start
// of its output.
func (s *eventScan) output(b []byte) bool {
	for _, c := range b {
		if c != '\n' {
			if s.n < len(s.line) {
				s.line[s.n] = c
				s.n++
			}
			continue
		}
		line := bytes.TrimSuffix(s.line[:s.n], []byte("\r"))
		s.n = 0
		switch {
		case len(line) == 0:
			s.named = false // the event ended
		case bytes.HasPrefix(line, []byte("event:")):
			if !rewrite.AnyLifecycleEvent(string(bytes.TrimSpace(line[len("event:"):]))) {
				return true
			}
			s.named = true
		case bytes.HasPrefix(line, []byte("data:")) && !s.named:
			return true
		}
	}
	return false
}

func (ir *idleReader) expired() bool { return ir.fired.Load() }

// silence says what expired() means: no data for how long, and before
// what.
func (ir *idleReader) silence() string {
	if ir.got.Load() {
		return "no stream data for " + ir.s.between.String()
	}
	return "no stream output " + ir.s.first.String() + " after the headers"
}

func (ir *idleReader) stop() {
	ir.stopped.Store(true)
	ir.timer.Stop()
}
