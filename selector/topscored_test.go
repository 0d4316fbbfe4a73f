package selector

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// topScored must put exactly sortScored's first k entries, in order, at
// the front, whatever the ties, and keep every entry.
func TestTopScoredIsTheSortedPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		n := 1 + r.IntN(40)
		list := make([]scored, n)
		for i, d := range r.Perm(40)[:n] {
			list[i] = scored{doc: int32(d), score: float64(r.IntN(5))} // many ties
		}
		want := slices.Clone(list)
		sortScored(want)
		k := r.IntN(n + 3)
		topScored(list, k)
		for i := range min(k, n) {
			if list[i].doc != want[i].doc {
				t.Fatalf("round %d: k=%d n=%d: entry %d is tool %d, want %d", round, k, n, i, list[i].doc, want[i].doc)
			}
		}
		// rideAlong reads the whole list after the cut: nothing may be lost.
		byDoc := func(a, b scored) int { return int(a.doc - b.doc) }
		got := slices.Clone(list)
		slices.SortFunc(got, byDoc)
		slices.SortFunc(want, byDoc)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: k=%d n=%d: the list is no longer a permutation of its entries", round, k, n)
		}
	}
}
