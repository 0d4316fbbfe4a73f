package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"syscall"

	"github.com/toolgate/toolgate/rewrite"
)

// newPassthrough returns the plain streaming reverse proxy for everything
// under /v1 that is not chat completions (models, embeddings, files, ...).
// An event stream it relays is guarded as a passed-through chat stream is
// (guardStream).
func (g *Gateway) newPassthrough() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rest, _ := g.apiPath(pr.In.URL.Path)
			pr.Out.URL = g.upstreamURL(rest, pr.In.URL)
			pr.Out.Host = ""
			dropGatewayHeaders(pr.Out.Header)
			// One read of the policy: the response is guarded by the
			// same policy whose key the request went with.
			gw := g.policy().Gateway
			setAuth(pr.Out.Header, pr.In, gw.UpstreamKey)
			// The request's own cancel, for ModifyResponse to stop a
			// stream gone silent; the client's leaving still cancels it.
			ctx, cancel := context.WithCancel(pr.Out.Context())
			pr.Out = pr.Out.WithContext(context.WithValue(ctx, passKey{}, passed{cancel: cancel, silences: g.streamSilences(gw)}))
		},
		ModifyResponse: func(resp *http.Response) error {
			// The X-Toolgate-* fields say what this gateway did: an
			// upstream's (another toolgate's) would read as this one's.
			dropGatewayHeaders(resp.Header)
			dropGatewayHeaders(resp.Trailer) // announced: the reverse proxy declares what is left
			if p, ok := resp.Request.Context().Value(passKey{}).(passed); ok {
				g.guardStream(resp.Request.Context(), resp, p.silences, p.cancel, nil)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				// An upgraded connection's body must stay the transport's
				// (the reverse proxy writes to it); it has no trailers.
				resp.Body = &trailerFilter{ReadCloser: resp.Body, resp: resp}
			}
			return nil
		},
		Transport:     g.transport(),
		FlushInterval: -1,
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if stalled, ok := stalledUpload(r.Context()); ok {
				// Answered although the request's context is done: the
				// server cancelled it for the failed read, and the
				// client is still there to be told.
				g.logger().InfoContext(r.Context(), "request failed", "path", r.URL.Path, "status", http.StatusRequestTimeout, "err", stalled)
				status, body := classify(stalled)
				writeJSONError(w, status, body)
				return
			}
			g.writeError(w, r, upstreamErr(r.Context(), err))
		},
	}
}

// trailerFilter drops the gateway's own fields from an upstream
// response's trailers once they arrive. The transport fills them in when
// the body ends, the fields it announced too, and the reverse proxy
// copies them after it read that end: dropped only when the response
// came, they came back.
type trailerFilter struct {
	io.ReadCloser
	resp *http.Response
}

func (b *trailerFilter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		dropGatewayHeaders(b.resp.Trailer)
	}
	return n, err
}

// passKey holds a passthrough request's passed in its context.
type passKey struct{}

// passed is what ModifyResponse needs of its request's Rewrite: the
// request's own cancel and the silences of the policy it went with.
type passed struct {
	cancel   context.CancelFunc
	silences silences
}

// guardStream makes an event stream passed through end as a rewritten
// stream does when its upstream fails (relay.fail): when no data arrives
// for idle, cancel stops the upstream request, and a stream that ends in
// an error (that, the request timeout, a cut connection) ends with an
// error event instead of a clean end, which a client would take for a
// whole answer. ctx is the upstream request's: once the client has left,
// nothing is written. A stream in a Content-Encoding (one the client
// negotiated on another route) gets no event, which would not be in its
// encoding: its read error stands. Any other response is left as it is.
//
// The error event is in the stream's API's shape: iw's named event for a
// dialect whose streams speak of items (the Responses API, Anthropic's
// Messages API, whose SDKs raise only a named error event), else a Chat
// Completions error chunk. iw is nil for the plain passthrough.
func (g *Gateway) guardStream(ctx context.Context, resp *http.Response, idle silences, cancel context.CancelFunc, iw rewrite.ItemEventWriter) {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "text/event-stream" {
		return
	}
	ce := resp.Header.Get("Content-Encoding")
	resp.Body = &streamGuard{
		body: resp.Body, idle: newIdleReader(resp.Body, idle, cancel), ctx: ctx, g: g,
		encoded: ce != "" && ce != "identity", newlines: 2, iw: iw,
	}
}

// streamGuard is an event stream's body that turns a failed read into an
// error event, then io.EOF.
type streamGuard struct {
	body     io.ReadCloser
	idle     *idleReader
	ctx      context.Context
	g        *Gateway
	encoded  bool   // the body is compressed: no event can be added
	newlines int    // how many newlines end what was read so far, up to 2
	failed   bool   // a read failed: tail is what is left to return
	tail     []byte // the error event
	iw       rewrite.ItemEventWriter
	events   int // events read whole: the error event's sequence_number
}

func (s *streamGuard) Read(p []byte) (int, error) {
	if s.failed {
		if len(s.tail) == 0 {
			return 0, io.EOF
		}
		n := copy(p, s.tail)
		s.tail = s.tail[n:]
		return n, nil
	}
	n, err := s.idle.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			if s.newlines == 1 {
				s.events++
			}
			s.newlines = min(s.newlines+1, 2)
		} else if c != '\r' {
			s.newlines = 0
		}
	}
	if err == nil || errors.Is(err, io.EOF) {
		return n, err
	}
	var cause error
	switch {
	case s.idle.expired():
		cause = fmt.Errorf("%w: %s", ErrUpstreamTimeout, s.idle.silence())
	case errors.Is(s.ctx.Err(), context.DeadlineExceeded):
		cause = fmt.Errorf("%w: the request timeout passed mid-stream: %w", ErrUpstreamTimeout, err)
	case errors.Is(context.Cause(s.ctx), ErrShuttingDown):
		// The drain time ran out with the client still reading: it is
		// told to retry elsewhere, as a rewritten stream's client is.
		cause = fmt.Errorf("%w: %w", ErrShuttingDown, err)
	case s.ctx.Err() != nil:
		return n, err // the client left: nobody reads an error event
	default:
		cause = fmt.Errorf("%w: stream ended early: %w", ErrUpstreamBadResponse, err)
	}
	s.g.logger().WarnContext(s.ctx, "passthrough stream failed after start", "err", cause)
	if s.encoded {
		return n, cause
	}
	_, e := classify(cause)
	// The event follows a blank line, so a cut event cannot swallow it.
	s.tail = []byte("\n\n"[s.newlines:])
	if s.iw != nil {
		ev := s.iw.ErrorEvent(e.Type, e.Code, e.Message, string(e.Param), s.events)
		s.tail = append(append(append(append(s.tail, "event: "...), ev.Name...), "\ndata: "...), ev.Data...)
	} else {
		s.tail = append(append(s.tail, "data: "...), errorBody(e)...)
	}
	s.tail = append(s.tail, "\n\n"...)
	s.failed = true
	return n, nil
}

func (s *streamGuard) Close() error {
	s.idle.stop()
	return s.body.Close()
}

// upstreamErr classifies a transport error: the client leaving, a timeout,
// or an upstream that cannot be reached.
func upstreamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShuttingDown) {
		return fmt.Errorf("%w: %w", ErrShuttingDown, err) // the transport returns the cause itself
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %w", ErrUpstreamTimeout, err)
	}
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		// Reported as the upstream being down, this sent operators after
		// the wrong machine.
		return fmt.Errorf("%w: %w", ErrOutOfFiles, err)
	}
	return fmt.Errorf("%w: %w", ErrUpstreamUnreachable, err)
}

// smallBody is the largest request body the passthrough reads whole
// before it proxies the request.
const smallBody = 1 << 20

// passBody readies a passthrough request's body: read into memory when it
// is small (its length known and at most smallBody), so the reverse proxy
// sends it from memory, else streamed with a bound on its silences
// (guardUpload). A streamed body races net/http: the server closes a
// request body once its response's header is written, and the transport
// reads the body once more after its end, fails, and closes the upstream
// connection mid-answer (a bare httputil.ReverseProxy does the same).
// uploadBody answers that read itself; a body read whole never races, and
// can be sent again.
// A body read whole is held against the in-flight bound: passBody returns
// the bytes it reserved, which the caller releases once the request is
// done.
func (g *Gateway) passBody(w http.ResponseWriter, r *http.Request) (*http.Request, int64, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return r, 0, nil
	}
	if r.ContentLength < 0 || r.ContentLength > smallBody {
		return g.guardUpload(w, r), 0, nil
	}
	if err := g.inflight.reserve(r.ContentLength); err != nil {
		return r, 0, err
	}
	lift := g.bodyDeadline(w)
	b, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength+1))
	if err != nil {
		g.inflight.release(r.ContentLength)
		return r, 0, bodyErr(fmt.Errorf("reading the request body: %w", err), smallBody)
	}
	lift()
	r.Body.Close()
	// The client's Expect: 100-continue asked whether to send what the
	// gateway now holds: upstream it would only cost the transport's wait
	// for a 100 (a second) when the upstream sends none. A streamed
	// upload keeps it, so an upstream's early refusal spares the upload.
	r.Header.Del("Expect")
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return r, r.ContentLength, nil
}
