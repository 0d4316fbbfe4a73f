package proxy

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// idle is the longest silence a stream may keep between chunks
// (gateway.timeouts.idle): two minutes for a snapshot built without
// defaults, as tests build them.
func idle(d time.Duration) time.Duration {
	if d <= 0 {
		return 2 * time.Minute
	}
	return d
}

// idleReader cancels the upstream request when no data arrives for d.
type idleReader struct {
	r       io.Reader
	d       time.Duration
	timer   *time.Timer
	fired   atomic.Bool
	stopped atomic.Bool
	sawEOF  bool // a read returned io.EOF
}

func newIdleReader(r io.Reader, d time.Duration, cancel context.CancelFunc) *idleReader {
	ir := &idleReader{r: r, d: d}
	ir.timer = time.AfterFunc(d, func() {
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
		ir.timer.Reset(ir.d)
	}
	ir.sawEOF = ir.sawEOF || err == io.EOF
	return n, err
}

func (ir *idleReader) expired() bool { return ir.fired.Load() }

func (ir *idleReader) stop() {
	ir.stopped.Store(true)
	ir.timer.Stop()
}
