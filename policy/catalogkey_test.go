package policy

import (
	"strings"
	"testing"
)

func TestCatalogKeyChangesExactlyWhenWhatCatalogReadsChanges(t *testing.T) {
	const base = `
core: [read_file]
deny: ["*delete*"]
tools:
  create_issue: {keywords: [ticket]}
anchors:
  - {pattern: '(?i)ticket', tools: ["*issue*"]}
transitions:
  get_file: {update_file: 0.7}
categories:
  code: {text: Search before you write.}
`
	baseKey := mustLoad(t, base, nil).CatalogKey()
	for _, tc := range []struct {
		name string
		src  string
		same bool
	}{
		{"the same text loaded again keeps the key", base, true},
		{"the same sections in another order keep the key", `
transitions:
  get_file: {update_file: 0.7}
tools:
  create_issue: {keywords: [ticket]}
deny: ["*delete*"]
anchors:
  - {pattern: '(?i)ticket', tools: ["*issue*"]}
core: [read_file]
categories:
  code: {text: Search before you write.}
`, true},
		{"another core list keeps the key", replaceOnce(t, base, "[read_file]", "[write_file]"), true},
		{"risk gating keeps the key", base + "risk: {gate: destructive}\n", true},
		{"other hints keep the key", replaceOnce(t, base, "Search before you write.", "Read the issue first."), true},
		{"other gateway settings keep the key", base + "gateway: {max_rounds: 3, preselect: 9}\n", true},
		{"bundles keep the key", base + "bundles:\n  issues: {description: Issue work, tools: [\"*issue*\"]}\n", true},
		{"another deny list changes it", replaceOnce(t, base, `"*delete*"`, `"*drop*"`), false},
		{"an allow list changes it", base + "allow: [\"*issue*\"]\n", false},
		{"other enrichment changes it", replaceOnce(t, base, "[ticket]", "[ticket, bug]"), false},
		{"another anchor changes it", replaceOnce(t, base, "(?i)ticket", "(?i)bug"), false},
		{"another transition changes it", replaceOnce(t, base, "0.7", "0.5"), false},
		{"other weights change it", base + "search: {weights: {lexical: 2}}\n", false},
		{"another embeddings provider changes it", base + "search: {embeddings: {provider: \"off\"}}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustLoad(t, tc.src, nil)
			if got := s.CatalogKey() == baseKey; got != tc.same {
				t.Errorf("key equal to the base's: %v, want %v", got, tc.same)
			}
		})
	}
}

func TestAProfileThatChangesTheCatalogHasItsOwnCatalogKey(t *testing.T) {
	s := mustLoad(t, `
deny: ["*delete*"]
profiles:
  - name: ci
    match: {key: "ci-*"}
    deny: ["*write*"]
  - name: fast
    match: {model: "*-mini"}
    gateway: {preselect: 3}
`, nil)
	keys := s.CatalogKeys()
	if len(keys) != 3 {
		t.Fatalf("CatalogKeys() has %d keys, want the base's and two profiles'", len(keys))
	}
	if keys[0] != s.CatalogKey() {
		t.Errorf("CatalogKeys()[0] = %x, want the base's own %x", keys[0], s.CatalogKey())
	}
	if keys[1] == keys[0] {
		t.Error("the profile that adds to deny shares the base's catalog key")
	}
	if keys[2] != keys[0] {
		t.Error("the profile that changes only gateway settings has a catalog key of its own")
	}
	if s.ForRequest(Request{Model: "gpt-4o-mini"}).Generation() == s.Generation() {
		t.Error("the profiles share the base's generation; the test no longer shows the keys differ from it")
	}
}

// replaceOnce replaces the only occurrence of old in s.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%q occurs %d times, want once", old, n)
	}
	return strings.Replace(s, old, new, 1)
}
