package policy

// Where gateway.scale_with_catalog starts widening, and by how much.
const (
	scaleFrom        = 120 // tools: below and at this, the configured values
	scaleSearchStep  = 30  // one more search result per this many tools above scaleFrom
	scaleSearchMax   = 8   // a scaled search limit stops here
	scaleFollowUpAt  = 150 // tools from which one more follow-up joins
	scaleFollowUpAdd = 1
)

// FollowUpFor returns how many follow-up tools join for a request whose
// client sent tools tools: gateway.follow_up, plus one from 150 tools on
// when gateway.scale_with_catalog is set. Zero stays zero (off).
func (s *Snapshot) FollowUpFor(tools int) int {
	n := s.Gateway.FollowUp
	if n > 0 && s.Gateway.ScaleWithCatalog && tools >= scaleFollowUpAt {
		n += scaleFollowUpAdd
	}
	return n
}

// SearchLimitFor returns how many tools a search returns by default for a
// request whose client sent tools tools: search.limit, plus one per 30
// tools above 120 (up to 8) when gateway.scale_with_catalog is set. A
// configured limit above 8 is kept as it is.
func (s *Snapshot) SearchLimitFor(tools int) int {
	n := s.Search.Limit
	if !s.Gateway.ScaleWithCatalog || tools <= scaleFrom || n >= scaleSearchMax {
		return n
	}
	return min(n+(tools-scaleFrom)/scaleSearchStep, scaleSearchMax)
}
