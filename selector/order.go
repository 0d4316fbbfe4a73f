package selector

import (
	"cmp"
	"slices"
)

// topDocs returns the n documents with the highest positive scores, best
// first, ties by document order (the tools' name order, canonical.go).
func topDocs(scores []float64, n int) []int32 { return topAmong(nil, scores, n) }

// sortScored orders by score, then by document so ties are deterministic:
// documents are in name order (canonical.go), so that is the order of the
// tools' names, without reading them. A tool is in the list once, so the
// order is total and an unstable sort gives the same result as a stable
// one, with fewer moves of the entries.
func sortScored(list []scored) {
	slices.SortFunc(list, func(a, b scored) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		return cmp.Compare(a.doc, b.doc)
	})
}

// topScored moves list's k best entries, in sortScored's order, to its
// front and leaves the rest in no particular order: only the top k are
// returned, and a full sort moves every entry several times. The front is
// kept sorted as the list is read once: an entry that beats the k-th takes
// its place and sinks to its own, which for a preselection's hundred
// candidates and seven picks compares about 170 times where picking the
// best of the rest k times compares 700. A long top is sorted in full.
func topScored(list []scored, k int) {
	if k >= len(list) || k > 16 {
		sortScored(list)
		return
	}
	if k <= 0 {
		return
	}
	for j := 1; j < len(list); j++ {
		i := j
		if j >= k {
			if !scoredBefore(&list[j], &list[k-1]) {
				continue
			}
			list[j], list[k-1] = list[k-1], list[j]
			i = k - 1
		}
		for ; i > 0 && scoredBefore(&list[i], &list[i-1]); i-- {
			list[i], list[i-1] = list[i-1], list[i]
		}
	}
}

// scoredBefore reports whether a ranks before b in sortScored's order.
func scoredBefore(a, b *scored) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.doc < b.doc
}

// lexLead returns the lexical winner and its margin over the runner-up
// (0 on a tie or without candidates; -1 as the winner when there is none).
func lexLead(lex lexScores) (int32, float64) {
	top, best, second := int32(-1), 0.0, 0.0
	for i, d := range lex.order {
		switch v := lex.score[i]; {
		case v > best:
			second = best
			top, best = d, v
		case v == best:
			second = v
			if d < top {
				top = d
			}
		case v > second:
			second = v
		}
	}
	if best <= 0 {
		return -1, 0
	}
	return top, 1 - second/best
}

// docScore is a document and its score in one signal.
type docScore struct {
	doc   int32
	score float64
}

// rankScored writes each document's 1-based rank by descending score (ties
// by document) into ranks, one slot per tool, and returns the documents in
// rank order: the caller zeroes their slots after use. scores[i] is
// docs[i]'s; docs are distinct.
func rankScored(docs []int32, scores []float64, ranks []int32) []int32 {
	var buf [keyedStack]docScore
	list := buf[:0]
	if len(docs) > keyedStack {
		list = make([]docScore, 0, len(docs))
	}
	// A single search's hits come ranked already: checked as they are
	// copied, they skip the sort.
	sorted := true
	for i, d := range docs {
		e := docScore{d, scores[i]}
		if i > 0 && sorted && byRank(list[i-1], e) > 0 {
			sorted = false
		}
		list = append(list, e)
	}
	if !sorted {
		sortByRank(list)
	}
	return writeRanks(list, ranks)
}

// writeRanks returns list's documents in order and writes their 1-based
// ranks into ranks.
func writeRanks(list []docScore, ranks []int32) []int32 {
	docs := make([]int32, len(list))
	for i, e := range list {
		docs[i] = e.doc
		ranks[e.doc] = int32(i + 1)
	}
	return docs
}
