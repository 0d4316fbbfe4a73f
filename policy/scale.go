package policy

// How gateway.scale_with_catalog widens the configured values: from
// scaleFrom tools one more preselected tool and one more follow-up, and
// one more search result per scaleSearchStep tools above scaleFrom, up to
// scaleSearchMax.
const (
	scaleFrom       = 150
	scaleSearchStep = 30
	scaleSearchMax  = 8
)

// PreselectFor returns how many tools a user turn preselects for a
// request whose client sent tools tools: gateway.preselect, plus one from
// 150 tools on when gateway.scale_with_catalog is set. Zero stays zero.
func (s *Snapshot) PreselectFor(tools int) int { return s.plusOne(s.Gateway.Preselect, tools) }

// FollowUpFor returns how many follow-up tools join for a request whose
// client sent tools tools: gateway.follow_up, plus one from 150 tools on
// when gateway.scale_with_catalog is set. Zero stays zero (off).
func (s *Snapshot) FollowUpFor(tools int) int { return s.plusOne(s.Gateway.FollowUp, tools) }

func (s *Snapshot) plusOne(n, tools int) int {
	if n > 0 && s.Gateway.ScaleWithCatalog && tools >= scaleFrom {
		return n + 1
	}
	return n
}

// SearchLimitFor returns how many tools a search returns by default for a
// request whose client sent tools tools: search.limit, plus one per 30
// tools above 150 (up to 8) when gateway.scale_with_catalog is set. A
// configured limit of 8 or more is kept as it is.
func (s *Snapshot) SearchLimitFor(tools int) int {
	n := s.Search.Limit
	if !s.Gateway.ScaleWithCatalog || tools <= scaleFrom || n >= scaleSearchMax {
		return n
	}
	return min(n+(tools-scaleFrom)/scaleSearchStep, scaleSearchMax)
}
