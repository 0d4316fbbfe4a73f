package selector

import (
	"slices"
	"testing"
)

func TestSplitCompound(t *testing.T) {
	wv, err := DefaultWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		word string
		want []string
	}{
		{"socialsearch", []string{"social", "search"}},
		{"portfoliopilot", []string{"portfolio", "pilot"}},
		{"search", nil},     // a word itself
		{"chatai", nil},     // too short
		{"xqzvbnmlkj", nil}, // no cover
	}
	for _, tt := range tests {
		if got := splitCompound(tt.word, wv.index); !slices.Equal(got, tt.want) {
			t.Errorf("splitCompound(%q) = %v, want %v", tt.word, got, tt.want)
		}
	}
}

func TestCompoundNameSplittingChangesARanking(t *testing.T) {
	tools := []Tool{
		{Name: "portfoliopilot", Description: "Your AI investing guide."},
		{Name: "fund_news", Description: "Headlines about a portfolio manager or a pilot program."},
		{Name: "weather_now", Description: "Current weather for a city."},
	}
	// Unsplit, the run-together name has no term of the query: the tool
	// that mentions both words in passing would win.
	an, err := newAnalyzer()
	if err != nil {
		t.Fatal(err)
	}
	wv, err := DefaultWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		wv   *WordVectors
		want bool
	}{{nil, false}, {wv, true}} {
		_, f := toolDocument(0, &tools[0], an, tt.wv)
		if got := f.all.tf["portfolio"] > 0 && f.all.tf["pilot"] > 0; got != tt.want {
			t.Errorf("split=%v: name has the pieces = %v", tt.wv != nil, got)
		}
	}
	c := compileTest(t, tools, Config{Weights: Weights{Lexical: 1}})
	res, err := c.Search(t.Context(), Query{Text: "portfolio pilot"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) < 2 || res.Items[0].Name != "portfoliopilot" {
		t.Errorf("top = %v, want portfoliopilot first", res.Items)
	}
}
