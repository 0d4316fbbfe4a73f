package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	defer t.save(ctx) // a turn that fails saves too: it may have searched
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
		g.logger().DebugContext(ctx, "stream round", "round", round, "calls", len(res.calls), "internal", len(internal), "real", len(real))
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
			t.save(ctx)
			s.flush()
		}
		closeStream(resp.Body, res.drained, cancel)
		return
	}
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
		calls   callAssembler
		ended   bool        // this round's upstream sent its finish
		sent    bool        // this round sent the client an event
		usage   []byte      // this stream's: its last usage chunk stands for the earlier ones
		before  = s.said    // the characters earlier rounds relayed
		behind  = s.details // the reasoning details earlier rounds relayed
	)
	defer func() { t.addUsage(gjson.ParseBytes(usage)) }()
	for {
		data, comment, err := sse.Next()
		if err != nil {
			// Some servers omit [DONE]: a stream that ends cleanly after
			// its finish chunk is complete.
			if errors.Is(err, io.EOF) && ended && !body.expired() {
				break
			}
			return res, readErr(ctx, body, err, "stream ended early")
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
		s.noteHead(ev)
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
		edit.Calls = calls.add(s, ev.Calls, &edit)
		emitFinish := false
		if ev.Finish != "" {
			ended = true
			res.cut = rewrite.CutShort(ev.Finish)
			emitFinish = s.finishEdit(round, calls.order, res.cut, &edit)
		}
		hasRole := ev.Role
		if hasRole && s.roleGone() {
			edit.DropRole, hasRole = true, false
		}
		if ev.Details > 0 {
			edit.ShiftDetails = behind
		}
		if sent, err = s.route(chatEvent{resp: resp, data: data, ev: ev, edit: edit, emitFinish: emitFinish, hasRole: hasRole, behind: behind}, sent); err != nil {
			return res, err
		}
	}
	res.content, res.extra, res.parts = content.String(), extra.String(), parts.array()
	res.drained = body.sawEOF
	for _, st := range calls.order {
		res.calls = append(res.calls, rewrite.Call{ID: st.id, Name: st.name, Arguments: st.args.String(), Extra: st.extra.String()})
	}
	return res, nil
}

// readErr is the error a round's read of its upstream stream failed with
// (err): the upstream's silence, the request's end (the client left, or
// the server cut the turn: not the upstream's fault, so err as it is), or
// else a stream that ended before it should (early says how).
func readErr(ctx context.Context, body *idleReader, err error, early string) error {
	if body.expired() {
		return fmt.Errorf("%w: %s", ErrUpstreamTimeout, body.silence())
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ErrShuttingDown)) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrUpstreamBadResponse, early, err)
}

// noteHead keeps what the turn and the gateway's own chunks need of an
// event's head: the first id and model, the latest fingerprint and tier.
// ev aliases the reader's buffer: what outlives the event is cloned.
func (s *relay) noteHead(ev *rewrite.Event) {
	t := s.t
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
}

// callAssembler follows a round's upstream tool calls through their
// fragments.
type callAssembler struct {
	order  []*callState         // every call, in the order they began
	states map[int64]*callState // the call each upstream index is on; made at the first fragment
}

// add takes an event's call fragments (cds) and returns the call deltas
// the client gets for them: none of the gateway's calls, a client call's
// fragments held until its name is known, the client's calls numbered
// from 0 across rounds. It sets edit.SetCalls when the event's calls
// must be rewritten.
func (a *callAssembler) add(s *relay, cds []rewrite.CallDelta, edit *rewrite.EventEdit) []string {
	var calls []string
	for _, cd := range cds {
		st := a.states[cd.Index]
		if st != nil && (cd.ID != "" && st.id != "" && cd.ID != st.id || cd.Index < 0 && cd.Name != "" && st.name != "") {
			// Another call at an index in use: some servers number
			// every call 0, or send no index at all (Gemini), with
			// each call whole. OpenAI sends a call's id once; without
			// an index, a fragment that names a function again begins
			// the next call, with or without an id.
			st = nil
		}
		if st == nil {
			if a.states == nil {
				a.states = map[int64]*callState{}
			}
			st = &callState{}
			a.states[cd.Index] = st
			a.order = append(a.order, st)
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
			st.internal = s.t.internal(rewrite.Call{Name: cd.Name})
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
			if first := a.order[0]; !st.sent && st.client == 0 && first != st && first.internal && !cd.Extra {
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
	return calls
}

// finishEdit decides what the client sees of a round's finish, given the
// round's calls so far (order) and whether it was cut short, and reports
// whether the finish goes out (emitFinish): a round that leads to another
// hides its finish, and the client gets one finish in all.
func (s *relay) finishEdit(round int, order []*callState, cut bool, edit *rewrite.EventEdit) (emitFinish bool) {
	internalN, realN := count(order)
	switch {
	case realN > 0, cut:
		// A round cut short ends the turn with its own finish.
		emitFinish = true
	case s.t.mayContinue(round, internalN, realN):
		edit.Finish = "null"
	case internalN > 0:
		edit.Finish, emitFinish = "stop", true
	default:
		emitFinish = true
	}
	if s.finished { // an upstream that finishes twice: the client gets one
		edit.Finish, emitFinish = "null", false
	}
	return emitFinish
}

// chatEvent is one upstream event of a round, as round read it and route
// sends it on.
type chatEvent struct {
	resp       *http.Response
	data       []byte            // the event as it came
	ev         *rewrite.Event    // data parsed
	edit       rewrite.EventEdit // what the client's copy changes
	emitFinish bool              // its finish goes to the client (finishEdit)
	hasRole    bool              // its role goes to the client
	behind     int64             // the reasoning details earlier rounds relayed
}

// route sends an event (c.data, with c.edit applied) where it goes: held
// with the round's reasoning, passed on as a provider's verdict, kept as
// the role chunk, dropped, or emitted. sent says whether the round sent
// the client an event before this one; route returns whether it has now.
func (s *relay) route(c chatEvent, sent bool) (bool, error) {
	calls := len(c.edit.Calls)
	// An answer that must be JSON holds the round's text too: a
	// search round's words ("Let me look that up.") would lead the
	// JSON, and the SDKs parse the whole content (openai's
	// finalChatCompletion throws). The round's end shows whether it
	// is the answer.
	if (c.ev.Thought || s.t.req.JSONOutput && c.ev.Text) && calls == 0 && !c.emitFinish {
		s.thoughtDetails = max(s.thoughtDetails, c.behind+c.ev.Details)
		if !c.ev.Thought {
			s.thoughtSaid += utf8.RuneCountInString(c.ev.Content)
			s.thoughtText = true
		}
		return sent, s.hold(c.data, c.edit, c.hasRole)
	}
	if !c.ev.Text && calls == 0 && !c.emitFinish && !c.hasRole && (sent || s.thoughtText) && c.ev.Annotation() {
		// A verdict on text this round sent (Azure's asynchronous
		// content filter): the client acts on it, so it goes on, or
		// waits with the text it judges. One on a round that sent
		// nothing judges a tool_search call the client never sees.
		if s.thoughtText {
			return sent, s.hold(c.data, c.edit, false)
		}
		return sent, s.passOn(c.data, c.edit)
	}
	if !c.ev.Text && calls == 0 && !c.emitFinish {
		// Nothing for the client, but the role: OpenAI sends it in
		// the first chunk, with the first call's start when the
		// model calls tool_search first. The first chunk that has it
		// (its internal calls cut) is held and goes out before the
		// first event that is sent, unless that event has a role of
		// its own; later rounds' roles are dropped, so the client
		// sees one.
		if !s.sentRole && s.role == nil && c.hasRole {
			s.role, _ = s.ew.EditEvent(append([]byte(nil), c.data...), c.edit)
		}
		return sent, nil
	}
	out, err := s.ew.EditEvent(c.data, c.edit)
	if err != nil {
		return sent, fmt.Errorf("%w: %w", ErrUpstreamBadResponse, err)
	}
	if err := s.emit(c.resp, out, c.hasRole); err != nil {
		return sent, err
	}
	s.said += utf8.RuneCountInString(c.ev.Content)
	s.details = max(s.details, c.behind+c.ev.Details)
	if c.emitFinish {
		s.finished = true
	}
	return true, nil
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
