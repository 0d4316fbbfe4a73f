package selector

import (
	"slices"
	"testing"
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
		if want := an.terms(text); !slices.Equal(terms, want) {
			t.Errorf("query(%q) terms = %v, want %v", text, terms, want)
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
		if got, want := an.wordTerms(w), an.terms(w); !slices.Equal(got, want) {
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
