package selector

import "testing"

func TestNeighbourExpansionBridgesAVocabularyGap(t *testing.T) {
	tools := []Tool{
		{Name: "paper_lookup", Description: "Search research papers by topic."},
		{Name: "weather_now", Description: "Current weather for a city."},
		{Name: "stock_quote", Description: "Latest stock price of a ticker."},
	}
	lexOnly := Config{Weights: Weights{Lexical: 1}}
	// A request whose only link to the research tool is a word-vector
	// neighbour: the lexical winner is weak, so the query is expanded.
	q := Query{Text: "looking for scientific studies about ocean tides near coastal towns"}
	tests := []struct {
		name      string
		expand    bool
		wantFound bool
	}{
		{"with expansion a scientific query finds the research tool", true, true},
		{"without expansion the research tool is not found", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compileTest(t, tools, lexOnly)
			if !tt.expand {
				c.nbs = nil
			}
			if got := rankOf(t, c, q, "paper_lookup"); (got > 0) != tt.wantFound {
				t.Errorf("rank of paper_lookup = %d, want found = %v", got, tt.wantFound)
			}
		})
	}
}

func TestExpansionLeavesFrequentWordsAndKnownTermsAlone(t *testing.T) {
	c := compileTest(t, []Tool{
		{Name: "get_thing", Description: "Get come able research"},
	}, Config{})
	tests := []struct {
		name  string
		words []string
		have  map[string]float64
		want  int
	}{
		{"a function word like get adds nothing", []string{"get"}, nil, 0},
		{"a content word adds its neighbour", []string{"scientific"}, nil, 1},
		{"a neighbour the query already has is not added again", []string{"scientific"}, map[string]float64{"research": 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.expansion(tt.words, tt.have); len(got) != tt.want {
				t.Errorf("expansion(%v) = %v, want %d terms", tt.words, got, tt.want)
			}
		})
	}
}

func TestNeighbourTableRejectsDamagedData(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"a wrong header is an error", []byte("XXXXX\x01\x00\x00\x00\x01abc")},
		{"a truncated body is an error", []byte("TGNB1\x02\x00\x00\x00\x01abc")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseNeighbours(tt.data); err == nil {
				t.Error("parseNeighbours succeeded, want an error")
			}
		})
	}
	t.Run("the embedded table parses", func(t *testing.T) {
		if _, err := loadNeighbours(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestExpansionIsGatedByTheLexicalWinnersWeakness(t *testing.T) {
	tools := []Tool{
		{Name: "paper_lookup", Description: "Search research papers by topic."},
		{Name: "unit_converter", Description: "Convert scientific units."},
		{Name: "weather_now", Description: "Current weather for a city."},
	}
	lexOnly := Config{Weights: Weights{Lexical: 1}}
	c := compileTest(t, tools, lexOnly)
	tests := []struct {
		name   string
		text   string
		expand bool
	}{
		{"a query a tool fully covers is not expanded", "scientific units", false},
		{"a short query no tool fully covers is expanded", "scientific topic", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lq, words := c.analyzeQuery(tt.text, 1)
			lex, err := c.lexical(t.Context(), lq, candidatePool)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.expandWeak(lq, words, lex) != nil; got != tt.expand {
				t.Errorf("expanded = %v, want %v", got, tt.expand)
			}
		})
	}
	// Two words, one each in two tools: expansion ("scientific" ->
	// "research") breaks the tie for the research tool.
	q := Query{Text: "scientific topic"}
	plain := compileTest(t, tools, lexOnly)
	plain.nbs = nil
	if got, was := rankOf(t, c, q, "paper_lookup"), rankOf(t, plain, q, "paper_lookup"); got != 1 || was == 1 {
		t.Errorf("paper_lookup rank %d with expansion, %d without; want 1 and not 1", got, was)
	}
}
