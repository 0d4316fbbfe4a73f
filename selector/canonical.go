package selector

import (
	"cmp"
	"slices"
	"strings"
)

// A catalog is compiled in a canonical order, its tools sorted by name,
// whatever order the client sent them in, so that no ranking depends on
// that order. Some MCP clients build their tools array from map
// iteration, a new order every turn: a ranking that followed it changed
// the preselection, and with it the upstream's prompt-cache prefix, from
// turn to turn for nothing (with the bundled catalog reversed, 4 of 5
// queries got another top 8).
//
// The order reached the rankings through the document index, which breaks
// every tie between documents: BM25's candidate cuts, the per-signal
// ranks that reciprocal rank fusion turns into scores (two tied tools get
// ranks r and r+1, worth different amounts), the semantic and max-sim
// pools, the lexical winner's lead. It also reached float sums over the
// documents (the semantic vectors' common direction), which can differ
// in the last bit when added in another order. Compiling in name order
// makes the document index itself canonical, so each of those, and any
// added later, is order-free by construction, at no cost per comparison;
// a tie between two tools now goes to the one whose name sorts first,
// which the final sort by score did already.
//
// Names are unique within a catalog (Compile rejects a duplicate), so
// the order is total. The client's positions are kept (Catalog.pos) for
// the API that speaks in them: Names, Position and Query.Skip. Since
// nothing else depends on the order, the same tools in another order
// need no compile of their own: InOrder (orders.go) gives the compiled
// catalog another order's positions.

// canonicalOrder returns a copy of tools sorted by name and, for each
// tool of the copy, its position in tools. tools is not modified: the
// caller may still use it in its own order.
func canonicalOrder(tools []Tool) ([]Tool, []int32) {
	pos := make([]int32, len(tools))
	for i := range pos {
		pos[i] = int32(i)
	}
	// Sorting the positions and permuting once moves 4 bytes per swap
	// where sorting the tools would move their whole structs.
	slices.SortFunc(pos, func(a, b int32) int {
		if c := strings.Compare(tools[a].Name, tools[b].Name); c != 0 {
			return c
		}
		return cmp.Compare(a, b) // duplicates, which Compile rejects: still total
	})
	sorted := make([]Tool, len(tools))
	for d, p := range pos {
		sorted[d] = tools[p]
	}
	return sorted, pos
}
