package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/proxy"
	"github.com/toolgate/toolgate/selector"
)

func TestAPolicyReloadPurgesTheCatalogsOnlyWhenWhatTheyCompileFromChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.yaml")
	write := func(t *testing.T, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(t, "deny: [a_*]\n")
	live, err := policy.NewLive(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	catalogs := selector.NewCache(8)
	onPolicyReload(live, proxy.NewMetrics(), catalogs)
	compile := func(t *testing.T) {
		t.Helper()
		build := func() ([]selector.Tool, selector.Config) {
			return []selector.Tool{{Name: "read_file", Description: "read a file"}, {Name: "list_dir", Description: "list a directory"}}, selector.Config{}
		}
		if _, err := catalogs.Get(context.Background(), "tools:gen", build); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		content string
		wantLen int
	}{
		{"a reload of unchanged text keeps the compiled catalogs", "deny: [a_*]\n", 1},
		{"a broken edit keeps them", "deny: [\n", 1},
		{"a reload that changes only what compiling does not read keeps them", "deny: [a_*]\ncore: [read_file]\n", 1},
		{"a reload that changes what compiling reads lets them go", "deny: [b_*]\ncore: [read_file]\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			compile(t)
			write(t, tc.content)
			_ = live.Reload() // a broken edit's error is the point of its case
			if n := catalogs.Stats().Len; n != tc.wantLen {
				t.Errorf("%d catalogs cached after the reload, want %d", n, tc.wantLen)
			}
		})
	}
}
