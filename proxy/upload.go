package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// guardUpload bounds how long a passed-through request body too large to
// read whole first (passBody) may stay silent: each read of it must bring
// data within BodyTimeout. A total deadline would cut a large file
// uploaded over a slow link; none let a client that stopped mid-upload
// hold its connection, and the upstream's, for good. The deadline is set
// as each read starts, so time the upstream spends not reading (its
// window full) never counts against the client. It returns r with the
// guarded body, and the guard in its context for the error handler.
func (g *Gateway) guardUpload(w http.ResponseWriter, r *http.Request) *http.Request {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Time{}) != nil {
		return r // a writer without deadlines (a test's recorder)
	}
	b := &uploadBody{ReadCloser: r.Body, rc: rc, idle: g.bodyTimeout()}
	r = r.WithContext(context.WithValue(r.Context(), uploadKey{}, b))
	r.Body = b
	return r
}

// uploadKey holds a guarded upload's *uploadBody in its request's context.
type uploadKey struct{}

// uploadBody is a streamed request body whose reads each have idle to
// bring data.
type uploadBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	idle     time.Duration
	deadline atomic.Int64 // unix nanoseconds the read under way must end by; 0 once the body ended
	ended    bool         // a read returned io.EOF; only the transport's write goroutine reads
}

// Read reads the body under its idle deadline. Once the body has ended it
// answers io.EOF itself: the transport reads a body of known length once
// more after its last byte, to check there is no more, and by then the
// server may have closed the body, having started the answer's relay
// (net/http discards and closes what is left of a request body when its
// response's header is written). That read would fail with "invalid Read
// on closed Body", and the transport closes the upstream connection on a
// failed request write, cutting the answer it is relaying.
func (b *uploadBody) Read(p []byte) (int, error) {
	if b.ended {
		return 0, io.EOF
	}
	d := time.Now().Add(b.idle)
	b.deadline.Store(d.UnixNano())
	_ = b.rc.SetReadDeadline(d)
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended = true
		// Lifted at once: once the body is read, the server reads the
		// connection in the background to notice the client leaving,
		// and a deadline left set would end the answer's relay.
		b.deadline.Store(0)
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// stalledUpload returns the error to answer a request with when its body
// is an upload whose read is past its deadline. It goes by the clock, not
// by the read's error: the server cancels a request whose body read
// fails before the read returns, and the transport may report the cancel
// first.
func stalledUpload(ctx context.Context) (error, bool) {
	b, ok := ctx.Value(uploadKey{}).(*uploadBody)
	if !ok {
		return nil, false
	}
	if d := b.deadline.Load(); d == 0 || time.Now().UnixNano() < d {
		return nil, false
	}
	return fmt.Errorf("%w: no data for %v mid-upload", ErrBodyTimeout, b.idle), true
}
