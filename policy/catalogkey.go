package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
)

// CatalogKey identifies what Catalog makes of a tools array under this
// snapshot: snapshots with one key convert every array to the same tools
// and ranking configuration. A compiled catalog (an index of every tool,
// seconds of work for a few thousand of them) keyed by it survives a
// reload that changes only what it does not read, such as core, bundles,
// hints, risk gating or the gateway's settings; keyed by Generation, every
// edit of the file compiled every catalog again on the request path.
// Like Generation it is not ordered; compare with ==.
func (s *Snapshot) CatalogKey() uint64 { return s.catalogKey }

// CatalogKeys returns the catalog keys of the snapshot and of each of its
// profiles, the snapshot's first.
func (s *Snapshot) CatalogKeys() []uint64 {
	keys := make([]uint64, 0, 1+len(s.profiles))
	keys = append(keys, s.catalogKey)
	for _, p := range s.profiles {
		keys = append(keys, p.snap.catalogKey)
	}
	return keys
}

// catalogKeyOf hashes the sections of doc that Catalog and the compiled
// catalog read: deny and allow (which tools are left out), the tools'
// enrichment, anchors, transitions, the weights and the embeddings
// provider (which turns semantic ranking off or remote). JSON encodes
// maps with sorted keys, so equal sections hash equal whatever the
// file's order. A section that cannot be encoded (no validated document
// has one) falls back to gen, a key no other snapshot shares: a catalog
// compiled again, never one served under another policy's rules.
func catalogKeyOf(doc *Document, gen uint64) uint64 {
	b, err := json.Marshal(struct {
		Deny, Allow []string
		Tools       map[string]ToolSpec
		Anchors     []AnchorSpec
		Transitions map[string]map[string]float64
		Weights     WeightsSpec
		Provider    string
	}{doc.Deny, doc.Allow, doc.Tools, doc.Anchors, doc.Transitions, doc.Search.Weights, doc.Search.Embeddings.Provider})
	if err != nil {
		return gen
	}
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:8])
}
