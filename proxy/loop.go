package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
)

// maxResponseBody bounds a non-streamed upstream response.
const maxResponseBody = 64 << 20

// completeTurn runs the search loop for a non-streamed request: call the
// upstream, answer tool_search (and denied calls) itself, re-issue with the
// tools found, and return the client one response with only its own calls
// and the usage of every round.
func (g *Gateway) completeTurn(w http.ResponseWriter, r *http.Request, rest string, t *turn) {
	ctx := r.Context()
	defer t.save(ctx) // a turn that fails saves too: it may have searched
	g.knownRefusals(t.req)
	for round := 0; ; round++ {
		tools := t.roundTools(round)
		body, err := t.d.Build(t.req, tools, t.rounds)
		if err != nil {
			g.failTurn(w, r, t, err)
			return
		}
		resp, err := t.sendRound(ctx, r, sendOptions{rest: rest, body: body, retries: g.retries(t.snap, round), round: round, key: t.snap.Gateway.UpstreamKey}, tools)
		if err != nil {
			g.failTurn(w, r, t, err)
			return
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
		resp.Body.Close()
		if err != nil {
			g.failTurn(w, r, t, fmt.Errorf("%w: reading: %w", ErrUpstreamBadResponse, upstreamErr(ctx, err)))
			return
		}
		out, err := t.d.ParseResponse(raw)
		if err != nil {
			if se := errorAnswer(resp, raw); se != nil {
				g.failTurn(w, r, t, se)
				return
			}
			g.failTurn(w, r, t, fmt.Errorf("%w: %w", ErrUpstreamBadResponse, err))
			return
		}
		t.noteUpstreamID(out.ID)
		if round == 0 {
			t.id, t.created = out.ID, out.Created
			t.promptFilter = strings.Clone(out.PromptFilter)
		}
		t.addUsage(out.Usage)
		identify(out.Calls, round)
		internal, real := t.split(out.Calls)
		results := t.answer(ctx, out.Calls, round)
		if t.another(round, len(internal), len(real), out.Awaits, rewrite.CutShort(out.FinishReason)) {
			t.rounds = append(t.rounds, rewrite.Round{Content: out.Content, ContentParts: out.ContentParts, Extra: out.Extra, Calls: internal, Results: results, Logprobs: out.Logprobs, Annotations: out.Annotations})
			continue
		}
		t.pending = results
		turn := rewrite.Turn{
			Keep:  t.keep,
			Usage: t.clientUsage(), ID: t.id, Created: t.created,
			PromptFilter: t.promptFilter, Rounds: t.rounds, Capped: t.capped,
			Tools: t.req.ToolsRaw.Raw,
		}
		if !t.req.JSONOutput {
			turn.Text, turn.Logprobs, turn.Annotations = t.roundsText()
		}
		final, err := t.d.ClientResponse(out, turn)
		if err != nil {
			g.failTurn(w, r, t, err)
			return
		}
		copyEndToEnd(w.Header(), resp.Header, responseSkip)
		setToolgateHeaders(w.Header(), t)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(final)))
		// The session is saved, and the answer's id noted as its thread,
		// before the client can read the answer (a client that sends its
		// next turn at once must find this one's state), and the answer
		// is flushed before the handler returns: the metrics and the
		// decision log are written after the client has what it asked
		// for, not before.
		t.save(ctx)
		t.rememberThread(context.WithoutCancel(ctx), out.ID, out.ID, real)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(final)
		_ = http.NewResponseController(w).Flush()
		return
	}
}

// failTurn writes err to the client of a rewritten turn with the
// X-Toolgate-* fields of what the turn did until it failed: the rounds
// sent, the refused one included, their tools, and the input tokens of
// the rounds the upstream answered. A turn refused after its searches
// cost those rounds, and its answer said nothing of them.
func (g *Gateway) failTurn(w http.ResponseWriter, r *http.Request, t *turn, err error) {
	setToolgateFields(w.Header(), t, true)
	g.fail(w, r, err)
}

// withSearch reports whether round i offers tool_search: never in preselect
// mode, nor when tool_choice restricts the model to tools it names (see
// chosenOnly), nor in a turn that offers every tool (allShown), and not in
// the last round the bound allows.
func (t *turn) withSearch(round int) bool {
	if t.allShown || t.snap.Gateway.Mode == policy.ModePreselect || t.chosenOnly() {
		return false
	}
	return round < t.maxRounds()
}

// chosenOnly reports whether tool_choice restricts the model to the tools
// it names: a named function (Messages: {"type":"tool"}), or allowed_tools.
// The model can call no other tool, tool_search included, so the rounds
// offer those alone: anything else would be tokens it cannot use.
func (t *turn) chosenOnly() bool { return t.req.ToolChoice != "" || len(t.req.Allowed) > 0 }

// chosen reports whether tool_choice names the tool name.
func (t *turn) chosen(name string) bool {
	return name == t.req.ToolChoice || slices.Contains(t.req.Allowed, name)
}

// another decides whether the gateway answers round's calls itself and
// asks the upstream again: the round called only the gateway's tools
// (mayContinue), no item of it waits for the client (awaits), it was not
// cut short (cut), and the output cap leaves room (reserveOutput). Call
// it once per round, after the round's response: it caps the next
// round's output, or marks the turn capped, so reserveOutput goes last,
// reached only when every other condition holds.
func (t *turn) another(round, internal, real int, awaits, cut bool) bool {
	return t.mayContinue(round, internal, real) && !awaits && !cut && t.reserveOutput()
}

// mayContinue reports whether round's calls (internal of the gateway's,
// real of the client's) leave the gateway to answer them and the bound
// lets it ask again (canContinue). It has no effect: a stream's relay asks
// it at the round's finish, before the round has ended.
func (t *turn) mayContinue(round, internal, real int) bool {
	return internal > 0 && real == 0 && t.canContinue(round)
}

// canContinue reports whether the gateway may answer round i's internal
// calls and ask the upstream again: rounds 0..max_rounds-1 may, and so may
// round max_rounds, once. It offers no tool_search, but a model may call
// it there anyway (its earlier searches are in the conversation), or call
// a denied tool: answered "spent" or "blocked", it gets one round more to
// finish with: ending the turn there would give the client an empty
// message, on which an agent loop stops.
func (t *turn) canContinue(round int) bool { return round <= t.maxRounds() }

func (t *turn) maxRounds() int {
	if n := t.snap.Gateway.MaxRounds; n > 0 {
		return n
	}
	return 4
}

// roundsText is what the model said in the rounds the gateway answered
// itself, the logprobs of those words, and their annotations (a web-search
// model's url_citations), each round's shifted by the text before its
// own, as a stream's relay shifts them. A streamed turn relays it as
// it comes, so the client's answer reads the same whether it streamed or
// not. completeTurn leaves it out of an answer that must be JSON
// (response_format), where it would make the content unparseable; a
// stream cannot take back what it relayed (README, "Limits worth
// knowing").
func (t *turn) roundsText() (string, []string, []string) {
	var b strings.Builder
	var lps, anns []string
	runes := 0 // the annotations' offsets count characters (rewrite.ShiftAnnotations)
	for _, r := range t.rounds {
		if r.Annotations != "" {
			anns = append(anns, rewrite.ShiftAnnotations(r.Annotations, runes))
		}
		b.WriteString(r.Content)
		runes += utf8.RuneCountInString(r.Content)
		if r.Content != "" && r.Logprobs != "" {
			lps = append(lps, r.Logprobs)
		}
	}
	return b.String(), lps, anns
}
