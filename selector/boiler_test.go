package selector

import "testing"

func TestRequestBoilerplateDoesNotPickTheTool(t *testing.T) {
	tools := []Tool{
		{Name: "help_center", Description: "Help articles: how to use the tool, what you can do and need."},
		{Name: "currency_convert", Description: "Convert an amount between currencies."},
	}
	q := Query{Text: "please help, I need a tool that can convert currencies"}
	tests := []struct {
		name     string
		drop     bool
		wantRank int
	}{
		{"with request words dropped the converter ranks first", true, 1},
		{"with request words kept the help tool outranks it", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compileTest(t, tools, Config{Weights: Weights{Lexical: 1, Semantic: 0.5}})
			if !tt.drop {
				c.genTerms, c.genWords = nil, nil
			}
			if got := rankOf(t, c, q, "currency_convert"); got != tt.wantRank {
				t.Errorf("rank of currency_convert = %d, want %d", got, tt.wantRank)
			}
		})
	}
	t.Run("a query of request words only keeps them", func(t *testing.T) {
		c := compileTest(t, tools, Config{Weights: Weights{Lexical: 1}})
		if got := rankOf(t, c, Query{Text: "help"}, "help_center"); got != 1 {
			t.Errorf("rank of help_center = %d, want 1", got)
		}
	})
}
