package policy

import "testing"

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*delete*", "delete_file", true},
		{"*delete*", "repo.Delete", true},
		{"*delete*", "remove_file", false},
		{"github_*", "github_create_issue", true},
		{"github_*", "gitlab_create_issue", false},
		{"fs?read", "fs_read", true},
		{"fs?read", "fs__read", false},
		{"[a-c]_x", "b_x", true},
		{"[!a-c]_x", "b_x", false},
		{"a\\*b", "a*b", true},
		{"a\\*b", "axb", false},
		{"*", "", true},
		{"*/*", "server/tool", true},
		{"*a*b*c", "xxaxxbxxc", true},
		{"*a*b*c", "xxaxxbxxcx", false},
		{"exact", "EXACT", true},
		{"[a-a]x", "ax", true},
	}
	for _, tt := range tests {
		t.Run(tt.pattern+" on "+tt.name, func(t *testing.T) {
			g, err := compileGlob(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.Match(tt.name); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "[abc", "x\\", "a]", "[]", "[z-a]*", "[!z-a]*", "[a-cz-x]", "[Z-A]"} {
		t.Run("rejects "+bad, func(t *testing.T) {
			if _, err := compileGlob(bad); err == nil {
				t.Errorf("compileGlob(%q) accepted", bad)
			}
		})
	}
}
