package selector

import "context"

// lexScores is one query's lexical ranking: bleve's BM25 scores of the
// candidates, normalised so the best is 1, and their order.
type lexScores struct {
	order []int32
	score map[int32]float64
}

// lexical retrieves the top n documents for q from the index and
// normalises their scores to 0..1.
func (c *Catalog) lexical(ctx context.Context, q *lexQuery, n int) (lexScores, error) {
	docs, scores, err := c.search(ctx, q, n)
	if err != nil {
		return lexScores{}, err
	}
	ls := lexScores{order: docs, score: make(map[int32]float64, len(docs))}
	if len(docs) == 0 || scores[0] <= 0 {
		return ls, nil
	}
	for i, d := range docs {
		ls.score[d] = scores[i] / scores[0]
	}
	return ls, nil
}
