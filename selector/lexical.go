package selector

import "context"

// lexScores is one query's lexical ranking: the candidates and their
// bleve BM25 scores, normalised so the best is 1 (score[i] is order[i]'s).
// The order is best first as lexical returns it; merged rankings (context,
// a multi-part request's parts) append and re-score, and rank sorts again.
type lexScores struct {
	order []int32
	score []float64
}

// merge folds other into ls: each of other's candidates gets
// combine(its score in ls, 0 if ls lacked it, its score in other); one ls
// lacked joins at the end. at is a slot per tool, all zero, and is left so
// (a search scratch's coord): where each of ls's candidates sits, without
// a map per merge.
func (ls *lexScores) merge(other lexScores, at []int32, combine func(old, v float64) float64) {
	n := len(ls.order)
	for i, d := range ls.order {
		at[d] = int32(i + 1)
	}
	for i, d := range other.order {
		if j := at[d]; j > 0 {
			ls.score[j-1] = combine(ls.score[j-1], other.score[i])
			continue
		}
		ls.order = append(ls.order, d)
		ls.score = append(ls.score, combine(0, other.score[i]))
	}
	for _, d := range ls.order[:n] {
		at[d] = 0
	}
}

// mergeLex is ls.merge(other, combine) with a pooled search scratch's
// coord, all zero between uses, as the slots.
func (c *Catalog) mergeLex(ls *lexScores, other lexScores, combine func(old, v float64) float64) {
	sc := c.scratch()
	defer c.scratchPool.Put(sc)
	ls.merge(other, sc.coord, combine)
}

// lexical retrieves the top n documents for q from the index and
// normalises their scores to 0..1.
func (c *Catalog) lexical(ctx context.Context, q *lexQuery, n int) (lexScores, error) {
	docs, scores, err := c.search(ctx, q, n)
	if err != nil {
		return lexScores{}, err
	}
	ls := lexScores{order: docs, score: scores}
	if len(docs) == 0 || scores[0] <= 0 {
		return lexScores{}, nil
	}
	top := scores[0]
	for i := range scores {
		scores[i] /= top
	}
	return ls, nil
}
