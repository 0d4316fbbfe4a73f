package proxy

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/selector"
)

// seedActive builds the active set before the first upstream call: core,
// the tool_choice target (or the tools its allowed_tools names), tools
// called in the history (the history is the truth, whatever the session
// remembers), the session's tools and, in hybrid and preselect modes, the
// tools preselected for a user turn or the follow-up tools after its first
// tool result (later results leave the array as it is: a provider's prompt
// cache serves the conversation only while the tools before it stay the
// same). A new user turn first drops the session's guesses that were
// never called.
func (t *turn) seedActive(ctx context.Context) {
	fp := t.fingerprint()
	if t.req.UserTurn && t.st.Turn != fp {
		// A new user turn: the earlier turns' guesses that were never
		// called go (a retry of the same turn keeps them).
		t.dropped = t.st.DropGuesses()
	}
	for _, name := range t.policy.Core() {
		t.join(name, reasonCore)
	}
	if t.req.ToolChoice != "" {
		t.join(t.req.ToolChoice, reasonChoice)
	}
	for _, n := range t.req.Allowed {
		t.join(n, reasonChoice)
	}
	for _, n := range t.req.Called {
		t.join(n, reasonHistory)
		if s, ok := t.policy.Own(n); ok {
			t.st.Unguess(s) // a tool the model called is no guess
		}
	}
	// Recency in the order of the latest calls (LastCalled holds every
	// called name while there are at most as many as the session keeps),
	// so the session's recent tools (which max_active evicts last) are the
	// ones the agent keeps using, and its last tool the one it called last.
	for _, n := range t.req.LastCalled {
		t.touch(n)
	}
	for _, n := range slices.Clone(t.st.Active) {
		t.join(n, reasonSession)
	}
	g := t.snap.Gateway
	if g.Mode == policy.ModeHybrid || g.Mode == policy.ModePreselect {
		t.observe(fp)
		// How many: the policy's values, widened for a large catalog
		// (gateway.scale_with_catalog).
		pre, follow := t.snap.PreselectFor(len(t.req.Tools)), t.snap.FollowUpFor(len(t.req.Tools))
		switch {
		case t.req.UserTurn && pre > 0:
			t.preselect(ctx, fp, pre, g.Mode == policy.ModePreselect && g.Explore, reasonPreselect, nil)
		case !t.req.UserTurn && len(t.req.CalledTail) > 0 && t.req.TurnSteps == 1 && follow > 0:
			// Ranked like the user turn, with the call just made feeding
			// the transition, focus and recency signals.
			t.preselect(ctx, fp, follow, false, reasonFollowUp, t.req.TurnCalled)
		}
	}
	t.bound()
}

// observe finds what the turn teaches the tenant's habits: what its latest
// step called (the tools it had not called before), by the words of the
// user's request; the turn's first step also counts the turn. accept
// teaches it once the upstream has taken the turn. A retried request (the
// same fingerprint fp) is not counted again. seedActive calls it only in
// the modes that preselect, the only ones that use what it learns.
//
// A step that called none of the catalog's tools only counts its words'
// turns, which lifts nothing: it teaches a tenant that has habits, and
// gives none to one that has not (teachesHabits).
func (t *turn) observe(fp string) {
	if t.req.UserTurn || t.req.TurnSteps == 0 || t.req.LastUser == "" || t.st.Observed == fp ||
		t.snap.Search.Weights.Habit <= 0 {
		return
	}
	var called []string
	for _, n := range t.req.TailNew {
		if name, ok := t.policy.Own(n); ok {
			called = append(called, name)
		}
	}
	text, newTurn := t.req.LastUser, t.req.TurnSteps == 1
	t.st.Observed = fp
	if len(called) == 0 && t.habits == nil {
		return
	}
	t.lesson = func(h *selector.Habits) { t.cat.Observe(h, text, called, newTurn) }
	t.teachesHabits = len(called) > 0
}

// preselect joins the n best tools for the conversation that are not
// active yet. A retry of the same turn (same catalog, policy and
// conversation) is offered the tools the first attempt was, without
// ranking again: the upstream's prompt cache keeps its prefix, and the
// active set does not grow by another n tools each time the client retries.
// fp is the turn's fingerprint, which seedActive has already taken.
func (t *turn) preselect(ctx context.Context, fp string, n int, explore bool, reason string, done []string) {
	if t.st.Turn == fp {
		for _, name := range t.st.Preselected {
			t.join(name, reason)
		}
		if t.st.Explored != "" {
			t.join(t.st.Explored, reasonExplore)
		}
		return
	}
	limit := n
	if explore {
		limit = n - 1 + exploreWidth
	}
	q := t.query("", limit)
	q.Done = done
	q.Habits = t.habits
	res, err := t.cat.Preselect(ctx, t.req.Recent, limit, q)
	if err != nil {
		t.g.logger().Log(ctx, failureLevel(ctx), "preselecting tools", "err", err)
		return
	}
	items, explored := res.Items, ""
	if reason == reasonFollowUp && res.Confidence < followUpMinConfidence {
		items = nil
	}
	if explore && len(items) > n {
		explored = items[n-1+t.exploreDraw(len(items)-(n-1))].Name
		items = items[:n-1]
	}
	picked := make([]string, 0, len(items))
	for _, it := range items {
		t.join(it.Name, reason)
		picked = append(picked, it.Name)
	}
	if explored != "" {
		t.join(explored, reasonExplore)
	}
	t.st.Turn, t.st.Preselected, t.st.Explored = fp, picked, explored
}

// fingerprint identifies a turn: the tools (in any order: the rankings
// do not depend on it, and a retry that reorders its tools is the same
// turn) and the policy generation, the conversation's length and its
// recent texts.
func (t *turn) fingerprint() string {
	h := fnv.New64a()
	h.Write([]byte(t.rulesKey))
	h.Write([]byte{0, byte(t.req.Messages), byte(t.req.Messages >> 8), byte(t.req.Messages >> 16)})
	for _, s := range t.req.Recent {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// followUpMinConfidence is the ranking confidence under which a turn's
// follow-ups are not sent. Follow-ups are ranked for what the request
// still asks once the call just made is discounted; below this the best
// candidate covers almost none of it and barely leads the rest, so the
// follow-ups are a draw from noise that rides along in every later call
// of the turn (selector/README.md, round 20, has the measurements).
const followUpMinConfidence = 0.05

// exploreWidth is how many ranks, from the last preselected slot down, the
// exploration slot draws from.
const exploreWidth = 4

// exploreDraw picks an index below n for the exploration slot. It is a hash
// of the session and the user's latest message, not a random number: a
// retried request gets the same tools (and the upstream's prompt cache its
// prefix), and each new user turn draws again.
func (t *turn) exploreDraw(n int) int {
	h := fnv.New64a()
	h.Write([]byte(t.key))
	if len(t.req.Recent) > 0 {
		h.Write([]byte(t.req.Recent[len(t.req.Recent)-1]))
	}
	return int(h.Sum64() % uint64(n))
}
