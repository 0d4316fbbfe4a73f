package selector

import (
	"slices"
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
			m := newStemMemo(stemmer, nil)
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

func TestWordRowsAreTheVectorsRows(t *testing.T) {
	c := compileTest(t, loadCatalogFile(t, "../testdata/catalog.json")[""], Config{})
	wv := c.wordVectors()
	if wv == nil {
		t.Fatal("the catalog has no word vectors; the test needs them")
	}
	for _, tc := range []struct{ name, text string }{
		{"words the analysis just stemmed come from the memo", "create an issue in the repository and comment on the pull request"},
		{"unknown and repeated words are skipped and kept as rowsOf does", "zqxjv picture of a picture qwzzk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, words := c.an.query(tc.text)
			if len(words) == 0 {
				t.Fatal("no words")
			}
			got, want := c.wordRows(wv, words, nil), wv.rowsOf(words, nil)
			if !slices.Equal(got, want) {
				t.Errorf("wordRows = %v, want the index's %v", got, want)
			}
			if _, held := c.an.stem.row(words[0]); !held {
				t.Errorf("the memo does not hold %q after its analysis: the rows came from the index", words[0])
			}
		})
	}
	t.Run("a word the memo never saw is looked up in the index", func(t *testing.T) {
		words := []string{"weather", "forecast"}
		if got, want := c.wordRows(wv, words, nil), wv.rowsOf(words, nil); !slices.Equal(got, want) {
			t.Errorf("wordRows = %v, want %v", got, want)
		}
	})
}
