package proxy

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
)

// streamTurn runs the search loop for a streamed request. Text reaches the
// client as it arrives; tool_search is swallowed and the next round streams
// on under the first round's id, so the client sees one completion with one
// finish, one usage chunk (if asked) and one [DONE].
func (g *Gateway) streamTurn(w http.ResponseWriter, r *http.Request, rest string, t *turn, ew rewrite.EventWriter) {
	ctx := r.Context()
	saved := false
	defer func() {
		if !saved {
			t.save(context.WithoutCancel(ctx))
		}
	}()
	s := &relay{w: w, rc: http.NewResponseController(w), t: t, ew: ew}
	g.knownRefusals(t.req)
	for round := 0; ; round++ {
		resp, rctx, cancel, err := g.openRound(ctx, r, rest, t, round)
		if err != nil {
			s.fail(g, r, err)
			return
		}
		res, err := s.round(rctx, resp, round, t.g.streamSilences(t.snap.Gateway), cancel)
		if err != nil {
			resp.Body.Close()
			cancel()
			s.fail(g, r, err)
			return
		}
		identify(res.calls, round)
		internal, real := t.split(res.calls)
		g.logger().Debug("stream round", "round", round, "calls", len(res.calls), "internal", len(internal), "real", len(real))
		more := t.another(round, len(internal), len(real), false, res.cut)
		if more {
			s.flush() // the gateway searches and waits on the upstream next
		}
		results := t.answer(ctx, res.calls, round)
		if more {
			closeStream(resp.Body, res.drained, cancel)
			// Its reasoning led only to the gateway's calls: the client's
			// answer has none of it, as a whole answer has not; the
			// upstream gets it back with the round (res.extra).
			s.dropThoughts()
			t.rounds = append(t.rounds, rewrite.Round{Content: res.content, ContentParts: res.parts, Extra: res.extra, Calls: internal, Results: results})
			continue
		}
		whole := s.end()
		if !res.drained || whole {
			// The client gets the turn before the gateway waits for the
			// upstream stream's end, and a whole answer (sent with its
			// length: flushing it costs no write) before the metrics
			// and the decision log are written. A chunked stream that
			// is drained keeps its end events for the handler's return,
			// which writes them with the chunked body's end in one write.
			t.save(context.WithoutCancel(ctx))
			saved = true
			s.flush()
		}
		closeStream(resp.Body, res.drained, cancel)
		return
	}
}

// openRound builds and sends a streamed turn's round; the caller reads
// the response under rctx and ends it with closeStream. A round that fails
// with a status sent the client nothing, so it may be sent again even
// after earlier rounds' text went out (retries): a stream's client cannot
// retry an error event.
func (g *Gateway) openRound(ctx context.Context, r *http.Request, rest string, t *turn, round int) (resp *http.Response, rctx context.Context, cancel context.CancelFunc, err error) {
	tools := t.roundTools(round)
	body, err := t.d.Build(t.req, tools, t.rounds)
	if err != nil {
		return nil, nil, nil, err
	}
	rctx, cancel = context.WithCancel(ctx)
	o := sendOptions{rest: rest, body: body, stream: true, retries: g.retries(t.snap, round), round: round, key: t.snap.Gateway.UpstreamKey}
	if resp, err = t.sendRound(rctx, r, o, tools); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	if err := jsonRefusal(resp); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return resp, rctx, cancel, nil
}

// jsonRefusal returns the refusal a 2xx answer to a streamed request
// holds when it came as JSON, not as a stream: OpenRouter reports a
// failure after it has started on a request as a 200 whose body is
// {"error":{...}}, which read as a stream ended early and reached the
// client as the gateway's own 502 (see errorAnswer). Any other JSON body
// is left to the relay to refuse, as before; the body is read back in.
func jsonRefusal(resp *http.Response) error {
	// The media type read by hand, case and parameters aside, where
	// mime.ParseMediaType would allocate its parameters' map on every
	// streamed round.
	const jsonType = "application/json"
	ct := strings.TrimSpace(resp.Header.Get("Content-Type"))
	if len(ct) < len(jsonType) || !strings.EqualFold(ct[:len(jsonType)], jsonType) ||
		len(ct) > len(jsonType) && ct[len(jsonType)] != ';' && ct[len(jsonType)] != ' ' {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if se := errorAnswer(resp, body); err == nil && se != nil {
		resp.Body.Close()
		return se
	}
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	return nil
}

// readCloser reads from Reader and closes Closer.
type readCloser struct {
	io.Reader
	io.Closer
}

// closeStream ends a round's upstream response. Reading a body to its end
// returns the connection to the transport's pool; closing it before makes
// an HTTP/1.1 transport discard the connection, so the next upstream call
// opens a new one and the old leaves a socket in TIME_WAIT. A chunked
// stream's last chunk often arrives after [DONE], where the relay stops:
// unless the round read the end already (drained), closeStream waits for
// it, at most drainMax bytes for at most drainWait.
func closeStream(body io.ReadCloser, drained bool, cancel context.CancelFunc) {
	if !drained {
		t := time.AfterFunc(drainWait, cancel)
		_, _ = io.CopyN(io.Discard, body, drainMax)
		t.Stop()
	}
	_ = body.Close()
	cancel()
}

const (
	drainMax  = 64 << 10
	drainWait = 100 * time.Millisecond
)

// relay is the client side of one streamed turn.
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
	// the gateway's (dropThoughts): a search round's reasoning reached
	// the client under the same reasoning_details indexes as the
	// answer's, which an accumulator merges into one ("SIG0SIG1"), and a
	// whole answer has the last round's alone. thoughtRole is whether
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

// callState follows one upstream tool call through its fragments.
type callState struct {
	id, name string
	args     strings.Builder
	extra    rewrite.Members // provider members (a thought signature)
	internal bool
	client   int  // index the client sees, for real calls
	held     bool // fragments arrived before the name and were held back
	sent     bool
}

// roundResult is what one upstream stream said.
type roundResult struct {
	content string
	parts   string // the content as an array of parts, when it was one (Round.ContentParts)
	extra   string // the message's other members (reasoning), as Round.Extra
	calls   []rewrite.Call
	drained bool // the body's end was read, not only [DONE]
	cut     bool // the round finished short of its answer (rewrite.CutShort)
}

// round relays one upstream stream to the client.
func (s *relay) round(ctx context.Context, resp *http.Response, round int, idle silences, cancel context.CancelFunc) (roundResult, error) {
	t := s.t
	body := newIdleReader(resp.Body, idle, cancel)
	defer body.stop()
	// Events are flushed whenever the relay is about to wait: before every
	// read of the upstream, before a search round (streamTurn), and with
	// the turn's end events. Events that arrived together leave in one
	// write, the last round's with the end's, and none is held while the
	// gateway waits.
	sse := t.g.sse.get(flushFirst{r: body, flush: s.flush})
	defer t.g.sse.put(sse)
	var (
		ev      = &rewrite.Event{} // each event's, reused
		res     roundResult
		content strings.Builder
		parts   contentParts // the content's parts, when the model writes parts
		extra   rewrite.Members
		order   []*callState         // every call, in the order they began
		states  map[int64]*callState // the call each upstream index is on; made at the first fragment
		ended   bool                 // this round's upstream sent its finish
		sent    bool                 // this round sent the client an event
		usage   []byte               // this stream's: its last usage chunk stands for the earlier ones
		before  = s.said             // the characters earlier rounds relayed
		behind  = s.details          // the reasoning details earlier rounds relayed
	)
	defer func() { t.addUsage(gjson.ParseBytes(usage)) }()
	for {
		data, comment, err := sse.Next()
		if err != nil {
			if body.expired() {
				return res, fmt.Errorf("%w: %s", ErrUpstreamTimeout, body.silence())
			}
			// Some servers omit [DONE]: a stream that ends cleanly after
			// its finish chunk is complete.
			if errors.Is(err, io.EOF) && ended {
				break
			}
			if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ErrShuttingDown)) {
				return res, err // the client left, or the server cut the turn: not the upstream's fault
			}
			return res, fmt.Errorf("%w: stream ended early: %w", ErrUpstreamBadResponse, err)
		}
		if comment {
			if err := s.keepAlive(resp, data); err != nil {
				return res, err
			}
			continue
		}
		if err := s.ew.ParseEvent(data, ev); err != nil {
			return res, fmt.Errorf("%w: %w", ErrUpstreamBadResponse, err)
		}
		if ev.End {
			break
		}
		if ev.Error.Exists() {
			return res, &inBandError{data: append([]byte(nil), data...)}
		}
		// ev aliases the reader's buffer: clone what outlives this event.
		if t.id == "" {
			t.id, t.created = strings.Clone(ev.ID), ev.Created
		}
		if s.model == "" {
			s.model = strings.Clone(ev.Model)
		}
		if ev.SystemFingerprint != "" && ev.SystemFingerprint != s.fingerprint {
			s.fingerprint = strings.Clone(ev.SystemFingerprint)
		}
		if ev.ServiceTier != "" && ev.ServiceTier != s.tier {
			s.tier = strings.Clone(ev.ServiceTier)
		}
		if ev.Usage.IsObject() {
			usage = rewrite.LatestUsage(usage, ev.Usage)
		}
		if ev.Choice < 0 {
			// The usage chunk: the client gets one summed at the end.
			// Any other chunk without a choice is a provider's annotation
			// (Azure's prompt_filter_results first, its filter verdicts
			// later).
			switch {
			case ev.Usage.IsObject():
			case s.thoughtText:
				if err := s.hold(data, rewrite.EventEdit{ID: t.id, Created: t.created}, false); err != nil {
					return res, err
				}
			default:
				if err := s.annotate(resp, data, round, sent); err != nil {
					return res, err
				}
			}
			continue
		}
		parts.add(ev.Content, ev.ContentParts, &content)
		content.WriteString(ev.Content)
		if ev.Extra {
			ev.AddExtra(&extra)
		}
		// A usage riding on a chunk goes (the client gets one summed usage
		// chunk), and so does a null one the client did not ask for (the
		// gateway asks for usage); a client that asked has a null on every
		// chunk direct too (OpenAI's), and removing it cost a copy an event.
		drop := ev.Usage.Exists() && (ev.Usage.Type != gjson.Null || !t.req.IncludeUsage)
		edit := rewrite.EventEdit{ID: t.id, Created: t.created, DropUsage: drop, ShiftAnnotations: before}
		var calls []string
		for _, cd := range ev.Calls {
			st := states[cd.Index]
			if st != nil && (cd.ID != "" && st.id != "" && cd.ID != st.id || cd.Index < 0 && cd.Name != "" && st.name != "") {
				// Another call at an index in use: some servers number
				// every call 0, or send no index at all (Gemini), with
				// each call whole. OpenAI sends a call's id once; without
				// an index, a fragment that names a function again begins
				// the next call, with or without an id.
				st = nil
			}
			if st == nil {
				if states == nil {
					states = map[int64]*callState{}
				}
				st = &callState{}
				states[cd.Index] = st
				order = append(order, st)
			}
			if cd.ID != "" && st.id == "" {
				st.id = strings.Clone(cd.ID)
			}
			st.args.WriteString(cd.Args)
			if cd.Extra {
				cd.AddExtra(&st.extra)
			}
			if st.name == "" && cd.Name != "" {
				st.name = strings.Clone(cd.Name)
				st.internal = t.internal(rewrite.Call{Name: cd.Name})
				if !st.internal {
					st.client = s.next
					s.next++
				}
			}
			switch {
			case st.name == "":
				st.held = true
				edit.SetCalls = true
			case st.internal:
				edit.SetCalls = true
			case st.held && !st.sent:
				calls = append(calls, s.ew.CallDelta("", st.client, st.id, st.name, st.args.String()))
				edit.SetCalls = true
			default:
				raw := cd.Raw
				if first := order[0]; !st.sent && st.client == 0 && first != st && first.internal && !cd.Extra {
					// The step's members (Gemini's thought signature) rode
					// on the gateway's call: rewrite.FirstCallMembers.
					raw = rewrite.FirstCallMembers(raw, "", first.extra.String())
				}
				if int64(st.client) != cd.Index || raw != cd.Raw {
					edit.SetCalls = true
				}
				calls = append(calls, s.ew.CallDelta(raw, st.client, "", "", ""))
			}
			if st.name != "" && !st.internal {
				st.sent = true
			}
		}
		edit.Calls = calls
		emitFinish := false
		if ev.Finish != "" {
			ended = true
			internalN, realN := count(order)
			res.cut = rewrite.CutShort(ev.Finish)
			switch {
			case realN > 0, res.cut:
				// A round cut short ends the turn with its own finish.
				emitFinish = true
			case t.mayContinue(round, internalN, realN):
				edit.Finish = "null"
			case internalN > 0:
				edit.Finish, emitFinish = "stop", true
			default:
				emitFinish = true
			}
			if s.finished { // an upstream that finishes twice: the client gets one
				edit.Finish, emitFinish = "null", false
			}
		}
		hasRole := ev.Role
		if hasRole && s.roleGone() {
			edit.DropRole, hasRole = true, false
		}
		if ev.Details > 0 {
			edit.ShiftDetails = behind
		}
		// An answer that must be JSON holds the round's text too: a
		// search round's words ("Let me look that up.") would lead the
		// JSON, and the SDKs parse the whole content (openai's
		// finalChatCompletion throws). The round's end shows whether it
		// is the answer.
		if (ev.Thought || t.req.JSONOutput && ev.Text) && len(calls) == 0 && !emitFinish {
			s.thoughtDetails = max(s.thoughtDetails, behind+ev.Details)
			if !ev.Thought {
				s.thoughtSaid += utf8.RuneCountInString(ev.Content)
				s.thoughtText = true
			}
			if err := s.hold(data, edit, hasRole); err != nil {
				return res, err
			}
			continue
		}
		if !ev.Text && len(calls) == 0 && !emitFinish && !hasRole && (sent || s.thoughtText) && ev.Annotation() {
			// A verdict on text this round sent (Azure's asynchronous
			// content filter): the client acts on it, so it goes on, or
			// waits with the text it judges. One on a round that sent
			// nothing judges a tool_search call the client never sees.
			if s.thoughtText {
				err = s.hold(data, edit, false)
			} else {
				err = s.passOn(data, edit)
			}
			if err != nil {
				return res, err
			}
			continue
		}
		if !ev.Text && len(calls) == 0 && !emitFinish {
			// Nothing for the client, but the role: OpenAI sends it in
			// the first chunk, with the first call's start when the
			// model calls tool_search first. The first chunk that has it
			// (its internal calls cut) is held and goes out before the
			// first event that is sent, unless that event has a role of
			// its own; later rounds' roles are dropped, so the client
			// sees one.
			if !s.sentRole && s.role == nil && hasRole {
				s.role, _ = s.ew.EditEvent(append([]byte(nil), data...), edit)
			}
			continue
		}
		out, err := s.ew.EditEvent(data, edit)
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrUpstreamBadResponse, err)
		}
		if err := s.emit(resp, out, hasRole); err != nil {
			return res, err
		}
		s.said += utf8.RuneCountInString(ev.Content)
		s.details = max(s.details, behind+ev.Details)
		sent = true
		if emitFinish {
			s.finished = true
		}
	}
	res.content, res.extra, res.parts = content.String(), extra.String(), parts.array()
	res.drained = body.sawEOF
	for _, st := range order {
		res.calls = append(res.calls, rewrite.Call{ID: st.id, Name: st.name, Arguments: st.args.String(), Extra: st.extra.String()})
	}
	return res, nil
}

// annotate handles a chunk without a choice or usage: a provider's
// annotation. Before a round sends anything it judges the round's prompt
// (Azure's prompt_filter_results): the first round's prompt is the
// client's, so its annotation is held and goes out first, before the
// role, once something follows; the next rounds' prompts carry the
// gateway's search, and their annotations stay here. After a round sent
// text it judges that text and goes on at once, under the turn's id.
func (s *relay) annotate(resp *http.Response, data []byte, round int, sent bool) error {
	if sent {
		return s.passOn(data, rewrite.EventEdit{ID: s.t.id, Created: s.t.created})
	}
	// Held until round 0 sends something, which emits it: so while round 0
	// has sent nothing, a held note is the one it already had.
	if round == 0 && s.note == nil {
		s.note = append([]byte(nil), data...)
		if s.resp == nil {
			s.resp = resp
		}
	}
	return nil
}

// passOn writes an annotation with e applied: it goes to the client as
// it came, outside emit's handling of the role.
func (s *relay) passOn(data []byte, e rewrite.EventEdit) error {
	out, err := s.ew.EditEvent(data, e)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUpstreamBadResponse, err)
	}
	return s.write(out)
}

func count(calls []*callState) (internal, real int) {
	for _, st := range calls {
		switch {
		case st.name == "":
		case st.internal:
			internal++
		default:
			real++
		}
	}
	return internal, real
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
		copyEndToEnd(h, s.resp.Header, responseSkip...)
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
			g.logger().Debug("client went away mid-stream", "err", err)
			return
		}
	}
	g.logger().Warn("stream failed after start", "err", err)
	defer s.flushFailed()
	// An upstream's error event goes on as it came, even as the stream's
	// first (a context too long, a rate limit): the client gets what it
	// would direct, with the upstream's type and code. It got a 502 of
	// the gateway's, which the SDKs retry.
	if errors.As(err, &ib) {
		_ = s.write(ib.data)
		return
	}
	var se *statusError
	if errors.As(err, &se) {
		_ = s.write(errorBody(upstreamStatusError(se)))
		return
	}
	_, e := classify(err)
	_ = s.write(errorBody(e))
}

// flushFailed sends a failed stream's error event and sets its declared
// trailers to what the turn did until it failed (setToolgateFields), as
// end does for a turn that succeeds: left as they were, they repeated the
// numbers of the headers, sent before the later rounds.
func (s *relay) flushFailed() {
	s.flush()
	setToolgateFields(s.w.Header(), s.t, true)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// inBandError is an error event the upstream sent inside its stream.
type inBandError struct {
	data []byte
	name string // the event's name, in a stream that names its events
}

func (e *inBandError) Error() string { return "upstream stream error: " + truncate(e.data, 200) }

// contentParts gathers a streamed round's content when the model writes it
// as arrays of parts (Magistral: each chunk's delta.content an array of
// thinking or text parts), so the round goes back upstream as parts and
// not as their JSON text in a string. Text chunks among them become text
// parts, in order. Until the first parts it holds nothing: the text before
// them is the round's content so far, which the relay keeps anyway.
type contentParts struct {
	items []string
	any   bool
}

// add adds a chunk's content: its text, or its parts; before is the
// round's text up to this chunk.
func (p *contentParts) add(text, parts string, before *strings.Builder) {
	switch {
	case parts != "":
		if !p.any && before.Len() > 0 {
			p.items = append(p.items, rewrite.TextPart(before.String()))
		}
		p.any = true
		gjson.Parse(parts).ForEach(func(_, v gjson.Result) bool {
			p.items = append(p.items, strings.Clone(v.Raw)) // parts aliases the reader's buffer
			return true
		})
	case p.any && text != "":
		p.items = append(p.items, rewrite.TextPart(text))
	}
}

// array is the parts as a JSON array, or "" when the content was text.
func (p *contentParts) array() string {
	if !p.any {
		return ""
	}
	return "[" + strings.Join(p.items, ",") + "]"
}
