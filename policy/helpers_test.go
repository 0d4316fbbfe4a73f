package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes name -> content under a fresh temp dir and returns the
// dir.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// loadString loads src as dir/tools.yaml with extra files beside it.
func loadString(t *testing.T, src string, extra map[string]string) (*Snapshot, error) {
	t.Helper()
	files := map[string]string{"tools.yaml": src}
	for k, v := range extra {
		files[k] = v
	}
	dir := writeFiles(t, files)
	return Load(filepath.Join(dir, "tools.yaml"))
}

func mustLoad(t *testing.T, src string, extra map[string]string) *Snapshot {
	t.Helper()
	s, err := loadString(t, src, extra)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

// problemsOf returns the problems of a Load error as "LINE:COL: msg",
// failing the test if err is not an *Errors.
func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	var perr *Errors
	if !errors.As(err, &perr) {
		t.Fatalf("want *policy.Errors, got %T: %v", err, err)
	}
	out := make([]string, len(perr.Problems))
	for i, p := range perr.Problems {
		if !strings.HasSuffix(p.File, "tools.yaml") {
			t.Errorf("problem %q names file %q, want the policy file", p.Msg, p.File)
		}
		out[i] = strings.TrimPrefix(p.String(), p.File+":")
	}
	return out
}
