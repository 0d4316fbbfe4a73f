package selector

import (
	"slices"
	"testing"
)

func TestAnalyzerSplitsIdentifiersAndKeepsCJK(t *testing.T) {
	an, err := newAnalyzer()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text string
		want       []string
	}{
		{"camelCase and acronyms are split", "repoMergeHTTPRequest", []string{"repo", "merg", "http", "request"}},
		{"snake_case, dots and dashes are split", "github.create_issue-v2", []string{"github", "creat", "issu", "v", "2"}},
		{"plural and verb forms share a stem", "merging requests", []string{"merg", "request"}},
		{"CJK text becomes bigrams", "東京都", []string{"東京", "京都"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := an.terms(tt.text); !slices.Equal(got, tt.want) {
				t.Errorf("terms(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// TestBM25StatsHoldExactFieldLengths checks the statistics handed to
// bleve's BM25 in place of its distinct-terms average: each field's total
// is the sum of its analysed lengths.
func TestBM25StatsHoldExactFieldLengths(t *testing.T) {
	tools := testTools(t)
	c := compileTest(t, tools, Config{})
	wv, err := DefaultWordVectors()
	if err != nil {
		wv = nil // as Compile does
	}
	var desc, all int
	for i := range tools {
		desc += len(c.an.terms(tools[i].Description))
		_, tf := toolDocument(i, &tools[i], c.an, wv) // the catalog keeps no per-tool counts
		all += int(tf.all.len)
	}
	for _, tt := range []struct {
		field string
		want  int
	}{{fAll, all}, {fWhole, len(tools)}} {
		t.Run("the "+tt.field+" field's total is its analysed length", func(t *testing.T) {
			if got := c.stats.FieldCardinality[tt.field]; got != tt.want {
				t.Errorf("stats[%s] = %d, want %d", tt.field, got, tt.want)
			}
		})
	}
	t.Run("the side field desc's total is its analysed length", func(t *testing.T) {
		if got := c.fields.sideLen[4]; got != float64(desc) {
			t.Errorf("sideLen[desc] = %v, want %d", got, desc)
		}
	})
	if c.stats.DocCount != float64(len(tools)) {
		t.Errorf("DocCount = %v, want %d", c.stats.DocCount, len(tools))
	}
}
