package proxy

import (
	"slices"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// query builds a selector query that skips what is hidden or already
// active; a search query (text not "") skips only what an earlier search
// of the turn returned (see skipped).
func (t *turn) query(text string, limit int) selector.Query {
	return selector.Query{
		Text:    text,
		Limit:   limit,
		Skip:    t.skipped(text != ""),
		Focus:   t.st.Focus,
		Last:    t.st.Last,
		Recent:  t.st.Recent,
		Learned: t.learned,

		EmbedBudget: t.embedWait,
	}
}

// skipped returns what a ranking must not return, by catalog position:
// the tools the policy hides from this message, and those already active.
// A search ranks the active tools too, but for what an earlier search of
// the turn returned (the model has it in hand, and a repeated query's
// next batch must not bring it back): it may return a guess again (see
// searchable), and says which tools it found are already in the model's
// list (see newUpTo). It is a snapshot: callers rank right away.
func (t *turn) skipped(search bool) func(int) bool {
	skip := make([]bool, len(t.shown))
	for p, shown := range t.shown {
		skip[p] = !shown
	}
	for name, reason := range t.reasons {
		if reason == "" || search && !t.searched[name] {
			continue
		}
		if p, ok := t.cat.Position(name); ok {
			skip[p] = true
		}
	}
	return func(p int) bool { return skip[p] }
}

// kept reports whether a tool with this reason is offered in every round:
// the policy's core tools, the tool_choice target and the tools the
// conversation has called. The rest (preselected, follow-up, discovered,
// the session's) are guesses.
func kept(reason string) bool {
	return reason == reasonCore || reason == reasonChoice || reason == reasonHistory
}

// offered reports whether the next round's tools include the active tool
// name. A round that answers the model's searches offers the tools they
// found and the kept ones, not the turn's other guesses: the model has just
// said, by searching, that none of them fits the step at hand, and each
// one costs its tokens in every round it rides along. They are still
// active and come back with the client's next request, when the next step
// may need them (selector/README.md, round 18, has the measurements).
// What any search of the turn found stays offered for the rest of it: its
// answer told the model the tools were in its list, and a second search
// (for the task's next step, or one that finds nothing) does not take
// back the first's. But a search that asks again at once what the one
// before it asked does: its earlier finds did not do (passed), and
// offering each batch on top of the next would make every repeat cost
// more than the last.
func (t *turn) offered(name string) bool {
	if t.allShown {
		return t.isVisible(name)
	}
	if !t.isActive(name) {
		return false
	}
	if t.chosenOnly() {
		// The rest stay active: the preselection's guesses, made as on
		// any user turn, are for the client's next request, which a
		// forced first step leaves free to call them.
		return t.chosen(name)
	}
	if len(t.found) == 0 && len(t.searched) == 0 || !t.trimsSearchRounds() {
		return true
	}
	return t.found[name] || kept(t.reasons[name]) || t.searched[name] && !t.passed[name]
}

// searchable reports whether a search may return the tool name: one not
// active yet, or, where a search round offers only what it finds, a guess
// (see search). Never a kept tool, which every round offers, nor one an
// earlier search of this turn returned, which the model had in hand when
// it searched again.
func (t *turn) searchable(name string) bool {
	reason := t.reasons[name]
	return reason == "" || t.trimsSearchRounds() && !kept(reason) && !t.searched[name]
}

// trimsSearchRounds reports whether a round answering a search offers only
// what it found (gateway.search_round: found, the default).
func (t *turn) trimsSearchRounds() bool { return t.snap.Gateway.SearchRound != policy.SearchRoundAll }

// bound keeps the active set within max_active. Tools from earlier turns
// go first: those not used recently, oldest first, then the least recently
// used; then this turn's own picks (preselected, follow-up, explored,
// discovered) that no search returned, oldest first; then what the turn's
// earlier searches returned, oldest first; what the round's searches just
// found or named as held goes last, its lowest ranked first, for the
// round that answers them offers it and its results told the model so.
// Pinned tools stay. A
// search's find that goes may be found again (see searchable).
func (t *turn) bound() {
	max := t.snap.Gateway.MaxActive
	if max <= 0 {
		return
	}
	excess := t.count() - max
	if excess <= 0 {
		return
	}
	evictable := func(n string) bool { return !t.pinned[n] && t.isActive(n) }
	// This turn's own picks answer the request at hand: they go last.
	earlier := func(n string) bool {
		switch t.reasons[n] {
		case reasonPreselect, reasonExplore, reasonFollowUp, reasonDiscovered:
			return false
		}
		return true
	}
	victims := make([]string, 0, excess)
	take := func(names []string, ok func(string) bool) {
		for _, n := range names {
			if len(victims) < excess && evictable(n) && ok(n) && !slices.Contains(victims, n) {
				victims = append(victims, n)
			}
		}
	}
	justFound := func(n string) bool { return t.found[n] || t.listed[n] }
	take(t.st.Active, func(n string) bool { return earlier(n) && !justFound(n) && !slices.Contains(t.st.Recent, n) })
	take(t.st.Recent, func(n string) bool { return earlier(n) && !justFound(n) })
	take(t.st.Active, func(n string) bool { return !justFound(n) && !t.searched[n] })
	take(t.st.Active, func(n string) bool { return !justFound(n) })
	newestFirst := slices.Clone(t.st.Active) // found tools joined in rank order
	slices.Reverse(newestFirst)
	take(newestFirst, func(string) bool { return true })
	for _, n := range victims {
		delete(t.reasons, n)
		delete(t.searched, n)
		delete(t.passed, n)
	}
	t.st.Remove(victims)
}

// room is how many tools a search may still add this round and keep:
// max_active less the pinned tools and what the round's searches found or
// named as held (see bound), 0 when those fill it or more (core tools
// alone may), or -1 when there is no bound.
func (t *turn) room() int {
	limit := t.snap.Gateway.MaxActive
	if limit <= 0 {
		return -1
	}
	kept := len(t.pinned) + len(t.found)
	for name := range t.listed {
		if !t.pinned[name] && !t.found[name] {
			kept++
		}
	}
	return max(limit-kept, 0)
}

func (t *turn) count() int {
	n := 0
	for _, name := range t.st.Active {
		if t.isActive(name) {
			n++
		}
	}
	return n
}

// tools returns the upstream tools array: tool_search first (unless
// withSearch is false), then the offered tools in the order they joined,
// or, in a turn that offers every tool (allShown), in the client's order;
// pos holds each item's position in the client's tools (-1 for
// tool_search), by which the round's tokens are counted.
func (t *turn) tools(withSearch bool) (raws []string, pos []int) {
	if t.allShown {
		for i, tool := range t.req.Tools {
			if t.isVisible(tool.Name) {
				raws, pos = append(raws, tool.Raw), append(pos, i)
			}
		}
		return raws, pos
	}
	raws = make([]string, 0, len(t.st.Active)+1)
	pos = make([]int, 0, len(t.st.Active)+1)
	if withSearch {
		raws, pos = append(raws, t.searchDef), append(pos, -1)
	}
	for _, n := range t.st.Active {
		if i, ok := t.policy.Position(n); ok && t.offered(n) {
			raws, pos = append(raws, t.req.Tools[i].Raw), append(pos, i)
		}
	}
	return raws, pos
}

// activeNames lists the active tools in upstream order.
func (t *turn) activeNames() []string {
	var out []string
	for _, n := range t.st.Active {
		if t.isActive(n) {
			out = append(out, n)
		}
	}
	return out
}

// roundTools returns the tools array of the turn's next upstream call and
// notes its size and tokens (noteRound). A round that offers no
// tool_search and would offer no tool at all, while the conversation holds
// the gateway's calls and their results, keeps tool_search's definition
// and forbids every call (rewrite.Request.NoCalls): an upstream refuses
// tool calls and results in a request without tools (Anthropic's 400 "must
// define tools"). A model that calls tool_search there anyway is answered
// as in any round without it (searches spent), and the round after that
// answer, the last the turn may take, forbids every call too: a model that
// searched where no search was offered searches again, and that call, the
// gateway's, would leave the client an empty message.
func (t *turn) roundTools(round int) []string {
	search := t.withSearch(round)
	tools, pos := t.tools(search)
	none := len(tools) == 0 && len(t.req.Pinned) == 0
	t.req.NoCalls = !search && none && (len(t.rounds) > 0 || len(t.req.PendingOutputs) > 0) ||
		round > t.maxRounds() && t.searchedIn(len(t.rounds)-1)
	if t.req.NoCalls && none {
		tools, pos = t.tools(true)
	}
	t.noteRound(tools, pos)
	return tools
}

// searchedIn reports whether the gateway's round i called the search tool.
func (t *turn) searchedIn(i int) bool {
	if i < 0 || i >= len(t.rounds) {
		return false
	}
	return slices.ContainsFunc(t.rounds[i].Calls, func(c rewrite.Call) bool { return c.Name == t.searchName })
}
