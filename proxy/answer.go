package proxy

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/rewrite"
)

// maxSearchesPerRound bounds the tool_search calls answered in one upstream
// round; the calls past it get a short refusal instead of a search, so a
// model that fans out cannot make one round cost unbounded work.
const maxSearchesPerRound = 4

// internal reports whether the gateway answers call c itself: its search
// tool, and calls of tools the policy hides (which must never reach the
// client).
func (t *turn) internal(c rewrite.Call) bool {
	if t.isSearch(c) {
		return true
	}
	_, known := t.policy.Position(c.Name)
	return known && !t.isVisible(c.Name)
}

// isSearch reports whether c calls the gateway's search tool: never in a
// turn that offers no search (allShown), whose model calls a tool of that
// name only as the client would see it called without the gateway.
func (t *turn) isSearch(c rewrite.Call) bool { return c.Name == t.searchName && !t.allShown }

// keep reports whether the client gets call c: it is not the gateway's
// own (rewrite.Turn.Keep).
func (t *turn) keep(c rewrite.Call) bool { return !t.internal(c) }

// answer runs the internal calls of a round and returns their results; the
// tools found join the active set. Real calls are recorded for recency.
func (t *turn) answer(ctx context.Context, calls []rewrite.Call, round int) []rewrite.ToolResult {
	var results []rewrite.ToolResult
	// A miss is a call of a client tool this round's tools array did not
	// carry: judged before the searches of the same response add what
	// they find, and while found still says what the round offered.
	for _, c := range calls {
		if _, known := t.policy.Position(c.Name); known && !t.internal(c) && !t.offered(c.Name) {
			t.misses++
		}
	}
	clear(t.found)
	clear(t.listed)
	searched := 0
	for _, c := range calls {
		answered := len(results)
		switch {
		case t.isSearch(c) && round >= t.maxRounds():
			// The round offered no search, yet the model searched (it sees
			// its earlier searches in the conversation): it gets the one
			// round more that canContinue allows, told to finish, and that
			// round forbids every call (roundTools), as the answer says.
			t.refuseSearch(c, searchSpent)
			results = append(results, rewrite.ToolResult{CallID: c.ID, Content: fmt.Sprintf(
				"Error: this request's searches are spent (at most %d). No tool can be called now: answer in text with what you have.", t.maxRounds())})
		case t.isSearch(c) && searched >= maxSearchesPerRound:
			t.refuseSearch(c, searchTooMany)
			results = append(results, rewrite.ToolResult{CallID: c.ID, Content: fmt.Sprintf(
				"Error: too many searches in one step (at most %d); use the tools already found, or search again in your next step.", maxSearchesPerRound)})
		case t.isSearch(c):
			searched++
			found := t.search(ctx, c.Arguments)
			if round == t.maxRounds()-1 && t.withSearch(round) {
				// The next round offers no search: said before it, so the
				// model picks from what it has instead of searching into
				// the round that cannot answer it.
				found += "\nThis was the last search for this request: next, use the tools offered or answer without one."
			}
			results = append(results, rewrite.ToolResult{CallID: c.ID, Content: found})
		case t.internal(c):
			results = append(results, rewrite.ToolResult{CallID: c.ID, Content: fmt.Sprintf(
				"Error: the tool %q is not available (blocked by policy). Do not call it again; use another tool or answer without it.", c.Name)})
		default:
			last := t.st.Last
			name, ok := t.touch(c.Name)
			if !ok {
				break
			}
			if last != "" {
				t.learn(last, name)
			}
			if e := t.cat.Entity(name); e != "" {
				t.st.Focus = e
			}
		}
		if len(results) > answered {
			t.noteHidden(ctx, c, results[answered].Content)
		}
	}
	t.bound()
	return results
}

// refuseSearch counts and notes a tool_search call answered with a
// refusal, without a search (failure says why): the metrics and the
// record count every call, and a model that keeps searching past its
// bounds is what an operator needs to see.
func (t *turn) refuseSearch(c rewrite.Call, failure string) {
	t.searches++
	t.noteSearch(parseSearchArgs(c.Arguments).Query, nil, -1, failure)
}

// identify gives each call of round that came without an id one of its
// own. Some servers send calls without ids (StepFun, some Kimi hosts;
// Gemini's compatible endpoint did), and the gateway's answer to a call
// must name it: a tool message with an empty tool_call_id is refused. The
// client's own calls reach it as the upstream sent them; only the rounds
// the gateway answers carry these ids.
func identify(calls []rewrite.Call, round int) {
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = fmt.Sprintf("call_toolgate_%d_%d", round, i)
		}
	}
}

// split separates a round's calls into those the gateway answers and those
// the client gets.
func (t *turn) split(calls []rewrite.Call) (internal, real []rewrite.Call) {
	for _, c := range calls {
		if t.internal(c) {
			internal = append(internal, c)
		} else {
			real = append(real, c)
		}
	}
	return internal, real
}
