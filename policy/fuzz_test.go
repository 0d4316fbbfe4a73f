package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes through decoding, validation and compiling:
// Load must either return a usable snapshot or an *Errors with at least one
// problem, and never panic.
func FuzzLoad(f *testing.F) {
	seeds := []string{
		"",
		"core: [a]\n",
		"gateway:\n  mode: x\n  timeouts: {idle: 5s}\n",
		"tools:\n  a: {risk: catastrophic}\n",
		"deny: ['[abc']\n",
		"anchors:\n  - {pattern: '(x', tools: [a], boost: 1}\n",
		"x: &a [1]\ny: *a\n",
		"profiles:\n  - match: {model: 'gpt-*'}\n    deny: [b]\n",
		"a: [1, 2\n",
		"{\n",
		"- 1\n- 2\n",
		"core: &c [a]\nbundles: {b: {tools: *c}}\npin: [b]\n",
	}
	if shipped, err := os.ReadFile(filepath.Join("..", "tools.yaml")); err == nil {
		seeds = append(seeds, string(shipped))
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "tools.yaml")
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := parse(path, src, 1)
		if err != nil {
			var perr *Errors
			if !errors.As(err, &perr) {
				t.Fatalf("error is %T, not *Errors: %v", err, err)
			}
			if len(perr.Problems) == 0 || perr.Error() == "" {
				t.Fatal("an *Errors without problems")
			}
			return
		}
		if s == nil {
			t.Fatal("nil snapshot without error")
		}
		_ = s.Decide("delete_x", "delete it")
		_ = s.ForRequest(Request{Model: "gpt-4o", Key: "k"}).Decide("x", "")
		_, _ = s.Catalog(nil)
	})
}
