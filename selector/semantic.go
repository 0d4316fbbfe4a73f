package selector

import "context"

// semantic holds a catalog's tool embeddings and scores queries against
// them. It is filled in by initSemantic.
type semantic struct{}

func (c *Catalog) initSemantic(ctx context.Context) error { return nil }

func (s *semantic) scores(ctx context.Context, c *Catalog, text string, n int) map[int32]float64 {
	return nil
}
