package proxy

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Routes as the metrics and the decision log name them.
const (
	routeChat        = "chat"
	routeResponses   = "responses"
	routeMessages    = "messages"
	routePassthrough = "passthrough"
)

// modePassthrough is the mode the metrics and the decision log give a
// request sent upstream unchanged, whatever the policy's.
const modePassthrough = "passthrough"

// tracker wraps the client's ResponseWriter for one request: it learns the
// status the client got and, when the request ends, emits the request's
// report to the metrics and the decision log. It adds no buffering:
// Flush, Hijack and the rest reach the real writer through Unwrap.
type tracker struct {
	http.ResponseWriter
	g      *Gateway
	route  string
	status int
	rep    report
	turn   *turn // nil unless the request ran the search loop
	// in and upload are timedUpload's request and body, kept here
	// rather than allocated per request.
	in     http.Request
	upload timedBody
	// writeTimeout bounds each write to the client (arm); 0: none.
	// conn is what sets the connection's write deadline, found on the
	// first arm (looked says it was looked for; nil: the writer has
	// none, as a test's recorder).
	writeTimeout time.Duration
	conn         writeDeadliner
	looked       bool
	// unarmed counts the bytes written since the last arm: Write arms
	// again before they could fill the server's buffer (rearmAfter).
	unarmed int
}

// writeDeadliner is the server's ResponseWriter, which sets its
// connection's write deadline.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// deadlinerOf finds the server's ResponseWriter under w's wrappers, as
// http.ResponseController does without allocating one; nil when there is
// none.
func deadlinerOf(w http.ResponseWriter) writeDeadliner {
	for {
		switch x := w.(type) {
		case writeDeadliner:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// clearWriteDeadline lifts the write deadline an earlier request on w's
// connection left (a kept-alive connection keeps it): net/http resets it
// per request only under a Server.WriteTimeout, and the next response on
// the connection, tracked or not, must not fail on the last one's.
func clearWriteDeadline(w http.ResponseWriter) {
	if d := deadlinerOf(w); d != nil {
		_ = d.SetWriteDeadline(time.Time{})
	}
}

// track starts tracking a request on route. Its writes to the client get
// the policy's idle timeout as their deadline.
func (g *Gateway) track(w http.ResponseWriter, route string) *tracker {
	tr := &tracker{ResponseWriter: w, g: g, route: route, rep: report{start: time.Now()}}
	tr.writeTimeout = g.policy().Gateway.IdleTimeout
	if route == routePassthrough {
		tr.rep.mode = modePassthrough // nothing on it is rewritten
	}
	return tr
}

func (tr *tracker) WriteHeader(code int) {
	if tr.status == 0 && code >= 200 {
		tr.status = code
		tr.arm(time.Now())
	}
	tr.ResponseWriter.WriteHeader(code)
}

// arm sets the client connection's write deadline to writeTimeout after
// now. A client that stops reading (a zero TCP window) otherwise blocks a
// write forever, and with it the handler, which holds its request's
// in-flight bytes and its upstream stream: a few dozen such connections
// filled --max-inflight-mb and turned every other client away. Armed at
// the response's head, before each flush, and within every rearmAfter
// bytes written: the server sends buffered bytes to the socket when its
// buffer fills as well as on a flush, and a deadline armed at the flush
// before a long upstream wait (a model thinking for minutes, within
// first_byte) has passed by the time the answer's burst fills it.
func (tr *tracker) arm(now time.Time) {
	tr.unarmed = 0
	if tr.writeTimeout <= 0 {
		return
	}
	if !tr.looked {
		tr.looked = true
		tr.conn = deadlinerOf(tr.ResponseWriter)
	}
	if tr.conn != nil {
		_ = tr.conn.SetWriteDeadline(now.Add(tr.writeTimeout))
	}
}

// Write and Flush add the time they block to the report's client time: a
// client that reads slowly holds up the gateway's writes, and that wait
// is not the gateway's latency. Only a turn's are timed (nothing else
// reads the client time), and of its writes only those that may block:
// a short one lands in the server's buffer, and a stream's events are
// short and flushed one by one. A clock read costs about 80 ns here,
// which on every event of a passed-through stream added up to a turn's
// whole cost.
func (tr *tracker) Write(b []byte) (int, error) {
	if tr.status == 0 {
		tr.status = http.StatusOK
	}
	if tr.unarmed += len(b); tr.unarmed < rearmAfter {
		return tr.ResponseWriter.Write(b)
	}
	start := time.Now()
	tr.arm(start)
	if tr.turn == nil || len(b) < timedWrite {
		return tr.ResponseWriter.Write(b)
	}
	n, err := tr.ResponseWriter.Write(b)
	tr.rep.client += time.Since(start)
	return n, err
}

// timedWrite is the shortest write to the client that is timed: the
// server's response buffer holds 4 KiB.
const timedWrite = 4 << 10

// rearmAfter is how many bytes may be written under one arm: under the
// 2 KiB a response buffers before it writes to the connection's own
// buffer, so no socket write happens under a deadline armed before the
// wait that preceded it. A clock read per 1 KiB costs nothing against
// the writes; one per event cost a passed-through stream's whole budget.
const rearmAfter = 1 << 10

// Flush lets code that type-asserts http.Flusher flush through the
// tracker; http.ResponseController finds it too.
func (tr *tracker) Flush() {
	start := time.Now()
	tr.arm(start)
	_ = http.NewResponseController(tr.ResponseWriter).Flush()
	if tr.turn != nil {
		tr.rep.client += time.Since(start)
	}
}

// Unwrap gives http.ResponseController the real writer.
func (tr *tracker) Unwrap() http.ResponseWriter { return tr.ResponseWriter }

// timedUpload returns r reading its body through a timer that adds the
// time the reads block to the report's client time: a slow upload is the
// client's network, not the gateway's latency. It is a copy of r: net/http
// decides by the body's type how to treat what the handler left unread
// (a huge declared body refused before it is read), so the server's own
// request keeps its body.
func (tr *tracker) timedUpload(r *http.Request) *http.Request {
	if r.Body == nil || r.Body == http.NoBody {
		return r
	}
	tr.in = *r
	tr.upload = timedBody{ReadCloser: r.Body, acc: &tr.rep.client}
	tr.in.Body = &tr.upload
	return &tr.in
}

// timedBody adds the time its reads block to acc. Reads happen on the
// handler's goroutine only, so acc needs no lock.
type timedBody struct {
	io.ReadCloser
	acc *time.Duration
}

func (b *timedBody) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := b.ReadCloser.Read(p)
	*b.acc += time.Since(start)
	return n, err
}

// attach links the turn that serves the request, so its accounting lands in
// this request's report.
func (tr *tracker) attach(ctx context.Context, t *turn) {
	tr.turn = t
	t.noteClient(ctx, &tr.rep)
}

// passthrough records that a chat request went upstream unchanged, and why.
func (tr *tracker) passthrough(why string) {
	tr.rep.mode = modePassthrough
	tr.rep.reason = why
}

// done emits the report; defer it once, when the request starts. A panic
// unwinds through it before recoverPanics answers the client: it is
// reported as the 500 that answer is (unless a status went out already,
// or the panic is the abort that cuts an answer), then goes on to that
// recovery. Reported as it stands, the request would read as status 0, a
// client that left. ctx is the request's, for the record's values.
func (tr *tracker) done(ctx context.Context) {
	rec := recover()
	if rec != nil && tr.status == 0 && !aborts(rec) {
		tr.status = http.StatusInternalServerError
	}
	total := time.Since(tr.rep.start)
	tr.g.Metrics.observe(tr, total)
	tr.g.logDecision(ctx, tr, total)
	if rec != nil {
		panic(rec)
	}
}
