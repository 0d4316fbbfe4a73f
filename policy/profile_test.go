package policy

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestForRequestPicksTheFirstMatchingProfile(t *testing.T) {
	const src = `
deny: ["*delete*"]
core: [base_core]
gateway: {mode: hybrid, preselect: 5}
tools:
  x: {keywords: [base], hint: base hint}
profiles:
  - name: mini
    match: {model: "gpt-4o-mini*"}
    gateway: {mode: preselect}
    deny: ["*write*"]
  - name: team-a
    match: {key: "team-*"} # labels of keys team-a-…: "team-...1234"
    core: [team_core]
    tools:
      x: {hint: team hint}
  - name: ci
    match: {header: {X-Agent: "ci-*"}, model: "gpt-*"}
    risk: {gate: off}
  - name: fallback
    match: {}
    search: {limit: 9}
`
	s := mustLoad(t, src, nil)
	hdr := func(h http.Header) func(string) []string { return h.Values }
	tests := []struct {
		name    string
		req     Request
		profile string
	}{
		{"a model glob selects its profile", Request{Model: "gpt-4o-mini-2024"}, "mini"},
		{"the first match wins over later ones", Request{Model: "gpt-4o-mini", Key: "team-...1234"}, "mini"},
		{"a key glob selects its profile", Request{Model: "gpt-4o", Key: "team-...1234"}, "team-a"},
		{"all conditions of a match must hold", Request{Model: "claude", Header: hdr(http.Header{"X-Agent": {"ci-7"}})}, "fallback"},
		{"a header glob with a model selects its profile", Request{Model: "gpt-4.1", Header: hdr(http.Header{"X-Agent": {"ci-7"}})}, "ci"},
		{"an empty match catches the rest", Request{Model: "llama"}, "fallback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.ForRequest(tt.req).Profile(); got != tt.profile {
				t.Errorf("profile %q, want %q", got, tt.profile)
			}
		})
	}

	t.Run("a profile overrides one setting and keeps the rest", func(t *testing.T) {
		p := s.ForRequest(Request{Model: "gpt-4o-mini"})
		if p.Gateway.Mode != ModePreselect || p.Gateway.Preselect != 5 || s.Gateway.Mode != ModeHybrid {
			t.Errorf("profile %+v base %+v", p.Gateway, s.Gateway)
		}
	})
	t.Run("a profile's deny adds to the base deny", func(t *testing.T) {
		p := s.ForRequest(Request{Model: "gpt-4o-mini"})
		if p.Decide("delete_x", "delete").Visible || p.Decide("write_x", "write").Visible {
			t.Error("profile deny did not add to base deny")
		}
		if !s.Decide("write_x", "write").Visible {
			t.Error("the profile's deny leaked into the base")
		}
	})
	t.Run("a profile's list replaces the base list", func(t *testing.T) {
		p := s.ForRequest(Request{Key: "team-...1234"})
		if !p.Decide("team_core", "").Core || p.Decide("base_core", "").Core {
			t.Error("core not replaced")
		}
	})
	t.Run("a profile's tool entry merges field by field", func(t *testing.T) {
		p := s.ForRequest(Request{Key: "team-...1234"})
		m, _ := p.Meta("x")
		if m.Hint != "team hint" || len(m.Keywords) != 1 || m.Keywords[0] != "base" {
			t.Errorf("profile meta %+v", m)
		}
		if bm, _ := s.Meta("x"); bm.Hint != "base hint" {
			t.Errorf("the profile wrote through into the base: %+v", bm)
		}
	})
	t.Run("profile snapshots are cached, not rebuilt per request", func(t *testing.T) {
		a := s.ForRequest(Request{Model: "llama"})
		b := s.ForRequest(Request{Model: "mistral"})
		if a != b {
			t.Error("two requests for one profile got different snapshots")
		}
		if allocs := testing.AllocsPerRun(100, func() { s.ForRequest(Request{Model: "llama", Key: "k"}) }); allocs > 2 {
			t.Errorf("ForRequest allocates %v times", allocs)
		}
	})
	t.Run("no profiles means the snapshot itself", func(t *testing.T) {
		d := Default()
		if d.ForRequest(Request{Model: "x"}) != d {
			t.Error("ForRequest without profiles returned another snapshot")
		}
	})
}

func TestAProfileKeepsTheBaseAnchorsUnlessItSetsItsOwn(t *testing.T) {
	const base = `
anchors:
  - {pattern: '(?i)screenshot', tools: ["*screenshot*"], boost: 3}
  - {pattern: '(?i)issue', tools: ["*issue*"]}
profiles:
  - match: {model: "p*"}
`
	tests := []struct {
		name    string
		profile string // the profile's settings, indented under its match
		boosts  []float64
		sameKey bool // shares the base's catalog key
	}{
		{"a profile that sets no anchors keeps the base's boosts and catalog key", "    gateway: {usage: context}\n", []float64{3, 1}, true},
		{"a profile whose anchors key has no value keeps the base's boosts", "    anchors:\n", []float64{3, 1}, true},
		{"a profile's own anchor without a boost gets the default 1", "    anchors: [{pattern: x, tools: [a]}]\n", []float64{1}, false},
		{"a profile's own anchor keeps the boost it sets", "    anchors: [{pattern: x, tools: [a], boost: 5}]\n", []float64{5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustLoad(t, base+tt.profile, nil)
			p := s.ForRequest(Request{Model: "p1"})
			var got []float64
			for _, a := range p.anchors {
				got = append(got, a.boost)
			}
			if !slices.Equal(got, tt.boosts) {
				t.Errorf("profile's anchor boosts %v, want %v", got, tt.boosts)
			}
			if s.anchors[0].boost != 3 || s.anchors[1].boost != 1 {
				t.Errorf("base anchor boosts %v and %v, want 3 and 1", s.anchors[0].boost, s.anchors[1].boost)
			}
			if same := p.CatalogKey() == s.CatalogKey(); same != tt.sameKey {
				t.Errorf("profile shares the base's catalog key: %v, want %v", same, tt.sameKey)
			}
		})
	}
}

func TestAProfilesCategoryHintsReplaceTheBasesWhicheverWayEachIsWritten(t *testing.T) {
	files := map[string]string{"hints/base.md": "base file guidance", "hints/ci.md": "ci file guidance"}
	tests := []struct {
		name, base, profile string
		want                string // the profile's hints for code
	}{
		{"a profile's hints file replaces the base's inline text", "{text: base inline guidance}", "{hints: hints/ci.md}", "ci file guidance"},
		{"a profile's inline text replaces the base's hints file", "{hints: hints/base.md}", "{text: ci inline guidance}", "ci inline guidance"},
		{"a profile's hints file replaces the base's hints file", "{hints: hints/base.md}", "{hints: hints/ci.md}", "ci file guidance"},
		{"a profile that sets only other categories keeps the base's", "{text: base inline guidance}", "", "base inline guidance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "categories:\n  code: " + tt.base + "\nprofiles:\n  - match: {model: ci-*}\n    categories:\n      web: {text: web guidance}\n"
			if tt.profile != "" {
				src += "      code: " + tt.profile + "\n"
			}
			s := mustLoad(t, src, files)
			if got := s.ForRequest(Request{Model: "ci-model"}).Hints("code"); got != tt.want {
				t.Errorf("profile's hints for code %q, want %q", got, tt.want)
			}
			if got := s.Hints("code"); !strings.HasPrefix(got, "base ") {
				t.Errorf("base's hints for code became %q", got)
			}
		})
	}
}

// TestAHeaderMatchNeedsTheHeader: a request without the header a profile
// matches on is not that profile's, whatever the pattern; one that sends
// it empty is, where the pattern matches "".
func TestAHeaderMatchNeedsTheHeader(t *testing.T) {
	s := mustLoad(t, `
profiles:
  - name: agents
    match: {header: {X-Agent: "*"}}
`, nil)
	tests := []struct {
		name   string
		header http.Header
		want   string // the profile that applies; "" for the base policy
	}{
		{"a request with the header gets the profile", http.Header{"X-Agent": {"ci-7"}}, "agents"},
		{"a request that sends the header empty gets it too", http.Header{"X-Agent": {""}}, "agents"},
		{"a request without the header does not get it", http.Header{"Other": {"x"}}, ""},
		{"a request without any header does not get it", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Model: "m"}
			if tt.header != nil {
				r.Header = tt.header.Values
			}
			if got := s.ForRequest(r).Profile(); got != tt.want {
				t.Errorf("profile %q, want %q", got, tt.want)
			}
		})
	}
}
