package policy

import (
	"reflect"
	"slices"
	"testing"
)

func TestDecide(t *testing.T) {
	const src = `
core: ["github_*", "read_file"]
deny: ["*delete*"]
bundles:
  web: {tools: ["browser_*"]}
pin: [web]
tools:
  github_merge_pr: {risk: destructive}
  drop_table: {risk: destructive}
  archive_page: {risk: moderate}
`
	s := mustLoad(t, src, nil)
	tests := []struct {
		name, tool, user string
		want             Decision
	}{
		{"a denied tool is hidden even when the user asks for it", "delete_file", "please delete the file",
			Decision{Rule: `deny "*delete*"`}},
		{"deny is case-insensitive", "DeleteRepo", "delete it", Decision{Rule: `deny "*delete*"`}},
		{"deny beats core", "github_delete_repo", "delete the repo", Decision{Rule: `deny "*delete*"`}},
		{"a core glob makes a tool core", "github_create_issue", "", Decision{Visible: true, Core: true, Rule: `core "github_*"`}},
		{"an exact core name makes a tool core", "read_file", "", Decision{Visible: true, Core: true, Rule: `core "read_file"`}},
		{"a pinned bundle makes its tools core", "browser_click", "", Decision{Visible: true, Core: true, Rule: `pin "web"`}},
		{"an unlisted tool is visible by default", "send_mail", "", Decision{Visible: true, Rule: "default"}},
		{"a destructive tool is hidden without write intent", "drop_table", "how many rows are in users?",
			Decision{Rule: "risk destructive without write intent"}},
		{"a destructive tool is shown with write intent", "drop_table", "Drop the users table", Decision{Visible: true, Rule: "default"}},
		{"risk gating applies to core tools too", "github_merge_pr", "what is in PR 4?",
			Decision{Rule: "risk destructive without write intent"}},
		{"a core destructive tool is core once the user asks to change", "github_merge_pr", "merge PR 4",
			Decision{Visible: true, Core: true, Rule: `core "github_*"`}},
		{"a moderate tool is not gated by the default gate", "archive_page", "show the page", Decision{Visible: true, Rule: "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Decide(tt.tool, tt.user); got != tt.want {
				t.Errorf("Decide(%q, %q) = %+v, want %+v", tt.tool, tt.user, got, tt.want)
			}
			if got := s.Decider(tt.user)(tt.tool); got != tt.want {
				t.Errorf("Decider(%q)(%q) = %+v, want %+v", tt.user, tt.tool, got, tt.want)
			}
			// A catalog's table answers the same, for its tools and for a
			// name outside it.
			if got := s.Table([]string{"send_mail", tt.tool}).For(tt.user).Decide(tt.tool); got != tt.want {
				t.Errorf("Table(...).For(%q).Decide(%q) = %+v, want %+v", tt.user, tt.tool, got, tt.want)
			}
			if got := s.Table([]string{"send_mail"}).For(tt.user).Decide(tt.tool); got != tt.want {
				t.Errorf("Table without it: For(%q).Decide(%q) = %+v, want %+v", tt.user, tt.tool, got, tt.want)
			}
		})
	}
}

func TestTableListsCoreToolsByWriteIntent(t *testing.T) {
	s := mustLoad(t, "core: [\"github_*\"]\ntools:\n  github_merge_pr: {risk: destructive}\n", nil)
	tab := s.Table([]string{"send_mail", "github_merge_pr", "github_get_pr", "github_get_pr"})
	tests := []struct {
		name, user string
		want       []string
	}{
		{"a question leaves the destructive core tool out", "what is in PR 4?", []string{"github_get_pr"}},
		{"a request to change brings it in, in catalog order", "merge PR 4", []string{"github_merge_pr", "github_get_pr"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tab.For(tt.user).Core(); !slices.Equal(got, tt.want) {
				t.Errorf("Core() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTableListsHiddenToolsAsSnapshotDecideDoes(t *testing.T) {
	s := mustLoad(t, "deny: [\"*_delete\"]\ntools:\n  repo_merge: {risk: destructive}\n", nil)
	names := []string{"repo_delete", "repo_merge", "repo_list", "repo_delete", "fs_read"}
	tab := s.Table(names)
	tests := []struct {
		name, user string
		want       []string // hidden, in catalog order
	}{
		{"a question hides the denied tool at both its positions and the destructive one", "what is open?",
			[]string{"repo_delete", "repo_merge", "repo_delete"}},
		{"a request to change shows the destructive tool, not the denied one", "merge the branch",
			[]string{"repo_delete", "repo_delete"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tab.For(tt.user)
			var got []string
			for _, i := range b.Hidden() {
				name, d := b.At(i)
				if want := s.Decide(name, tt.user); d != want {
					t.Errorf("At(%d) = %s %+v, Snapshot.Decide says %+v", i, name, d, want)
				}
				got = append(got, name)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Hidden() names %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecideWithAllowAndGates(t *testing.T) {
	tests := []struct {
		name, src, tool, user string
		want                  Decision
	}{
		{"a tool outside allow is hidden", "allow: [fs_*]\n", "web_get", "", Decision{Rule: "not in allow"}},
		{"a tool inside allow names the allow rule", "allow: [fs_*]\n", "fs_read", "", Decision{Visible: true, Rule: `allow "fs_*"`}},
		{"deny beats allow", "allow: [fs_*]\ndeny: [fs_rm]\n", "fs_rm", "rm it", Decision{Rule: `deny "fs_rm"`}},
		{"gate moderate hides moderate tools without intent", "risk: {gate: moderate}\ntools:\n  archive: {risk: moderate}\n",
			"archive", "list pages", Decision{Rule: "risk moderate without write intent"}},
		{"gate off shows destructive tools without intent", "risk: {gate: off}\ntools:\n  nuke: {risk: destructive}\n",
			"nuke", "hello", Decision{Visible: true, Rule: "default"}},
		{"destructive_names infers risk from the name", "risk: {destructive_names: '(?i)purge'}\n",
			"cache_purge", "show the cache", Decision{Rule: "risk destructive without write intent"}},
		{"an explicit safe risk beats destructive_names", "risk: {destructive_names: '(?i)purge'}\ntools:\n  cache_purge: {risk: safe}\n",
			"cache_purge", "show the cache", Decision{Visible: true, Rule: "default"}},
		{"a custom write_intent pattern decides intent", "risk: {write_intent: '(?i)\\bplease do\\b'}\ntools:\n  nuke: {risk: destructive}\n",
			"nuke", "delete everything", Decision{Rule: "risk destructive without write intent"}},
		{"a glob tools entry gives its risk", "tools:\n  \"*_destroy\": {risk: destructive}\n",
			"vm_destroy", "list vms", Decision{Rule: "risk destructive without write intent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustLoad(t, tt.src, nil)
			if got := s.Decide(tt.tool, tt.user); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHiddenIgnoresTheUserTurn(t *testing.T) {
	s := mustLoad(t, "deny: ['*delete*']\ntools:\n  nuke: {risk: destructive}\n", nil)
	if hidden, rule := s.Hidden("delete_x"); !hidden || rule != `deny "*delete*"` {
		t.Errorf("Hidden(delete_x) = %v %q", hidden, rule)
	}
	if hidden, _ := s.Hidden("nuke"); hidden {
		t.Error("risk gating leaked into Hidden")
	}
}

func BenchmarkDecide650(b *testing.B) {
	s, err := parse("bench.yaml", []byte("core: [github_*, fs_*]\ndeny: ['*delete*', '*drop*']\ntools:\n  nuke: {risk: destructive}\n"), 1)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, 650)
	for i := range names {
		names[i] = "server_tool_name_" + string(rune('a'+i%26))
	}
	b.ReportAllocs()
	for b.Loop() {
		d := s.Decider("please list my repositories")
		for _, n := range names {
			_ = d(n)
		}
	}
}

// Visible is Position and Decide in one lookup: a tool of the table shown
// for the message, never a name outside it, whatever the policy says.
func TestBoundVisibleIsKnownAndShown(t *testing.T) {
	s := mustLoad(t, "deny: [\"admin_*\"]\ntools:\n  github_merge_pr: {risk: destructive}\n", nil)
	tab := s.Table([]string{"admin_drop", "github_merge_pr", "github_get_pr"})
	for _, user := range []string{"what is in PR 4?", "merge PR 4"} {
		b := tab.For(user)
		for _, name := range []string{"admin_drop", "github_merge_pr", "github_get_pr", "not_in_the_catalog"} {
			t.Run(user+": "+name, func(t *testing.T) {
				_, known := b.Position(name)
				want := known && b.Decide(name).Visible
				if got := b.Visible(name); got != want {
					t.Errorf("Visible = %v, Position and Decide say %v", got, want)
				}
			})
		}
	}
	if b := tab.For("what is in PR 4?"); b.Visible("admin_drop") || !b.Visible("github_get_pr") || b.Visible("not_in_the_catalog") {
		t.Error("a denied tool is visible, an allowed one is not, or an unknown name is")
	}
}

// TestExactToolsKeysMatchCaseInsensitively: tools keys match names as
// globs do, exact ones too, so a destructive tool written "DeleteRepo" is
// gated when the client sends "deleterepo", and a profile's key merges
// onto the base's entry however either spells it.
func TestExactToolsKeysMatchCaseInsensitively(t *testing.T) {
	const src = `
tools:
  DeleteRepo: {risk: destructive, hint: base hint}
  read_File: {title: Read a file}
profiles:
  - match: {model: "p"}
    tools:
      deleterepo: {hint: profile hint}
`
	s := mustLoad(t, src, nil)
	p := s.ForRequest(Request{Model: "p"})
	tests := []struct {
		name, tool string
		snap       *Snapshot
		risk, hint string
	}{
		{"a key written in mixed case applies to the name in lower case", "deleterepo", s, RiskDestructive, "base hint"},
		{"a key written in mixed case applies to the name as written", "DeleteRepo", s, RiskDestructive, "base hint"},
		{"a key applies to a name in another mix of cases", "DELETEREPO", s, RiskDestructive, "base hint"},
		{"a profile's key merges onto the base's entry spelled otherwise", "DeleteRepo", p, RiskDestructive, "profile hint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := tt.snap.Meta(tt.tool)
			if !ok || m.Risk != tt.risk || m.Hint != tt.hint {
				t.Errorf("Meta(%q) = %+v, %v; want risk %q, hint %q", tt.tool, m, ok, tt.risk, tt.hint)
			}
			if d := tt.snap.Decide(tt.tool, "what repos do I have?"); d.Visible {
				t.Errorf("Decide(%q) = %+v; want it gated as destructive", tt.tool, d)
			}
		})
	}
	if m, ok := s.Meta("read_file"); !ok || m.Title != "Read a file" {
		t.Errorf(`Meta("read_file") = %+v, %v; want the entry of key read_File`, m, ok)
	}
}

// TestToolsKeysThatDifferOnlyInCaseAreRefused: they would name the same
// tools, and which entry won would depend on map order.
func TestToolsKeysThatDifferOnlyInCaseAreRefused(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // "LINE:COL: the message, whole"
	}{
		{"two exact keys", "tools:\n  read_file: {hint: a}\n  Read_File: {hint: b}\n",
			`3:3: tools key "Read_File" differs from "read_file" (line 2) only in case, and tools keys match names case-insensitively; merge the two`},
		{"two glob keys", "tools:\n  \"Repo_*\": {category: code}\n  \"repo_*\": {category: files}\n",
			`3:3: tools key "repo_*" differs from "Repo_*" (line 2) only in case, and tools keys match names case-insensitively; merge the two`},
		{"two keys of one profile", "profiles:\n  - tools:\n      a_b: {hint: a}\n      A_B: {hint: b}\n",
			`4:7: profiles[0].tools key "A_B" differs from "a_b" (line 3) only in case, and tools keys match names case-insensitively; merge the two`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.src, nil)
			if err == nil {
				t.Fatal("Load accepted the file")
			}
			if got := problemsOf(t, err); len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems %q, want [%q]", got, tt.want)
			}
		})
	}
}

// A table laid out for another order of the same tools is the table made
// in that order, decided once: every decision, the core tools' and the
// hidden positions' order, the names and positions are that order's.
func TestTableInOrderIsTheTableOfThatOrder(t *testing.T) {
	s := mustLoad(t, "core: [\"github_*\"]\ndeny: [\"*_delete\"]\ntools:\n  github_merge_pr: {risk: destructive}\n", nil)
	names := []string{"send_mail", "github_merge_pr", "repo_delete", "github_get_pr", "fs_read", "github_list_prs"}
	tab := s.Table(names)
	for _, tc := range []struct {
		name  string
		order []string
	}{
		{"the same order", names},
		{"reversed", []string{"github_list_prs", "fs_read", "github_get_pr", "repo_delete", "github_merge_pr", "send_mail"}},
		{"shuffled", []string{"github_get_pr", "repo_delete", "send_mail", "github_list_prs", "github_merge_pr", "fs_read"}},
	} {
		t.Run("laid out "+tc.name+" it equals the table made "+tc.name, func(t *testing.T) {
			got, ok := tab.InOrder(tc.order)
			if !ok {
				t.Fatal("refused an order of the table's own tools")
			}
			if want := s.Table(slices.Clone(tc.order)); !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
			for _, user := range []string{"what is open?", "merge PR 4"} {
				if got, want := got.For(user).Core(), s.Table(tc.order).For(user).Core(); !slices.Equal(got, want) {
					t.Errorf("For(%q).Core() = %q, want %q", user, got, want)
				}
			}
		})
	}
	t.Run("other tools are refused", func(t *testing.T) {
		if _, ok := tab.InOrder([]string{"send_mail", "github_merge_pr", "repo_delete", "github_get_pr", "fs_read", "other"}); ok {
			t.Error("laid out a table for a tool it never decided")
		}
		if _, ok := tab.InOrder(names[1:]); ok {
			t.Error("laid out a table for one tool fewer")
		}
		if _, ok := tab.InOrder([]string{"github_get_pr", "repo_delete", "send_mail", "github_get_pr", "github_merge_pr", "fs_read"}); ok {
			t.Error("laid out a table for a tool twice in place of another")
		}
	})
}
