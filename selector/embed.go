package selector

import (
	"context"
	"log/slog"
)

// Embedder turns texts into vectors, e.g. an OpenAI-compatible
// /v1/embeddings endpoint. Implementations must be safe for concurrent use
// and honour ctx; an error makes the selector fall back to lexical ranking.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Model names the embedding model; it keys caches.
	Model() string
}

// startRemote computes the tool vectors with e in the background, so a
// search never waits on a cold catalog; until they arrive, and whenever the
// query cannot be embedded, the search is lexical.
func (c *Catalog) startRemote(ctx context.Context, e Embedder) *semantic {
	s := &semantic{}
	texts := make([]string, len(c.tools))
	for i := range c.tools {
		texts[i], _ = toolText(&c.tools[i])
	}
	s.query = func(ctx context.Context, text string, _ []string) []float32 {
		v, err := e.Embed(ctx, []string{text})
		if err != nil || len(v) != 1 {
			slog.Debug("embedding query failed; lexical only", "err", err)
			return nil
		}
		return normalize(append([]float32(nil), v[0]...))
	}
	bg := context.WithoutCancel(ctx)
	go func() {
		vecs, err := e.Embed(bg, texts)
		if err != nil || len(vecs) != len(texts) {
			slog.Warn("embedding catalog failed; lexical only", "tools", len(texts), "err", err)
			return
		}
		for i := range vecs {
			vecs[i] = normalize(append([]float32(nil), vecs[i]...))
		}
		s.vecs.Store(&vecs)
	}()
	return s
}
