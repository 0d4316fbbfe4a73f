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
// its length is declared.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, limit int64) (*bodyBuf, int64, error) {
	if limit <= 0 {
		limit = 32 << 20
	}
	var held int64
	if r.ContentLength > 0 && r.ContentLength <= limit {
		held = r.ContentLength
		if err := g.inflight.reserve(held); err != nil {
			return nil, 0, err
		}
	}
	buf, err := g.readWhole(w, r, limit)
	if err != nil {
		g.inflight.release(held)
		return nil, 0, err
	}
	if n := int64(len(buf.b)); n > held { // chunked, or decoded
		// Reserved again whole, so a request alone is admitted whatever
		// it decodes to.
		g.inflight.release(held)
		if err := g.inflight.reserve(n); err != nil {
			g.bodies.put(buf)
			return nil, 0, err
		}
		held = n
	}
	return buf, held, nil
}

// readWhole is readBody's read, the in-flight bound aside.
func (g *Gateway) readWhole(w http.ResponseWriter, r *http.Request, limit int64) (*bodyBuf, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes declared, the limit is %d", ErrBodyTooLarge, r.ContentLength, limit)
	}
	codings, err := contentCodings(r.Header)
	if err != nil {
		return nil, err
	}
	lift := g.bodyDeadline(w)
	if len(codings) > 0 {
		buf, err := readEncoded(w, r, codings, limit)
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
		buf = &bodyBuf{}
		buf.b, err = io.ReadAll(src)
	}
	if err != nil {
		g.bodies.put(buf) // nothing was parsed from it
		return nil, bodyErr(fmt.Errorf("reading request body: %w", err), limit)
	}
	lift()
	return buf, nil
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
