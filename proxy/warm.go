package proxy

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/selector"
)

// Warm loads what the first rewritten request would otherwise wait for:
// the selector's embedded tables (selector.Warm) and the o200k encoding
// every token count starts with. A server calls it before it listens, so
// /healthz answers 200 once a request no longer pays for loading them.
func (g *Gateway) Warm(ctx context.Context) error {
	g.init()
	if err := selector.Warm(ctx); err != nil {
		return err
	}
	if _, err := g.tokens.codec(encO200k); err != nil {
		return fmt.Errorf("loading the %s encoding: %w", encO200k, err)
	}
	return nil
}
