package selector

import (
	"context"
	"fmt"
)

// Search ranks the catalog's tools for q. It never returns tools q.Skip
// rejects. A query without any matching term still gets the tools the
// session signals (anchors, transitions, recency) point at, with a low
// confidence. The error is non-nil only when ctx is done.
func (c *Catalog) Search(ctx context.Context, q Query) (Results, error) {
	if err := ctx.Err(); err != nil {
		return Results{}, fmt.Errorf("searching catalog: %w", err)
	}
	q.Text = clip(q.Text)
	lq, words := c.analyzeQuery(q.Text, 1)
	lex, err := c.lexicalWithParts(ctx, lq, q.Text)
	if err != nil {
		return Results{}, fmt.Errorf("searching catalog: %w", err)
	}
	if xq := c.expandWeak(lq, words, lex); xq != nil {
		xl, err := c.lexicalWithParts(ctx, xq, q.Text)
		if err != nil {
			return Results{}, fmt.Errorf("searching catalog: %w", err)
		}
		lex, lq = xl, xq
	}
	return c.rank(ctx, q, lex, lq, words), nil
}

// Preselect returns the k tools that best fit a conversation turn, for the
// proxy to add to the active set before the first upstream call. texts are
// the conversation's recent user messages, oldest first; the last one is the
// latest turn and weighs most, earlier ones add context at a lower weight.
// Session signals (focus, last tool, recency) come from q, whose Text and
// Limit are ignored.
func (c *Catalog) Preselect(ctx context.Context, texts []string, k int, q Query) (Results, error) {
	if err := ctx.Err(); err != nil {
		return Results{}, fmt.Errorf("preselecting tools: %w", err)
	}
	if len(texts) == 0 {
		return Results{}, nil
	}
	texts = clipAll(texts)
	latest := texts[len(texts)-1]
	lq, words := c.analyzeQuery(latest, 1)
	c.discountDone(lq, q.Done)
	lq.nbr = true // the document-side neighbour field: Preselect only (docexpand.go)
	lex, err := c.lexicalWithParts(ctx, lq, latest)
	if err != nil {
		return Results{}, fmt.Errorf("preselecting tools: %w", err)
	}
	if len(texts) > 1 {
		// Context: earlier turns, each half as relevant as the next one.
		cq := &lexQuery{terms: map[string]float64{}}
		w := 0.35
		for i := len(texts) - 2; i >= 0 && w > 0.05; i-- {
			cq.add(c.an.terms(texts[i]), w)
			w /= 2
		}
		ctxLex, err := c.lexical(ctx, cq, candidatePool)
		if err != nil {
			return Results{}, fmt.Errorf("preselecting tools: %w", err)
		}
		c.mergeLex(&lex, ctxLex, func(old, v float64) float64 { return old + 0.35*v })
	}
	q.Text = latest
	q.Limit = k
	return c.rank(ctx, q, lex, lq, words), nil
}

// lexicalWithParts returns the candidates' normalised lexical scores for
// the query: the whole query's, or, for a multi-part request, the best of
// the whole and each part's (so the best tool for every part reaches the
// top).
func (c *Catalog) lexicalWithParts(ctx context.Context, lq *lexQuery, text string) (lexScores, error) {
	lex, err := c.lexical(ctx, lq, candidatePool)
	if err != nil || c.w.Decompose <= 0 {
		return lex, err
	}
	for _, part := range decompose(text, decomposeMinWords) {
		pq, _ := c.analyzeQuery(part, 1)
		pl, err := c.lexical(ctx, pq, candidatePool)
		if err != nil {
			return lex, err
		}
		// A part's best tools join the whole query's at a discount, so
		// they surface without letting a stray fragment take over.
		c.mergeLex(&lex, pl, func(old, v float64) float64 { return max(old, c.w.Decompose*v) })
	}
	return lex, nil
}
