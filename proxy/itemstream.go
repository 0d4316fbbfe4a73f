package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/toolgate/toolgate/rewrite"
)

// streamItemsTurn runs the search loop for a streamed request of a dialect
// whose stream speaks of output items (the Responses API's items, the
// Messages API's content blocks). The client gets one response stream:
// the first round's lifecycle events, every item of every round but the
// gateway's own calls (and the reasoning that led only to them, unless
// the dialect carries it to the turn's first item), renumbered so item
// indices (and sequence numbers, where the stream has them) run on
// across rounds, and the terminal events the dialect writes with the
// items the client saw and the usage of every round. The response keeps
// the first round's id throughout (the SDKs refuse a stream whose
// response changes identity); a Responses request that continues from
// it is sent on from the last round's, which holds the turn (threads.go).
func (g *Gateway) streamItemsTurn(w http.ResponseWriter, r *http.Request, rest string, t *turn, iw rewrite.ItemEventWriter) {
	ctx := r.Context()
	defer t.save(ctx) // a turn that fails saves too: it may have searched
	echo, _ := iw.(rewrite.ToolsEchoer)
	s := &itemRelay{relay: &relay{w: w, rc: http.NewResponseController(w), t: t}, iw: iw, echo: echo}
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
		t.noteUpstreamID(res.id)
		identify(res.calls, round)
		internal, real := t.split(res.calls)
		more := t.another(round, len(internal), len(real), res.awaits, res.cut)
		if more {
			s.flush() // the gateway searches and waits on the upstream next
		}
		results := t.answer(ctx, res.calls, round)
		if more {
			closeStream(resp.Body, false, cancel)
			s.carry(res) // reasoning that led only to the gateway's calls
			t.rounds = append(t.rounds, rewrite.Round{Content: res.text, Extra: rewrite.JoinItems(res.output), Calls: internal, Results: results})
			continue
		}
		t.pending = results
		if err := s.end(res); err != nil {
			closeStream(resp.Body, false, cancel)
			s.fail(g, r, err)
			return
		}
		// The session and the thread are noted before the client can
		// read the end (a client that sends its next turn at once must
		// find them), and the client has the end before the gateway
		// waits for the upstream stream's.
		t.save(ctx)
		t.rememberThread(context.WithoutCancel(ctx), t.id, res.id, real)
		if s.started {
			setToolgateFields(s.w.Header(), t, true) // the declared trailers, final
		} else {
			s.commit(true) // the whole turn in hand: final headers and a length
		}
		s.flush()
		closeStream(resp.Body, false, cancel)
		return
	}
}

// itemRelay is the client side of one streamed turn of output items.
type itemRelay struct {
	*relay // the client's writer: held events, headers, flushes
	iw     rewrite.ItemEventWriter
	echo   rewrite.ToolsEchoer // nil for a stream that echoes no tools
	seq    int                 // the next sequence_number the client sees
	next   int                 // the next output_index the client sees
	items  []string            // every item the client saw, by its index, as the rounds' responses gave them
	// waiting are the events of a round's reasoning items, kept until an
	// item the client sees follows them in the round (they go first) or
	// the round turns out to be the gateway's (they go nowhere, or to
	// carried): reasoning leads the calls it decided on, and a client
	// that resends a reasoning item without them is refused.
	waiting []heldEvent
	// carried are the reasoning items of the gateway's own rounds, for a
	// dialect that carries them (CarriesReasoning): they lead the turn's
	// first item the client sees when its round has none of its own.
	carried []carriedItem
}

// carriedItem is one reasoning item of a round of the gateway's: its
// events and the item, whole.
type carriedItem struct {
	round  int
	events []heldEvent
	raw    string
}

// heldEvent is one event of a held item.
type heldEvent struct {
	name  string
	index int // the item's upstream output_index
	data  []byte
}

// itemRound is what one upstream stream said.
type itemRound struct {
	round  int
	id     string
	calls  []rewrite.Call
	text   string   // what the round's messages said
	output []string // the round's output items, by upstream index
	last   []byte   // the terminal event
	name   string   // the terminal event's
	cut    bool     // the response ended short (ItemEvent.Cut)
	awaits bool     // an item other than a call waits for the client (ItemEvent.Awaits)
	shown  map[int]int
}

// round relays one upstream stream's events to the client.
func (s *itemRelay) round(ctx context.Context, resp *http.Response, round int, idle silences, cancel context.CancelFunc) (itemRound, error) {
	t := s.t
	body := newIdleReader(resp.Body, idle, cancel)
	defer body.stop()
	sse := t.g.sse.get(flushFirst{r: body, flush: s.flush})
	defer t.g.sse.put(sse)
	res := itemRound{round: round, shown: map[int]int{}}
	reader := s.iw.ItemReader()
	hidden := map[int]bool{}
	reasoning := map[int]bool{}
	for {
		data, comment, err := sse.Next()
		if err != nil {
			return res, readErr(ctx, body, err, "stream ended before the response did")
		}
		if comment {
			if err := s.keepAlive(resp, data); err != nil {
				return res, err
			}
			continue
		}
		ev, err := reader.Read(data)
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrUpstreamBadResponse, err)
		}
		if ev.Stray {
			continue
		}
		if s.resp == nil {
			s.resp = resp // the first round's headers are the client's
		}
		switch {
		case ev.Failed:
			return res, &inBandError{data: s.failure(&res, ev, data, hidden), name: ev.Type}
		case ev.Terminal:
			res.last, res.name = append([]byte(nil), data...), ev.Type
			s.finish(&res, ev, hidden)
			return res, nil
		case ev.OutputIndex < 0:
			// The lifecycle events open the client's one response: the
			// first round's go on, later rounds' would open another. A
			// keep-alive (ping) goes on from every round: while a later
			// round's reasoning is held, it is all the client gets, and
			// an idle timeout between would cut the stream.
			if ev.KeepAlive {
				if err := s.pass(ev.Type, data, -1); err != nil {
					return res, err
				}
			} else if round == 0 {
				echoed, err := s.echoTools(data)
				if err != nil {
					return res, err
				}
				if err := s.pass(ev.Type, echoed, -1); err != nil {
					return res, err
				}
			}
			continue
		}
		i := ev.OutputIndex
		if ev.Opens {
			switch rewrite.ShowOf(ev.Call, ev.Name, ev.Reasoning, t.keep) {
			case rewrite.ShowNever:
				hidden[i] = true
			case rewrite.ShowWithNext:
				reasoning[i] = true
			}
		}
		if _, shown := res.shown[i]; !shown && !hidden[i] && !reasoning[i] {
			// An item the client sees, at its first event (its
			// output_item.added, unless the upstream skipped that).
			if err := s.release(&res); err != nil {
				return res, err
			}
			res.shown[i] = s.show()
		}
		c, shown := res.shown[i]
		switch {
		case hidden[i]:
		case !shown: // a reasoning item, until what follows it shows
			s.waiting = append(s.waiting, heldEvent{name: ev.Type, index: i, data: append([]byte(nil), data...)})
			if err := s.holdAlive(); err != nil {
				return res, err
			}
		default:
			if err := s.pass(ev.Type, data, c); err != nil {
				return res, err
			}
		}
	}
}

// show gives the next item the client sees its index.
func (s *itemRelay) show() int {
	s.next++
	return s.next - 1
}

// carry takes the held reasoning of a round of the gateway's (res) off
// the wait: to carried when the dialect carries it, else nowhere.
func (s *itemRelay) carry(res itemRound) {
	if s.iw.CarriesReasoning() {
		for _, h := range s.waiting {
			if n := len(s.carried); n > 0 && s.carried[n-1].events[0].index == h.index && s.carried[n-1].round == res.round {
				s.carried[n-1].events = append(s.carried[n-1].events, h)
				continue
			}
			raw := ""
			if h.index < len(res.output) {
				raw = res.output[h.index]
			}
			s.carried = append(s.carried, carriedItem{round: res.round, events: []heldEvent{h}, raw: raw})
		}
	}
	s.waiting = s.waiting[:0]
}

// lead sends the carried reasoning as the turn's first items, when the
// round about to show its first item has none of its own.
func (s *itemRelay) lead() error {
	carried := s.carried
	s.carried = nil
	if s.next > 0 || len(s.waiting) > 0 {
		return nil
	}
	for _, c := range carried {
		at := s.show()
		for _, h := range c.events {
			if err := s.pass(h.name, h.data, at); err != nil {
				return err
			}
		}
		s.record(at, c.raw)
	}
	return nil
}

// release sends the held reasoning items, in order, before an item the
// client sees: what they led to is the client's.
func (s *itemRelay) release(res *itemRound) error {
	if err := s.lead(); err != nil {
		return err
	}
	for _, h := range s.waiting {
		if _, ok := res.shown[h.index]; !ok {
			res.shown[h.index] = s.show()
		}
		if err := s.pass(h.name, h.data, res.shown[h.index]); err != nil {
			return err
		}
	}
	s.waiting = s.waiting[:0]
	return nil
}

// pass sends one upstream event on, renumbered.
func (s *itemRelay) pass(name string, data []byte, index int) error {
	out, err := s.iw.EditItemEvent(data, s.seq, index, "")
	if err != nil {
		return err
	}
	s.seq++
	return s.writeNamed(name, out)
}

// finish takes a round's response when its stream ends (ev, its terminal
// event): the usage, the calls, what its messages said, its items for the
// next round, and the items the client saw for the turn's last event:
// not the gateway's calls (hidden), even one whose stray event came
// before its output_item.added and was shown.
func (s *itemRelay) finish(res *itemRound, ev rewrite.ItemEvent, hidden map[int]bool) {
	s.t.addUsage(ev.Usage)
	res.id, res.calls, res.text, res.output, res.cut, res.awaits = ev.ID, ev.Calls, ev.Text, ev.Items, ev.Cut, ev.Awaits
	if s.t.id == "" {
		s.t.id, s.t.created = ev.ID, ev.Created
	}
	for i, raw := range ev.Items {
		// A held reasoning item is the client's if the round is; end
		// decides, and records it then.
		if c, ok := res.shown[i]; ok && !hidden[i] {
			s.record(c, raw)
		}
	}
}

// failure returns the data of the event that fails the turn (ev, data).
// One that holds its response (the Responses API's response.failed) ends
// the client's response, which already showed the earlier rounds' items,
// as end does: with every item the client saw and the usage of every
// round, the upstream's status and error kept. Any other goes as it came.
func (s *itemRelay) failure(res *itemRound, ev rewrite.ItemEvent, data []byte, hidden map[int]bool) []byte {
	raw := append([]byte(nil), data...)
	if ev.ID == "" {
		return raw
	}
	s.finish(res, ev, hidden)
	echoed, err := s.echoTools(raw)
	if err != nil {
		return raw
	}
	end, err := s.iw.EndItemEvents(rewrite.NamedEvent{Name: ev.Type, Data: echoed}, s.t.id, s.shownItems(), s.t.clientUsage(), s.seq)
	if err != nil || len(end) != 1 {
		return raw
	}
	return end[0].Data
}

// echoTools returns an event whose response echoes the round's tools
// with the client's own in their place (rewrite.ToolsEchoer); data as it
// is for a stream that echoes none.
func (s *itemRelay) echoTools(data []byte) ([]byte, error) {
	if s.echo == nil {
		return data, nil
	}
	return s.echo.EchoTools(data, s.t.req.ToolsRaw.Raw)
}

// shownItems returns the items the client saw, in its order.
func (s *itemRelay) shownItems() []string {
	var items []string
	for _, it := range s.items {
		if it != "" {
			items = append(items, it)
		}
	}
	return items
}

// record keeps the item the client saw at index c for the last event.
func (s *itemRelay) record(c int, raw string) {
	for len(s.items) <= c {
		s.items = append(s.items, "")
	}
	s.items[c] = raw
}

// end sends the held reasoning of the last round and the turn's terminal
// event: the last round's, with every item the client saw and the summed
// usage.
func (s *itemRelay) end(res itemRound) error {
	held := append([]heldEvent(nil), s.waiting...)
	if err := s.release(&res); err != nil {
		return err
	}
	for _, h := range held {
		if h.index < len(res.output) {
			s.record(res.shown[h.index], res.output[h.index])
		}
	}
	echoed, err := s.echoTools(res.last)
	if err != nil {
		return err
	}
	last := rewrite.NamedEvent{Name: res.name, Data: echoed}
	if s.t.capped {
		if last, err = s.iw.CutAtCap(last); err != nil {
			return err
		}
	}
	end, err := s.iw.EndItemEvents(last, s.t.id, s.shownItems(), s.t.clientUsage(), s.seq)
	if err != nil {
		return err
	}
	for _, ev := range end {
		s.seq++
		if err := s.writeNamed(ev.Name, ev.Data); err != nil {
			return err
		}
	}
	return nil
}

// fail reports err: before the stream started, as a real status; after,
// as the dialect's error event, which ends its stream.
func (s *itemRelay) fail(g *Gateway, r *http.Request, err error) {
	s.failWith(g, r, err, s.errorEvent)
}

// errorEvent writes the dialect's error event for err: an upstream's
// error event renumbered, else the dialect's event of streamError's error.
func (s *itemRelay) errorEvent(err error) {
	var ib *inBandError
	if errors.As(err, &ib) {
		// A later round's response.failed names that round's response:
		// the client's stream has one, the first's.
		if out, e := s.iw.EditItemEvent(ib.data, s.seq, -1, s.t.id); e == nil {
			_ = s.writeNamed(ib.name, out)
			return
		}
	}
	e := streamError(err)
	ev := s.iw.ErrorEvent(e.Type, e.Code, e.Message, string(e.Param), s.seq)
	_ = s.writeNamed(ev.Name, ev.Data)
}
