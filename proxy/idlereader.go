package proxy

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// silences are how long a stream may stay silent: before its first data,
// and between data. A reasoning model streams nothing while it thinks
// (OpenAI Chat Completions sends no event until output begins), which can
// take minutes, so the first wait is bounded like a whole answer's first
// byte (gateway.timeouts.first_byte); after that, gateway.timeouts.idle.
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
	got     atomic.Bool // data arrived: the silence allowed is s.between
	timer   *time.Timer
	fired   atomic.Bool
	stopped atomic.Bool
	sawEOF  bool // a read returned io.EOF
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
		ir.got.Store(true)
		ir.timer.Reset(ir.s.between)
	}
	ir.sawEOF = ir.sawEOF || err == io.EOF
	return n, err
}

func (ir *idleReader) expired() bool { return ir.fired.Load() }

// silence says what expired() means: no data for how long, and before
// what.
func (ir *idleReader) silence() string {
	if ir.got.Load() {
		return "no stream data for " + ir.s.between.String()
	}
	return "no stream data " + ir.s.first.String() + " after the headers"
}

func (ir *idleReader) stop() {
	ir.stopped.Store(true)
	ir.timer.Stop()
}
