package selector

import (
	"context"
	"testing"
)

// preselectRank returns the 1-based rank of name in a preselection of the
// whole catalog for text, or 0 when it is not there.
func preselectRank(t *testing.T, c *Catalog, text, name string) int {
	t.Helper()
	res, err := c.Preselect(context.Background(), []string{text}, c.Len(), Query{})
	if err != nil {
		t.Fatal(err)
	}
	return position(res, name)
}

func TestDocNeighboursChangeThePreselection(t *testing.T) {
	tools := []Tool{
		{Name: "paper_lookup", Description: "Look up papers by topic."},
		// "scientific" has "research" among its word-vector neighbours.
		{Name: "study_archive", Description: "Archive of scientific studies by topic, with abstracts and authors."},
		{Name: "weather_now", Description: "Current weather for a city."},
	}
	tests := []struct {
		name, text string
		docNbr     float64
		want       int // rank of study_archive
	}{
		{"a query word only a neighbour links finds the tool", "research", 0.3, 1},
		{"without the field the same query finds nothing", "research", 0, 0},
		{"a neighbour match lifts a tool above an equal lexical match", "research topic", 0.3, 1},
		{"without it the shorter text wins the tie on topic", "research topic", 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compileTest(t, tools, Config{Weights: Weights{Lexical: 1, DocNeighbours: tt.docNbr}})
			if got := preselectRank(t, c, tt.text, "study_archive"); got != tt.want {
				t.Errorf("rank of study_archive = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDocNeighboursLeaveSearchAndKnownWordsAlone(t *testing.T) {
	tools := []Tool{
		{Name: "paper_lookup", Description: "Look up papers by topic."},
		{Name: "study_archive", Description: "Archive of scientific research studies by topic."},
	}
	c := compileTest(t, tools, Config{Weights: Weights{Lexical: 1, DocNeighbours: 0.3}})
	t.Run("a neighbour the tool's text already has is not in the field", func(t *testing.T) {
		for _, p := range c.nbr.post["research"] {
			if c.tools[p.doc].Name == "study_archive" {
				t.Error("study_archive has research in its text and in its neighbour field")
			}
		}
	})
	t.Run("search does not use the field", func(t *testing.T) {
		lq, _ := c.analyzeQuery("scientific", 1)
		if lq.nbr {
			t.Error("a search query matches the neighbour field")
		}
	})
}
