package selector

import (
	"slices"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/token/camelcase"
)

func TestQueryAnalysisMatchesBothChains(t *testing.T) {
	an, err := newAnalyzer()
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		"Please upload the cover image to the CMS page and share it on Slack.",
		"repo_mergePR for github.create-issue, then email bob's team",
		"查询北京的天气 and the weather in Tokyo",
		"",
	} {
		terms, words := an.query(text)
		chain := analyze(an.text, text)
		if !slices.Equal(terms, chain) {
			t.Errorf("query(%q) terms = %v, want the text chain's %v", text, terms, chain)
		}
		if got := an.terms(text); !slices.Equal(got, chain) {
			t.Errorf("terms(%q) = %v, want the text chain's %v", text, got, chain)
		}
		if want := an.words(text); !slices.Equal(words, want) {
			t.Errorf("query(%q) words = %v, want %v", text, words, want)
		}
	}
}

func TestWordTermsMatchesTheTextChain(t *testing.T) {
	an, err := newAnalyzer()
	if err != nil {
		t.Fatal(err)
	}
	wv, err := DefaultWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	words := append([]string{"the", "running", "Mixed", "co-op"}, everyNth(wv.words, 7)...)
	for _, w := range words {
		if got, want := an.wordTerms(w), analyze(an.text, w); !slices.Equal(got, want) {
			t.Errorf("wordTerms(%q) = %v, want %v", w, got, want)
		}
	}
}

func everyNth(s []string, n int) []string {
	var out []string
	for i := 0; i < len(s); i += n {
		out = append(out, s[i])
	}
	return out
}

// The camelCase shortcut must give exactly the tokens bleve's filter gives,
// for the words it takes and the ones it leaves to the filter.
func TestCamelShortcutMatchesTheFilter(t *testing.T) {
	full := camelcase.NewCamelCaseFilter()
	fast := alnumOnly{full}
	for _, w := range []string{
		"a", "A", "7", "upload", "Upload", "UPLOAD", "2024", "PDFs", "mergePR",
		"repoMerge", "HTTPServer", "v2", "Ab1", "a1", "aB", "x9y", "café", "Élan", "IDs",
	} {
		tok := &analysis.Token{Term: []byte(w), Start: 5, End: 5 + len(w), Position: 3, Type: analysis.AlphaNumeric}
		want := full.Filter(analysis.TokenStream{{Term: []byte(w), Start: 5, End: 5 + len(w), Position: 3}})
		got := fast.Filter(analysis.TokenStream{tok})
		if len(got) != len(want) {
			t.Errorf("%q: %d tokens, want %d", w, len(got), len(want))
			continue
		}
		for i := range got {
			g, w2 := *got[i], *want[i]
			w2.Type = analysis.AlphaNumeric
			if string(g.Term) != string(w2.Term) || g.Start != w2.Start || g.End != w2.End || g.Position != w2.Position || g.Type != w2.Type || g.KeyWord != w2.KeyWord {
				t.Errorf("%q token %d = %+v, want %+v", w, i, g, w2)
			}
		}
	}
}

// Skipping ASCII tokens must not change what the CJK width filter gives.
func TestWidthFilterSkipMatchesTheFilter(t *testing.T) {
	full := cjk.NewCJKWidthFilter()
	fast := nonASCIIOnly{cjk.NewCJKWidthFilter()}
	stream := func() analysis.TokenStream {
		var ts analysis.TokenStream
		for i, w := range []string{"upload", "ＡＢＣ", "ｶﾞｷﾞ", "café", "2024", "ｱｲｳ", "Ｈello"} {
			ts = append(ts, &analysis.Token{Term: []byte(w), Start: i, End: i + len(w), Position: i + 1, Type: analysis.AlphaNumeric})
		}
		return ts
	}
	want, got := full.Filter(stream()), fast.Filter(stream())
	if len(got) != len(want) {
		t.Fatalf("%d tokens, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if string(g.Term) != string(w.Term) || g.Start != w.Start || g.End != w.End || g.Position != w.Position || g.Type != w.Type {
			t.Errorf("token %d = %+v, want %+v", i, g, w)
		}
	}
}
