package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/rewrite"
)

// relay is the client side of one streamed turn: the writer both kinds of
// stream share (held events, headers, trailers, flushes, the error event's
// framing; itemRelay embeds it), and the Chat stream's state, which
// relay.round (chatstream.go) keeps.
type relay struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	t  *turn
	ew rewrite.EventWriter

	started  bool           // SSE headers written (commit)
	pending  bool           // events written but not flushed
	held     []byte         // events framed before the headers were written
	resp     *http.Response // the first event's upstream response
	role     []byte         // the first chunk with the role and nothing else to send, held until something follows
	note     []byte         // the first round's annotation of its prompt, held until something follows
	sentRole bool           // an event has gone out (the held role chunk is sent before the first, or never)
	roleOut  bool           // a role has gone out: later rounds' roles are dropped
	finished bool           // a finish chunk reached the client
	next     int            // the next tool-call index the client sees
	// said counts the characters (runes) of content relayed to the
	// client so far: a round's annotation offsets count from its own
	// text's start, so the relay moves them on by what earlier rounds
	// said (rewrite.ShiftAnnotations).
	said int
	// model, fingerprint and tier are the upstream's, for the gateway's
	// own chunks: the first model, the latest fingerprint and tier (the
	// last round's, as the client's accumulator would have read them).
	model, fingerprint, tier string
	frame                    []byte // write's buffer
	// thoughts are the round's reasoning events (rewrite.Event.Thought),
	// framed, held until the round shows the client something, which
	// they go before (emit), or dropped when the round turns out to be
	// the gateway's (dropThoughts): passed on, a search round's
	// reasoning would reach the client under the same reasoning_details
	// indexes as the answer's, which an accumulator merges into one
	// ("SIG0SIG1"), and a whole answer has the last round's alone. thoughtRole is whether
	// the first of them has a role.
	// With an answer that must be JSON (Request.JSONOutput) the round's
	// text is held with them: thoughtText is whether some is, and a
	// provider's verdict on it waits with it; thoughtSaid counts its
	// characters.
	thoughts    []byte
	thoughtRole bool
	thoughtText bool
	thoughtSaid int
	// details is one more than the highest reasoning_details index the
	// client has, thoughtDetails the same for the held reasoning: a
	// later round's indexes run on from details (a round that showed
	// text before it searched released its reasoning), as its
	// annotations' offsets run on from said.
	details, thoughtDetails int64
	// quietSince is when the client last got an event, as far as held
	// events are concerned: zero once one is written (see holdAlive).
	quietSince time.Time
}

// emit writes one event, after the held reasoning and, before the first,
// the held role chunk, unless what goes first has a role of its own
// (hasRole). The first upstream response's headers are the ones the
// client gets.
func (s *relay) emit(resp *http.Response, data []byte, hasRole bool) error {
	if len(s.thoughts) > 0 {
		if err := s.lead(resp, s.thoughtRole); err != nil {
			return err
		}
		err := s.put(append(s.buffer(), s.thoughts...))
		s.details = max(s.details, s.thoughtDetails)
		s.said += s.thoughtSaid
		s.dropThoughts()
		if err != nil {
			return err
		}
	}
	if err := s.lead(resp, hasRole); err != nil {
		return err
	}
	return s.write(data)
}

// lead writes what goes before the client's next event: the prompt's
// held annotation, and the held role chunk unless the event has a role.
func (s *relay) lead(resp *http.Response, hasRole bool) error {
	if s.resp == nil {
		s.resp = resp
	}
	if s.note != nil { // the upstream's first event, so the client's too
		note := s.note
		s.note = nil
		if err := s.write(note); err != nil {
			return err
		}
	}
	if !s.sentRole && s.role != nil && !hasRole {
		s.roleOut = true
		if err := s.write(s.role); err != nil {
			return err
		}
	}
	s.sentRole = true
	s.roleOut = s.roleOut || hasRole
	return nil
}

// roleGone reports whether a role reaches the client before the next
// event: one went out, or the held reasoning that goes first has one or
// follows the held role chunk.
func (s *relay) roleGone() bool {
	return s.roleOut || len(s.thoughts) > 0 && (s.thoughtRole || (!s.sentRole && s.role != nil))
}

// hold keeps a reasoning event (data with edit applied) back until the
// round shows the client something (emit), and the client's stream alive
// meanwhile (holdAlive).
func (s *relay) hold(data []byte, edit rewrite.EventEdit, hasRole bool) error {
	out, err := s.ew.EditEvent(data, edit)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUpstreamBadResponse, err)
	}
	if len(s.thoughts) == 0 {
		s.thoughtRole = hasRole
	}
	s.thoughts = appendFrame(s.thoughts, "", out)
	return s.holdAlive()
}

// dropThoughts forgets the held reasoning (and text), keeping its buffer.
func (s *relay) dropThoughts() {
	s.thoughts, s.thoughtRole, s.thoughtDetails = s.thoughts[:0], false, 0
	s.thoughtText, s.thoughtSaid = false, 0
}

// holdAlive writes a comment when held events have kept the client
// without one for the gateway's HeldKeepAlive: a reasoning model can
// think for minutes, its reasoning streaming all along, and the client
// would get nothing of it until what it decided on shows. Reading the
// clock per held event only, not per event passed on, keeps it off the
// common path.
func (s *relay) holdAlive() error {
	now := time.Now()
	if s.quietSince.IsZero() {
		s.quietSince = now
		return nil
	}
	if now.Sub(s.quietSince) < cmp.Or(s.t.g.HeldKeepAlive, defaultHeldKeepAlive) {
		return nil
	}
	err := s.put(append(s.buffer(), ": keep-alive\n\n"...))
	s.quietSince = now
	return err
}

// defaultHeldKeepAlive is HeldKeepAlive's default: well inside the 60 s
// idle timeouts of common load balancers and proxies.
const defaultHeldKeepAlive = 15 * time.Second

// write writes one event; flush sends it. Until the first flush the
// events are held in the relay (commit writes them with the headers);
// after it each is framed in the relay's buffer and written once (fmt's
// formatting was a fifth of relaying a short event).
func (s *relay) write(data []byte) error { return s.writeNamed("", data) }

// writeNamed is write with the event's name (an "event:" line) when name
// is not empty, as the Responses and Messages APIs name every event.
func (s *relay) writeNamed(name string, data []byte) error {
	return s.put(appendFrame(s.buffer(), name, data))
}

// keepAlive passes on a comment line the upstream sent (its keep-alive
// while the model thinks), on every round: a direct client has it, and
// it is all the client gets while a later round thinks or the gateway
// searches, so a proxy's idle timeout between (60 s on ALB and nginx)
// would otherwise cut the stream. Its flush commits the headers, which a
// client that bounds its wait for them needs too: the upstream has
// committed its 200, as a direct client would see. A failure after it
// is an error event, as after any event.
func (s *relay) keepAlive(resp *http.Response, line []byte) error {
	if s.resp == nil {
		s.resp = resp
	}
	return s.put(append(append(s.buffer(), line...), "\n\n"...))
}

// buffer is what the next frame is appended to, for put: the held
// events until the headers are written, then the relay's frame buffer.
func (s *relay) buffer() []byte {
	s.pending = true
	if !s.started {
		if s.held == nil {
			// A short answer's events, whole: one allocation, not a
			// doubling per event.
			s.held = make([]byte, 0, heldSize)
		}
		return s.held
	}
	return s.frame[:0]
}

// put takes buffer's slice with a frame appended: held until the headers
// are written, else written at once.
func (s *relay) put(b []byte) error {
	s.quietSince = time.Time{}
	if !s.started {
		s.held = b
		return nil
	}
	s.frame = b
	if _, err := s.w.Write(s.frame); err != nil {
		return fmt.Errorf("writing to client: %w", context.Canceled)
	}
	return nil
}

// commit sends the SSE headers and writes the held events. A turn that
// ended before the relay first had to wait (its whole upstream stream was
// in hand: a fast or short answer) is final: the X-Toolgate-* fields go
// out as headers with the whole turn's numbers, and the body with its
// length. Otherwise the headers carry the numbers as they stand and
// declare the fields as trailers, which relay.end sets once the turn is
// done; declaring them keeps the response chunked, as trailers need.
func (s *relay) commit(final bool) {
	h := s.w.Header()
	if s.resp != nil {
		copyEndToEnd(h, s.resp.Header, responseSkip)
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	if final {
		setToolgateFields(h, s.t, true)
		h.Set("Content-Length", strconv.Itoa(len(s.held)))
	} else {
		h.Set("Trailer", toolgateTrailer)
		setToolgateHeaders(h, s.t)
	}
	s.w.WriteHeader(http.StatusOK)
	s.started = true
	_, _ = s.w.Write(s.held)          // a client gone shows at the next write or flush
	s.frame, s.held = s.held[:0], nil // the buffer frames the events after these
}

// heldSize is the buffer the relay holds its first events in: a short
// streamed answer (a role chunk, a few dozen content chunks, the finish,
// usage and [DONE]) fits.
const heldSize = 4 << 10

// flush sends the events written since the last flush.
func (s *relay) flush() {
	if !s.pending {
		return
	}
	if !s.started {
		s.commit(false)
	}
	s.pending = false
	_ = s.rc.Flush()
}

// flushFirst flushes the client's pending events before each read of the
// upstream, which may block.
type flushFirst struct {
	r     io.Reader
	flush func()
}

func (f flushFirst) Read(p []byte) (int, error) {
	f.flush()
	return f.r.Read(p)
}

// end closes a successful turn: a finish chunk if none reached the client,
// the summed usage chunk when the client asked for it, and [DONE]. It does
// not flush them: streamTurn saves the session first, then flushes a
// whole answer (which costs no extra write) or leaves a drained chunked
// stream's end events to the handler's return, which sends them with the
// chunked body's end in one write. A client that sends its next turn as
// soon as it reads [DONE] then finds this turn's state. It reports
// whether the turn went out whole, with final headers and a length
// (commit).
func (s *relay) end() (whole bool) {
	t := s.t
	finish := ""
	if !s.finished {
		finish = "stop"
		if t.capped {
			finish = "length"
		}
	}
	var usage []byte
	if t.req.IncludeUsage {
		usage = append([]byte{}, t.clientUsage()...)
	}
	head := rewrite.ChunkHead{ID: t.id, Created: t.created, Model: s.model, SystemFingerprint: s.fingerprint, ServiceTier: s.tier}
	for _, ev := range s.ew.EndEvents(head, finish, usage) {
		if err := s.emit(nil, ev, false); err != nil {
			return false
		}
	}
	if !s.started {
		s.commit(true)
		return true
	}
	setToolgateFields(s.w.Header(), t, true) // the declared trailers, final
	return false
}

// fail reports err: before the stream started, as a real status; after,
// as an error event that ends the stream without [DONE], so the client
// never mistakes a broken turn for a complete one.
func (s *relay) fail(g *Gateway, r *http.Request, err error) {
	s.failWith(g, r, err, s.errorEvent)
}

// failWith is fail for either kind of stream, whose error event event
// writes: a client that went away gets nothing, and a turn the server's
// shutdown cut gets its error event as one (shutdownCause).
func (s *relay) failWith(g *Gateway, r *http.Request, err error, event func(error)) {
	if !s.started && s.pending {
		s.commit(false) // events held for the client: the stream has begun
	}
	var ib *inBandError
	if !s.started && !errors.As(err, &ib) {
		g.failTurn(s.w, r, s.t, err)
		return
	}
	if errors.Is(r.Context().Err(), context.Canceled) {
		var cut bool
		if err, cut = shutdownCause(r, err); !cut {
			g.logger().DebugContext(r.Context(), "client went away mid-stream", "err", err)
			return
		}
	}
	g.logger().WarnContext(r.Context(), "stream failed after start", "err", err)
	defer s.flushFailed()
	event(err)
}

// errorEvent writes a Chat stream's error event for err. An upstream's
// error event goes on as it came, even as the stream's first (a context
// too long, a rate limit): the client gets what it would direct, with the
// upstream's type and code, not a 502 of the gateway's, which the SDKs
// would retry.
func (s *relay) errorEvent(err error) {
	var ib *inBandError
	if errors.As(err, &ib) {
		_ = s.write(ib.data)
		return
	}
	_ = s.write(errorBody(streamError(err)))
}

// streamError is the error a stream's error event reports for err: an
// upstream's status as the upstream put it, anything else classified.
func streamError(err error) apiError {
	var se *statusError
	if errors.As(err, &se) {
		return upstreamStatusError(se)
	}
	_, e := classify(err)
	return e
}

// flushFailed sends a failed stream's error event and sets its declared
// trailers to what the turn did until it failed (setToolgateFields), as
// end does for a turn that succeeds: left as they are, they would repeat
// the numbers of the headers, sent before the later rounds.
func (s *relay) flushFailed() {
	s.flush()
	setToolgateFields(s.w.Header(), s.t, true)
}
