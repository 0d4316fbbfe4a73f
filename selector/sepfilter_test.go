package selector

import (
	"bytes"
	"regexp"
	"testing"

	regexpchar "github.com/blevesearch/bleve/v2/analysis/char/regexp"
)

// sepPattern is identSeparators as the regexp bleve's char filter took,
// the reference sepFilter must match byte for byte.
var sepPattern = regexp.MustCompile(`[_./:\\#@-]+`)

func TestSepFilterMatchesTheRegexpFilter(t *testing.T) {
	want := regexpchar.New(sepPattern, []byte(" "))
	got := newSepFilter(identSeparators)
	for _, tc := range []struct{ name, in string }{
		{"an identifier with every separator", `repo_create.issue/v2:list\x#y@z-w`},
		{"runs of separators collapse to one space", "a__b..c-_-d"},
		{"separators at both ends", "_lead and trail."},
		{"prose without separators", "Create an issue about the login crash"},
		{"an empty text", ""},
		{"non-ASCII text around separators", "créer_une_tâche — 日本語.テスト"},
		{"invalid UTF-8 next to a separator", "a\xff_\xfeb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := want.Filter([]byte(tc.in))
			g := got.Filter([]byte(tc.in))
			if !bytes.Equal(g, w) {
				t.Errorf("Filter(%q) = %q, the regexp filter gives %q", tc.in, g, w)
			}
		})
	}
}

func FuzzSepFilter(f *testing.F) {
	for _, s := range []string{"get_user", "a..b", "x/y:z", "héllo-wörld", "\xff_"} {
		f.Add([]byte(s))
	}
	want := regexpchar.New(sepPattern, []byte(" "))
	got := newSepFilter(identSeparators)
	f.Fuzz(func(t *testing.T, in []byte) {
		if g, w := got.Filter(bytes.Clone(in)), want.Filter(bytes.Clone(in)); !bytes.Equal(g, w) {
			t.Fatalf("Filter(%q) = %q, the regexp filter gives %q", in, g, w)
		}
	})
}
