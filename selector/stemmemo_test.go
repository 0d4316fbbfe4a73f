package selector

import (
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
)

func TestStemMemoStemsAsTheStemmerDoes(t *testing.T) {
	words := []string{"files", "filing", "running", "repositories", "created", "create", "screenshots", "issue", "issues", "generously"}
	stemmer := en.NewEnglishStemmerFilter()
	tests := []struct {
		name  string
		limit int // other words stemmed first: none, some, more than the memo keeps
	}{
		{"a word seen for the first time", 0},
		{"a word among others", 30},
		{"a word after the memo started over", stemMemoWords + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newStemMemo(stemmer)
			for i := range tt.limit {
				filler := []byte("word" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)))
				m.Filter(analysis.TokenStream{{Term: filler}})
			}
			for _, w := range words {
				want := stemmer.Filter(analysis.TokenStream{{Term: []byte(w)}})[0].Term
				for _, pass := range []string{"stemmed", "remembered"} {
					got := m.Filter(analysis.TokenStream{{Term: []byte(w)}})[0].Term
					if string(got) != string(want) {
						t.Errorf("%s stem of %q = %q, want %q", pass, w, got, want)
					}
				}
			}
			if len(m.m) > stemMemoWords {
				t.Errorf("memo holds %d words, bound %d", len(m.m), stemMemoWords)
			}
		})
	}
}
