package selector

import (
	"cmp"
	"math"
	"slices"
)

// Ranking sorts lists of (document, score) by descending score, ties by
// ascending document (byRank; documents are in the tools' name order,
// canonical.go, so no tie depends on the client's order), several times
// per request: each signal's pool, the lexical hits, max-sim's rescored
// pool. Through a comparison function pdqsort pays a call and two loads
// per comparison; packed into one uint64 per entry (the score's order in
// the high bits, the entry's position in the low ones) the same sort
// compares integers. The key
// keeps the score's top 48 bits, so scores within about one part in 2^36
// of each other may pack equal: such runs, and exact ties, are sorted
// again by byRank, so the order is byRank's exactly.
const (
	keyPosBits = 16
	keyPosMask = 1<<keyPosBits - 1
	// maxKeyed is the longest list sorted by keys; longer ones (catalogs
	// of more than 65,536 tools) use byRank directly.
	maxKeyed = 1 << keyPosBits
	// keyedStack is the list length whose keys (and, for sortByRank, a
	// copy of the list) fit on the stack.
	keyedStack = 128
	// topStack is the longest list topAmong sorts whole, by keys on the
	// stack; past it a heap keeps only the best n.
	topStack = 256
)

// descKey maps a score to a uint64 that sorts ascending as the score sorts
// descending: positive scores before negative ones, the larger first.
// Scores are never NaN; -0 counts as 0, as the float comparison has it.
func descKey(s float64) uint64 {
	if s == 0 {
		s = 0 // -0 and 0 compare equal, so they must key alike
	}
	b := math.Float64bits(s)
	if b>>63 != 0 {
		return b // negative: the larger the magnitude, the later
	}
	return ^b &^ (1 << 63)
}

// sortByRank sorts list as slices.SortFunc(list, byRank) does.
func sortByRank(list []docScore) {
	n := len(list)
	if n < 2 {
		return
	}
	if n > maxKeyed {
		slices.SortFunc(list, byRank)
		return
	}
	var keyBuf [keyedStack]uint64
	var origBuf [keyedStack]docScore
	keys, orig := keyBuf[:0], origBuf[:0]
	if n > keyedStack {
		keys, orig = make([]uint64, 0, n), make([]docScore, 0, n)
	}
	orig = append(orig, list...)
	for i, e := range list {
		keys = append(keys, descKey(e.score)&^keyPosMask|uint64(i))
	}
	slices.Sort(keys)
	for i, k := range keys {
		list[i] = orig[k&keyPosMask]
	}
	for i := 0; i < n; {
		j := i + 1
		for j < n && keys[j]>>keyPosBits == keys[i]>>keyPosBits {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(list[i:j], byRank)
		}
		i = j
	}
}

// topAmong returns the n documents among docs (nil: every document) with
// the highest positive scores, best first, ties by document. docs may come
// in any order.
func topAmong(docs []int32, scores []float64, n int) []int32 {
	return topKeyed(docs, scores, n, true)
}

// topSetAmong returns the documents topAmong does, in no particular order,
// for callers that re-rank them anyway: only the cut is exact, which spares
// sorting the ones kept.
func topSetAmong(docs []int32, scores []float64, n int) []int32 {
	return topKeyed(docs, scores, n, false)
}

// topKeyed is topAmong, sorted or not.
func topKeyed(docs []int32, scores []float64, n int, sorted bool) []int32 {
	count := len(docs)
	if docs == nil {
		count = len(scores)
	}
	if count > topStack || len(scores) > maxKeyed {
		return topByHeap(docs, scores, n)
	}
	var keyBuf [topStack]uint64
	keys := keyBuf[:0]
	for i := range count {
		d := int32(i)
		if docs != nil {
			d = docs[i]
		}
		if s := scores[d]; s > 0 {
			// The document is the key's low bits: scores[d] breaks
			// near-ties below.
			keys = append(keys, descKey(s)&^keyPosMask|uint64(d))
		}
	}
	m := max(min(n, len(keys)), 0)
	if m == 0 {
		return []int32{}
	}
	if m < len(keys) {
		// Only the best m need an order: select them, then sort those.
		// One past the cut packing equal to the m-th (a near-tie across
		// the cut) needs the exact order over both: sort everything.
		selectSmallest(keys, m)
		cut, whole := keys[m-1]>>keyPosBits, false
		for _, k := range keys[m:] {
			whole = whole || k>>keyPosBits == cut
		}
		switch {
		case whole:
			slices.Sort(keys)
		case sorted:
			slices.Sort(keys[:m])
		default:
			return keyDocs(keys[:m])
		}
	} else if sorted {
		slices.Sort(keys)
	} else {
		return keyDocs(keys)
	}
	for i := 0; i < m; {
		j := i + 1
		for j < len(keys) && keys[j]>>keyPosBits == keys[i]>>keyPosBits {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], func(a, b uint64) int {
				return byRank(docScore{int32(a & keyPosMask), scores[a&keyPosMask]}, docScore{int32(b & keyPosMask), scores[b&keyPosMask]})
			})
		}
		i = j
	}
	return keyDocs(keys[:m])
}

// keyDocs returns the documents in the low bits of keys, in their order.
func keyDocs(keys []uint64) []int32 {
	out := make([]int32, len(keys))
	for i, k := range keys {
		out[i] = int32(k & keyPosMask)
	}
	return out
}

// selectSmallest reorders keys (distinct) so that keys[:k] are the k
// smallest and keys[k-1] the largest of them (quickselect, median-of-three
// pivots): O(N) where a full sort is O(N log N), and sorting is most of
// what ranking a signal's pool costs.
func selectSmallest(keys []uint64, k int) {
	lo, hi := 0, len(keys)-1
	for hi-lo > 12 {
		mid := lo + (hi-lo)/2
		if keys[mid] < keys[lo] {
			keys[mid], keys[lo] = keys[lo], keys[mid]
		}
		if keys[hi] < keys[lo] {
			keys[hi], keys[lo] = keys[lo], keys[hi]
		}
		if keys[hi] < keys[mid] {
			keys[hi], keys[mid] = keys[mid], keys[hi]
		}
		p := keys[mid]
		i, j := lo, hi
		for i <= j {
			for keys[i] < p {
				i++
			}
			for keys[j] > p {
				j--
			}
			if i <= j {
				keys[i], keys[j] = keys[j], keys[i]
				i++
				j--
			}
		}
		// keys[lo..j] ≤ p ≤ keys[i..hi], and keys[j+1..i-1] == p.
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
	slices.Sort(keys[lo : hi+1])
}

// topByHeap is topAmong for long lists: a size-n min-heap costs O(N log
// n) where sorting every key costs O(N log N).
func topByHeap(docs []int32, scores []float64, n int) []int32 {
	h := make([]int32, 0, n)
	less := func(a, b int32) bool { // a ranks below b
		if scores[a] != scores[b] {
			return scores[a] < scores[b]
		}
		return a > b
	}
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && less(h[r], h[l]) {
				m = r
			}
			if !less(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	count := len(docs)
	if docs == nil {
		count = len(scores)
	}
	for i := range count {
		d := int32(i)
		if docs != nil {
			d = docs[i]
		}
		if scores[d] <= 0 {
			continue
		}
		if len(h) < n {
			h = append(h, d)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !less(h[i], h[p]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if n > 0 && less(h[0], d) {
			h[0] = d
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b int32) int {
		switch {
		case less(b, a):
			return -1
		case less(a, b):
			return 1
		}
		return 0
	})
	return h
}

// byRank orders by descending score, ties by document: a total order.
func byRank(a, b docScore) int {
	if a.score != b.score {
		return cmp.Compare(b.score, a.score)
	}
	return cmp.Compare(a.doc, b.doc)
}

// grow returns buf resliced to n, reallocated when its capacity is short;
// what it holds is undefined.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n, n+n/4)
	}
	return buf[:n]
}
