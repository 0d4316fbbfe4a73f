package proxy

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Request buffers are pooled between these sizes: a small body is cheap to
// allocate and rarely given back (its tools array is too small to cache),
// so it would only carry pooled buffers off; a huge one should not stay
// resident.
const (
	minPooledBody = 16 << 10
	maxPooledBody = 4 << 20
)

// bodyBuf is a request body read into a buffer that may be lent again.
type bodyBuf struct{ b []byte }

// bodyPool lends buffers for request bodies. A 200-tool request is about
// 190 KB, most of what a turn allocates; reusing the buffer spares the
// allocation, its zeroing and the GC work it drives. A buffer goes back
// only once nothing refers to it (see rewrite.Request.Detached); one that
// is never given back is simply collected.
type bodyPool struct{ p sync.Pool }

// get returns a buffer of length n, reusing a lent one if it is big enough.
func (bp *bodyPool) get(n int) *bodyBuf {
	if n < minPooledBody {
		return &bodyBuf{b: make([]byte, n)}
	}
	if v, ok := bp.p.Get().(*bodyBuf); ok && cap(v.b) >= n {
		v.b = v.b[:n]
		return v
	}
	return &bodyBuf{b: make([]byte, n)}
}

// put gives a buffer back; the caller must hold no reference into it.
func (bp *bodyPool) put(v *bodyBuf) {
	if v != nil && cap(v.b) >= minPooledBody && cap(v.b) <= maxPooledBody {
		bp.p.Put(v)
	}
}

// readBody reads the request body up to limit bytes: a declared length over
// the limit is refused before reading, a chunked body is cut at the limit.
// A gzip or deflate body is decoded, and the limit bounds it decoded too
// (readEncoded); another Content-Encoding is an ErrUnsupportedEncoding.
// A declared length is read into a buffer of exactly that size, from the
// gateway's pool: io.ReadAll would double its way up, which on a 180 KB
// tools array was two thirds of the bytes a turn allocated. net/http never
// yields more than the declared length and reports a shorter body as an
// error. It returns the bytes it reserved of the in-flight bound, which the
// caller releases when it no longer holds what it built from the body; a
// body over the bound is an ErrOverloaded, refused before it is read when
// its length is declared, and as it arrives otherwise (chunked or
// compressed: heldReader), so concurrent uploads of unknown length cannot
// fill the memory the bound protects before any of them is counted.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, limit int64) (*bodyBuf, int64, error) {
	if limit <= 0 {
		limit = 32 << 20
	}
	var upfront int64
	if r.ContentLength > 0 && r.ContentLength <= limit {
		upfront = r.ContentLength
		if err := g.inflight.reserve(upfront); err != nil {
			return nil, 0, err
		}
	}
	hold := &heldReader{f: &g.inflight, have: upfront}
	buf, err := g.readWhole(w, r, limit, hold)
	held := upfront + hold.held
	if err != nil {
		g.inflight.release(held)
		return nil, 0, err
	}
	if n := int64(len(buf.b)); held > n {
		// What was read holds its own length: a compressed body's
		// declared length and the last step's slack go back.
		g.inflight.release(held - n)
		held = n
	}
	return buf, held, nil
}

// readWhole is readBody's read: a body of declared length into a buffer of
// that size, any other through hold, which counts it against the
// in-flight bound as it arrives.
func (g *Gateway) readWhole(w http.ResponseWriter, r *http.Request, limit int64, hold *heldReader) (*bodyBuf, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes declared, the limit is %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	codings, err := contentCodings(r.Header)
	if err != nil {
		return nil, err
	}
	lift := g.bodyDeadline(w)
	if len(codings) > 0 {
		buf, err := readEncoded(w, r, codings, limit, hold)
		if err == nil {
			lift()
		}
		return buf, err
	}
	src := http.MaxBytesReader(w, r.Body, limit)
	var buf *bodyBuf
	if r.ContentLength > 0 {
		buf = g.bodies.get(int(r.ContentLength))
		_, err = io.ReadFull(src, buf.b)
	} else {
		hold.r = src
		buf = &bodyBuf{}
		buf.b, err = io.ReadAll(hold)
	}
	if err != nil {
		g.bodies.put(buf) // nothing was parsed from it
		return nil, bodyErr(fmt.Errorf("reading request body: %w", err), limit)
	}
	lift()
	return buf, nil
}

// holdStep is how much more of the in-flight bound a body of unknown
// length reserves each time what it read passes what it holds.
const holdStep = 1 << 20

// heldReader reserves against the in-flight bound the bytes read through
// it, holdStep at a time, for a request that already holds have; a read
// the bound refuses fails with ErrOverloaded. held is what it reserved.
type heldReader struct {
	r          io.Reader
	f          *inflight
	have, held int64
	read       int64
}

func (h *heldReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.read += int64(n)
	if h.read > h.held {
		step := max(holdStep, h.read-h.held)
		if e := h.f.grow(h.have+h.held, step); e != nil {
			return n, e
		}
		h.held += step
	}
	return n, err
}

// bodyTimeout is BodyTimeout, or its default.
func (g *Gateway) bodyTimeout() time.Duration {
	if g.BodyTimeout <= 0 {
		return 2 * time.Minute
	}
	return g.BodyTimeout
}

// bodyDeadline gives the client BodyTimeout to send the request body and
// returns what lifts the deadline once it is read. A body that failed
// keeps it: the connection closes after the error. A writer without
// deadlines (a test's recorder) reads without one.
func (g *Gateway) bodyDeadline(w http.ResponseWriter) (lift func()) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(g.bodyTimeout())) != nil {
		return func() {}
	}
	return func() { _ = rc.SetReadDeadline(time.Time{}) }
}
