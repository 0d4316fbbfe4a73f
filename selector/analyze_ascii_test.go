package selector

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// sameAnalysis fails t when queryASCII, where it accepts text, gives other
// terms or words than the bleve chains.
func sameAnalysis(t *testing.T, an *analyzer, text string) {
	t.Helper()
	terms, words, ok := an.queryASCII(text)
	if !ok {
		return
	}
	wantTerms, wantWords := an.queryChains(text)
	if !slices.Equal(terms, wantTerms) || !slices.Equal(words, wantWords) {
		t.Fatalf("%q:\n terms %q\n  want %q\n words %q\n  want %q", text, terms, wantTerms, words, wantWords)
	}
}

func TestASCIIQueriesAnalyseAsTheBleveChains(t *testing.T) {
	an, err := newAnalyzer()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, text string
		accepted   bool
	}{
		{"a plain request takes the ASCII path and analyses as the chains do", "Summarise the open issues of acme/webshop and post the summary in #eng.", true},
		{"possessives and contractions take the ASCII path and analyse as the chains do", "Read the user's profile, don't touch Tom's FILES'S or it's", true},
		{"camelCase, acronyms and letters with digits take the ASCII path and analyse as the chains do", "use parseLegacyConfig, HTTPServer, iPhone, v2 and ABCdef9x", true},
		{"identifiers take the ASCII path and split at their separators as the chains split them", "call github.create_issue on repo_x/y-z@v2 #12", true},
		{"numbers and units take the ASCII path and analyse as the chains do", "Convert 250 euros, 12.5 miles and 1,240 at 17.5% VAT", true},
		{"upper-case words and short ones take the ASCII path and analyse as the chains do", "PR 482 CI API a I o US", true},
		{"a text of stop words only takes the ASCII path and analyses as the chains do", "the and of to is it", true},
		{"non-ASCII text goes to the chains", "créer une page", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, ok := an.queryASCII(tc.text); ok != tc.accepted {
				t.Fatalf("accepted %v, want %v", ok, tc.accepted)
			}
			sameAnalysis(t, an, tc.text)
		})
	}
	t.Run("random ASCII texts analyse as the chains do", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		words := []string{"the", "user's", "Files", "READ", "running", "ran", "a", "it's", "x", "42", "1,000", "e.g.", "don't", "_", "-", "/", ".", ",", "'", "'s", "S", "caps", "Caps", "news", "ies", "getHTTPResponse", "v2", "iOS", "ABCs", "x9Y", "JSONData"}
		for trial := range 20000 {
			var b []byte
			for range rng.IntN(8) {
				b = append(b, words[rng.IntN(len(words))]...)
				if rng.IntN(3) > 0 {
					b = append(b, " .,;:'\"_-/!?"[rng.IntN(12)])
				}
			}
			_ = trial
			sameAnalysis(t, an, string(b))
		}
	})
	t.Run("the dev sets' queries analyse as the chains do", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(devDir, "*.dev.jsonl"))
		if len(files) == 0 {
			t.Skip("no dev sets in " + devDir)
		}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var q struct{ Query string }
				if err := json.Unmarshal(sc.Bytes(), &q); err != nil {
					t.Fatal(err)
				}
				sameAnalysis(t, an, q.Query)
			}
			fh.Close()
		}
	})
}

func FuzzASCIIQuery(f *testing.F) {
	for _, s := range []string{"Read the user's FILES", "call a.b_c-d/e", "1,240 e.g. it's", "xS's 's"} {
		f.Add(s)
	}
	an, err := newAnalyzer()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) { sameAnalysis(t, an, s) })
}
