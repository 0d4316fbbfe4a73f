package selector

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	uaxtok "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// sameTokens reports how two token streams differ, or "" when every
// token's term, offsets, position and type agree.
func sameTokens(got, want analysis.TokenStream) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d tokens, want %d: %v vs %v", len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if string(g.Term) != string(w.Term) || g.Start != w.Start || g.End != w.End || g.Position != w.Position || g.Type != w.Type {
			return fmt.Sprintf("token %d: got %v, want %v", i, g, w)
		}
	}
	return ""
}

func TestASCIITokensAreBlevesUnicodeTokens(t *testing.T) {
	uax := uaxtok.NewUnicodeTokenizer()
	fast := asciiFirst{uax}
	for _, tc := range []struct{ name, text string }{
		{"an empty text has no tokens", ""},
		{"words split at spaces and punctuation", "Summarise the open issues of acme/webshop, then post it!"},
		{"an apostrophe joins letters", "don't use the user's token'"},
		{"a colon and a full stop join letters", "see e.g. host:port and a.b"},
		{"commas, semicolons and full stops join digits", "1,240 and 17.5% of 3;4 or 1,a"},
		{"letters and digits run together", "v2 3d abc123def 12ab"},
		{"connectors join anything and stand alone", "get_user _x_ 1_2 __ a_'b"},
		{"a number with no letters is numeric", "42 1,000,000 0.5"},
		{"line breaks and tabs separate", "one\r\ntwo\tthree\nfour\rfive"},
		{"quotes and brackets are dropped", `"quoted" (paren) [b] {c} <d>`},
		{"non-ASCII text takes bleve's path", "créer une page — 東京の天気"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := sameTokens(fast.Tokenize([]byte(tc.text)), uax.Tokenize([]byte(tc.text))); diff != "" {
				t.Error(diff)
			}
		})
	}
	t.Run("random ASCII texts tokenise as bleve's do", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		const alphabet = "aZk09_'.,;:\"- \t\r\n!?/()"
		for trial := range 20000 {
			b := make([]byte, rng.IntN(24))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
			if diff := sameTokens(tokenizeASCII(b), uax.Tokenize(b)); diff != "" {
				t.Fatalf("trial %d, %q: %s", trial, b, diff)
			}
		}
	})
}

func FuzzASCIITokenizer(f *testing.F) {
	for _, s := range []string{"don't 1,240 a.b", "get_user v2", "x'1 1'x", "a:b:c 1;2;3"} {
		f.Add([]byte(s))
	}
	uax := uaxtok.NewUnicodeTokenizer()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range b {
			if c >= 0x80 {
				return
			}
		}
		if diff := sameTokens(tokenizeASCII(b), uax.Tokenize(b)); diff != "" {
			t.Errorf("%q: %s", b, diff)
		}
	})
}
