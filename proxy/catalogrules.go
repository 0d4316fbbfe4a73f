package proxy

import (
	"strings"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// catalogRules is the policy for one compiled catalog: its decisions table
// and, for each write intent, which of the catalog's tools a search may
// return, by the compiled catalog's positions. A search asks about every
// candidate; by position that is a read of a few hundred bytes, where the
// name costs two hashes and map probes, cache misses each once the catalog
// has gone cold between requests.
type catalogRules struct {
	table *policy.Table
	shown [2][]bool // [0] without write intent, [1] with it
}

// tablesBytes bounds what each of the policy table caches holds: 256
// catalogs of 200 tools hold some 8 MB; arrays of thousands of tools with
// long names reach the bound first.
const tablesBytes = 64 << 20

// namesBytes estimates what a table of names holds: each name and some
// hundred bytes of decisions, positions and map slots.
func namesBytes(names []string) int {
	n := 0
	for _, s := range names {
		n += len(s) + 128
	}
	return n
}

// decisions returns the policy's decisions for a catalog, made once per
// tool set and policy generation (setKey): agents resend the same catalog
// every turn, and deciding 200 tools against every pattern again was a
// tenth of a new turn's CPU. The table of each order of the set, and
// what the catalog's positions show, are laid out from it once per
// order (orderKey, the array's text and the generation): the positions
// are the request's own. cat is the catalog compiled for those tools
// under snap, in the request's order.
func (g *Gateway) decisions(orderKey, setKey string, snap *policy.Snapshot, tools []rewrite.Tool, cat *selector.Catalog) *catalogRules {
	if r, ok := g.tables.Get(orderKey); ok {
		return r
	}
	names := make([]string, len(tools))
	for i := range tools {
		names[i] = tools[i].Name
	}
	var table *policy.Table
	if set, ok := g.tableSets.Get(setKey); ok {
		table, _ = set.InOrder(names) // nil when the key collided
	}
	if table == nil {
		for i := range names {
			names[i] = strings.Clone(names[i]) // the table outlives the body names may alias
		}
		table = snap.Table(names)
		g.tableSets.Add(setKey, table, namesBytes(names))
	}
	r := &catalogRules{table: table}
	catNames := cat.Names() // a copy each call
	for k, intent := range []bool{false, true} {
		r.shown[k] = make([]bool, len(catNames))
		for p, name := range catNames {
			r.shown[k][p] = r.table.Shown(name, intent)
		}
	}
	g.tables.Add(orderKey, r, namesBytes(names))
	return r
}

// shownFor returns the positions shown to the bound message.
func (r *catalogRules) shownFor(b policy.Bound) []bool {
	if b.Intent() {
		return r.shown[1]
	}
	return r.shown[0]
}
