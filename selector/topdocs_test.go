package selector

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// TestTopAmongIsTheHeadOfAFullSort checks the heap selection against the
// obvious answer: every document with a positive score, sorted by score
// then document, cut at n. Scores come from a few values so ties are
// common, the case where an order that is not total would show.
func TestTopAmongIsTheHeadOfAFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	want := func(docs []int32, scores []float64, n int) []int32 {
		var all []int32
		if docs == nil {
			for d := range scores {
				all = append(all, int32(d))
			}
		} else {
			all = slices.Clone(docs)
		}
		all = slices.DeleteFunc(all, func(d int32) bool { return scores[d] <= 0 })
		slices.SortFunc(all, func(a, b int32) int {
			if scores[a] != scores[b] {
				return cmp.Compare(scores[b], scores[a])
			}
			return cmp.Compare(a, b)
		})
		return all[:min(n, len(all))]
	}
	for _, size := range []int{0, 1, 7, 200, 2000} {
		for _, n := range []int{0, 1, 5, 60, 3000} {
			name := strconv.Itoa(n) + " of " + strconv.Itoa(size) + " documents come out in full-sort order"
			t.Run(name, func(t *testing.T) {
				for trial := range 20 {
					scores := make([]float64, size)
					for i := range scores {
						scores[i] = float64(rng.IntN(9)-2) / 4 // ties, zeros, negatives
					}
					var docs []int32
					if trial%2 == 1 { // a shuffled subset, as the lexical hits come
						for d := range size {
							if rng.IntN(3) > 0 {
								docs = append(docs, int32(d))
							}
						}
						rng.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
					}
					got, exp := topAmong(docs, scores, n), want(docs, scores, n)
					if !slices.Equal(got, exp) {
						t.Fatalf("trial %d: topAmong = %v, want %v", trial, got, exp)
					}
				}
			})
		}
	}
}
