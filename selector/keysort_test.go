package selector

import (
	"cmp"
	"math"
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

// nearTies returns n scores drawn from a few values, each nudged by a few
// units in the last place or negated, so exact ties, ±0, negatives and
// scores that pack to the same key (closer than one part in 2^36) are all
// common.
func nearTies(rng *rand.Rand, n int) []float64 {
	base := []float64{0.5, 1.0 / 3, 0.25, 1e-9, 7}
	out := make([]float64, n)
	for i := range out {
		s := base[rng.IntN(len(base))]
		switch rng.IntN(6) {
		case 0:
			s = math.Nextafter(s, 1e9)
		case 1:
			s *= 1 + 1e-13
		case 2:
			s = -s
		case 3:
			s = math.Copysign(0, float64(rng.IntN(2)*2-1))
		}
		out[i] = s
	}
	return out
}

func TestSortByRankOrdersAsTheComparatorDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 60, keyedStack, keyedStack + 1, 1000} {
		t.Run(strconv.Itoa(n)+" entries with near-ties sort exactly as byRank", func(t *testing.T) {
			for trial := range 50 {
				scores := nearTies(rng, n)
				list := make([]docScore, n)
				for i, d := range rng.Perm(n) {
					list[i] = docScore{int32(d), scores[i]}
				}
				want := slices.Clone(list)
				slices.SortFunc(want, byRank)
				sortByRank(list)
				if !slices.Equal(list, want) {
					t.Fatalf("trial %d:\n got %v\nwant %v", trial, list, want)
				}
			}
		})
	}
}

func TestTopAmongBreaksNearTiesExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ n, docs int }{{1, 200}, {60, 200}, {500, topStack}, {60, topStack + 1}, {500, 2000}} {
		n := tc.n
		t.Run("the top "+strconv.Itoa(n)+" of "+strconv.Itoa(tc.docs)+" near-tied scores match a full comparator sort", func(t *testing.T) {
			for trial := range 50 {
				scores := nearTies(rng, tc.docs)
				var want []docScore
				for d, s := range scores {
					if s > 0 {
						want = append(want, docScore{int32(d), s})
					}
				}
				slices.SortFunc(want, byRank)
				want = want[:min(n, len(want))]
				got := topAmong(nil, scores, n)
				if len(got) != len(want) {
					t.Fatalf("trial %d: %d documents, want %d", trial, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i].doc {
						t.Fatalf("trial %d: #%d is %d (%v), want %d (%v)", trial, i, got[i], scores[got[i]], want[i].doc, want[i].score)
					}
				}
			}
		})
	}
}

func TestTopSetAmongKeepsTopAmongsDocuments(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct{ n, docs int }{{0, 50}, {1, 200}, {80, 60}, {80, 200}, {60, topStack + 1}} {
		t.Run("the unordered top "+strconv.Itoa(tc.n)+" of "+strconv.Itoa(tc.docs)+" near-tied scores are topAmong's", func(t *testing.T) {
			for trial := range 50 {
				scores := nearTies(rng, tc.docs)
				var docs []int32
				if trial%2 == 1 {
					docs = make([]int32, 0, tc.docs)
					for _, d := range rng.Perm(tc.docs) {
						docs = append(docs, int32(d))
					}
				}
				want := topAmong(docs, scores, tc.n)
				got := topSetAmong(docs, scores, tc.n)
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("trial %d: topSetAmong = %v, want the documents %v", trial, got, want)
				}
			}
		})
	}
}

func TestSelectSmallestPutsTheKSmallestFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 2, 13, 14, 200, 1000} {
		t.Run("a list of "+strconv.Itoa(n)+" keys splits at every k", func(t *testing.T) {
			for trial := range 20 {
				keys := make([]uint64, n)
				for i := range keys {
					keys[i] = rng.Uint64()>>uint(rng.IntN(60)) | uint64(i) // distinct, spread over magnitudes
				}
				sorted := slices.Clone(keys)
				slices.Sort(sorted)
				k := 1 + rng.IntN(n)
				got := slices.Clone(keys)
				selectSmallest(got, k)
				if got[k-1] != sorted[k-1] {
					t.Fatalf("trial %d, k %d: keys[k-1] = %d, want %d", trial, k, got[k-1], sorted[k-1])
				}
				head := slices.Clone(got[:k])
				slices.Sort(head)
				if !slices.Equal(head, sorted[:k]) {
					t.Fatalf("trial %d, k %d: the first k are not the k smallest", trial, k)
				}
			}
		})
	}
}
