package proxy

import (
	"strings"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
)

// decisions returns the policy's decisions for a catalog, made once per
// catalog key (the tools array and the policy generation): agents resend
// the same catalog every turn, and deciding 200 tools against every
// pattern again was a tenth of a new turn's CPU.
func (g *Gateway) decisions(catKey string, snap *policy.Snapshot, tools []rewrite.Tool) *policy.Table {
	if t, ok := g.tables.Get(catKey); ok {
		return t
	}
	names := make([]string, len(tools))
	for i := range tools {
		names[i] = strings.Clone(tools[i].Name) // the table outlives the body names may alias
	}
	t := snap.Table(names)
	g.tables.Add(catKey, t)
	return t
}
