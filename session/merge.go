package session

import (
	"context"
	"slices"
)

// Merger is implemented by a store that can merge a request's state into
// what it holds, with no other write in between.
type Merger interface {
	// PutMerged stores Merge(cur, base, s, keep) under key, cur
	// being what the store holds (the zero State when there is none, or
	// it is unreadable), and renews its expiry.
	PutMerged(ctx context.Context, key string, base, s State, keep int) error
}

// Save stores s, the state a request made of base (what Get gave it when
// the request started, the zero State when it found none; see Base),
// under key; keep is how many recent tools a session keeps, as Touch's.
// A store that implements Merger gets s merged into what it holds now
// (Merge): two requests of one session at once (a subagent's,
// a retried stream's) each saved a state made of what was stored before
// either began, and the later write dropped the tools the earlier one
// had found. Any other store is written over.
func Save(ctx context.Context, st Store, key string, base, s State, keep int) error {
	if m, ok := st.(Merger); ok {
		return m.PutMerged(ctx, key, base, s, keep)
	}
	return st.Put(ctx, key, s)
}

// Base returns s as Save's base for a request that goes on to change s:
// a copy of the lists Merge reads and State's methods change in place
// (Active, Guesses); the others are shared.
func (s State) Base() State {
	s.Active = slices.Clone(s.Active)
	s.Guesses = slices.Clone(s.Guesses)
	return s
}

// Merge returns what to store when s, the state a request made of base,
// is saved over cur, which another request of the session may have saved
// since base was read. When nothing was saved in between, or the store
// holds nothing any more, that is s.
// Otherwise each request's changes count: the active tools are cur's,
// without those s dropped from base (guesses a new user turn let go,
// tools max_active evicted) and with those s added after them; the
// guesses likewise; the recent tools are cur's with those s called
// after them, at most keep (see recent); each other field is s's where
// s changed it from base, else cur's.
//
// Merge evicts nothing for max_active: what each request's own bound
// evicted it dropped from base, and only a request knows which names are
// its catalog's and which it pins (core tools, the tool_choice, its
// history's calls). So two requests of one session with different
// catalogs (an agent and its subagent) keep the tools they keep saved one
// after the other, and two of one catalog whose finds together exceed
// max_active are bounded by the next request's own bound, before its
// first round.
func Merge(cur, base, s State, keep int) State {
	if cur.Updated.Equal(base.Updated) && slices.Equal(cur.Active, base.Active) {
		return s
	}
	// The store lost the session since the load (evicted, expired, or
	// unreadable): there is no other request's change to keep, and
	// applying s's changes to nothing would keep only what s added.
	if cur.empty() {
		return s
	}
	out := s
	out.Active = changed(cur.Active, base.Active, s.Active)
	out.Guesses = changed(cur.Guesses, base.Guesses, s.Guesses)
	// A tool cur holds as called is no guess of s's making.
	out.Guesses = slices.DeleteFunc(out.Guesses, func(n string) bool {
		return !slices.Contains(base.Guesses, n) && slices.Contains(cur.Active, n) && !slices.Contains(cur.Guesses, n)
	})
	out.Recent = recent(cur.Recent, base.Recent, s.Recent, keep)
	if s.Last == base.Last {
		out.Last = cur.Last
	}
	if s.Focus == base.Focus {
		out.Focus = cur.Focus
	}
	if s.Turn == base.Turn && slices.Equal(s.Preselected, base.Preselected) && s.Explored == base.Explored {
		out.Turn, out.Preselected, out.Explored = cur.Turn, slices.Clone(cur.Preselected), cur.Explored
	}
	if s.Observed == base.Observed {
		out.Observed = cur.Observed
	}
	out.Guesses = slices.DeleteFunc(out.Guesses, func(n string) bool { return !slices.Contains(out.Active, n) })
	out.Bound(nil)
	return out
}

// changed applies to cur the changes s made to base: the names s dropped
// go, the names s added follow cur's, in s's order. It returns a new
// slice.
func changed(cur, base, s []string) []string {
	out := make([]string, 0, len(cur)+len(s))
	for _, n := range cur {
		if !slices.Contains(base, n) || slices.Contains(s, n) {
			out = append(out, n)
		}
	}
	for _, n := range s {
		if !slices.Contains(base, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// recent returns the recent tools (most recent last) of a merge: cur's,
// with those s called since base after them, in s's order, the most
// recent keep (> 0) of them, as Touch keeps. Touch moves a called name
// to the end, so s holds the names of base it did not call, in base's
// order (the oldest perhaps cut), then those it called: the longest
// start of s in base's order is what it did not call. A call of base's
// most recent tool shows no change, and moves nothing: it stays where
// cur has it. A request that called nothing leaves cur's as they are,
// and the store's last tool its most recent.
func recent(cur, base, s []string, keep int) []string {
	from, j := len(s), 0
	for i, n := range s {
		k := slices.Index(base[j:], n)
		if k < 0 {
			from = i
			break
		}
		j += k + 1
	}
	called := s[from:]
	out := make([]string, 0, len(cur)+len(called))
	for _, n := range cur {
		if !slices.Contains(called, n) {
			out = append(out, n)
		}
	}
	out = append(out, called...)
	if keep > 0 && len(out) > keep {
		out = out[len(out)-keep:]
	}
	return out
}

// empty reports whether s is the zero State, what a store merges into
// when it holds no session under the key.
func (s State) empty() bool {
	return len(s.Active) == 0 && len(s.Recent) == 0 && s.Last == "" && s.Focus == "" &&
		s.Turn == "" && len(s.Preselected) == 0 && s.Explored == "" && len(s.Guesses) == 0 &&
		s.Observed == "" && s.Updated.IsZero()
}
