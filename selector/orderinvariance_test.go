package selector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The same tools in another order are the same catalog: some MCP clients
// build their tools array from map iteration, so it arrives in a new order
// every turn, and a ranking that followed the order would change the
// preselection (and the upstream's prompt-cache prefix) every turn for
// nothing. Every ranking, scores included, must be the same to the last
// bit in every order.
func TestRankingsDoNotDependOnTheToolsOrder(t *testing.T) {
	base := loadCatalogFile(t, "../testdata/catalog.json")[""]
	if len(base) != 183 {
		t.Fatalf("the bundled catalog has %d tools, want 183", len(base))
	}
	orders := []struct {
		name  string
		tools []Tool
	}{
		{"reversed", reversedTools(base)},
		{"shuffled with seed 1", shuffledTools(base, 1)},
		{"shuffled with seed 2", shuffledTools(base, 2)},
	}
	type search struct {
		name string
		q    Query
	}
	type preselect struct {
		name  string
		texts []string
		k     int
		q     Query
		skip  []string // by name: a catalog's positions depend on its order
	}
	searches := []search{
		{"a short request the review found order-dependent", Query{Text: "delete the branch", Limit: 10}},
		{"a request many tools half match", Query{Text: "send a message to the team", Limit: 10}},
		{"a single word", Query{Text: "upload", Limit: 8}},
		{"a tool's own name", Query{Text: "fs_read_file", Limit: 5}},
		{"prose with words no tool has", Query{Text: "what will the weather be like in Lisbon tomorrow afternoon", Limit: 8}},
		{"a query that leans on the session's signals", Query{
			Text: "list them", Limit: 10,
			Last: "repo_list_branches", Recent: []string{"repo_get_repository", "repo_list_branches"}, Focus: "branch",
		}},
	}
	preselects := []preselect{
		{"a first turn", []string{"Find the failing workflow run and read its logs"}, 7, Query{}, nil},
		{"a follow-up with the session's recent, last and done tools",
			[]string{"Open the pull request for the login fix", "Now merge it and delete the branch"}, 7,
			Query{
				Last:   "repo_get_pull_request",
				Recent: []string{"repo_list_pull_requests", "repo_get_pull_request"},
				Done:   []string{"repo_list_pull_requests", "repo_get_pull_request"},
				Focus:  "pull request",
			}, nil},
		{"a multi-part request with active tools skipped",
			[]string{"I wrote the release notes in notes.md", "Read notes.md, post a summary to #eng and email it to the team"}, 8,
			Query{Last: "fs_write_file", Recent: []string{"fs_write_file"}, Done: []string{"fs_write_file"}},
			[]string{"fs_read_file", "chat_post_message"}},
		{"a request in words the catalog lacks", []string{"book me something for lunch with Ana next week"}, 7,
			Query{Recent: []string{"calendar_list_events"}}, nil},
	}
	configs := []struct {
		name  string
		cfg   Config
		meta  map[string]Meta
		decom float64
	}{
		{name: "with the default weights", cfg: Config{}},
		{name: "with related tools, anchors, transitions and decomposition", cfg: Config{
			Anchors: []Anchor{
				{Pattern: regexp.MustCompile(`(?i)\bbranch`), Tools: []string{"repo_*branch*"}, Boost: 0.5},
				{Pattern: regexp.MustCompile(`(?i)\b(?:post|send)\b`), Tools: []string{"chat_post_message", "mail_send", "chat_send_*"}},
			},
			Transitions: map[string]map[string]float64{
				"repo_get_pull_request": {"repo_merge_pull_request": 0.5, "repo_delete_branch": 0.3, "repo_list_pull_request_files": 0.2},
				"repo_list_branches":    {"repo_delete_branch": 0.5, "repo_create_branch": 0.5},
			},
		}, meta: map[string]Meta{
			"repo_merge_pull_request": {Related: []string{"repo_delete_branch", "repo_get_pull_request_diff"}},
			"fs_read_file":            {Related: []string{"fs_read_multiple_files", "fs_get_file_info"}},
			"chat_post_message":       {Related: []string{"chat_reply_in_thread"}},
			"calendar_create_event":   {Related: []string{"calendar_find_free_time"}},
		}, decom: 0.7},
	}
	ctx := context.Background()
	for _, cf := range configs {
		t.Run(cf.name, func(t *testing.T) {
			cfg := cf.cfg
			if cf.decom > 0 {
				cfg.Weights = DefaultWeights()
				cfg.Weights.Decompose = cf.decom
			}
			enrich := func(tools []Tool) []Tool {
				out := slices.Clone(tools)
				for i := range out {
					if m, ok := cf.meta[out[i].Name]; ok {
						out[i].Meta = m
					}
				}
				return out
			}
			// Each catalog answers the same queries in the same sequence,
			// so the word memos it fills on the way are alike too.
			run := func(tools []Tool) []Results {
				c := compileTest(t, enrich(tools), cfg)
				var out []Results
				for _, s := range searches {
					res, err := c.Search(ctx, s.q)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, res)
				}
				for _, p := range preselects {
					q := p.q
					if p.skip != nil {
						skip := make([]bool, c.Len())
						for _, name := range p.skip {
							if i, ok := c.Position(name); ok {
								skip[i] = true
							}
						}
						q.Skip = func(i int) bool { return skip[i] }
					}
					res, err := c.Preselect(ctx, p.texts, p.k, q)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, res)
				}
				return out
			}
			want := run(base)
			names := make([]string, 0, len(searches)+len(preselects))
			for _, s := range searches {
				names = append(names, "Search: "+s.name)
			}
			for _, p := range preselects {
				names = append(names, "Preselect: "+p.name)
			}
			for _, o := range orders {
				got := run(o.tools)
				for i, name := range names {
					t.Run(fmt.Sprintf("%s ranks the same %s", name, o.name), func(t *testing.T) {
						if len(want[i].Items) == 0 {
							t.Fatal("the catalog's own order returned nothing: the case tests nothing")
						}
						if !reflect.DeepEqual(got[i], want[i]) {
							t.Errorf("in the catalog's order vs %s:\n%s", o.name, sideBySide(want[i], got[i]))
						}
					})
				}
			}
		})
	}
}

// The catalog ranks in name order, but its positions (Names, Position,
// Query.Skip) are the client's: the proxy marks tools by their place in
// the request's tools array.
func TestPositionsFollowTheToolsArray(t *testing.T) {
	tools := shuffledTools(loadCatalogFile(t, "../testdata/catalog.json")[""], 3)
	in := slices.Clone(tools)
	c := compileTest(t, tools, Config{})
	t.Run("Compile leaves the caller's tools in their order", func(t *testing.T) {
		if !reflect.DeepEqual(tools, in) {
			t.Error("Compile reordered or changed the tools it was given")
		}
	})
	t.Run("Names lists the tools in the array's order", func(t *testing.T) {
		names := c.Names()
		for i := range tools {
			if names[i] != tools[i].Name {
				t.Fatalf("Names()[%d] = %s, want %s", i, names[i], tools[i].Name)
			}
		}
	})
	t.Run("Position is a tool's index in the array", func(t *testing.T) {
		for i := range tools {
			if p, ok := c.Position(tools[i].Name); !ok || p != i {
				t.Fatalf("Position(%s) = %d, %v; want %d", tools[i].Name, p, ok, i)
			}
		}
		if _, ok := c.Position("no_such_tool"); ok {
			t.Error("Position found a tool the catalog lacks")
		}
	})
	t.Run("Skip is asked about the array's positions", func(t *testing.T) {
		all, err := c.Search(context.Background(), Query{Text: "delete the branch", Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		top, _ := c.Position(all.Items[0].Name)
		var asked []int
		res, err := c.Search(context.Background(), Query{Text: "delete the branch", Limit: 3, Skip: func(p int) bool {
			asked = append(asked, p)
			return p == top
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			if it.Name == all.Items[0].Name {
				t.Errorf("%s was returned although Skip rejected its position %d", it.Name, top)
			}
		}
		if !slices.Contains(asked, top) {
			t.Errorf("Skip was asked about %v, not about %d", asked, top)
		}
	})
}

// reversedTools returns tools in reverse order.
func reversedTools(tools []Tool) []Tool {
	out := slices.Clone(tools)
	slices.Reverse(out)
	return out
}

// shuffledTools returns tools in a random order fixed by seed.
func shuffledTools(tools []Tool, seed uint64) []Tool {
	out := slices.Clone(tools)
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// sideBySide prints two rankings next to each other, a differing line
// marked.
func sideBySide(a, b Results) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "  confidence %.4f | %.4f\n", a.Confidence, b.Confidence)
	for i := range max(len(a.Items), len(b.Items)) {
		cell := func(r Results) string {
			if i >= len(r.Items) {
				return "-"
			}
			return fmt.Sprintf("%-28s %.17g", r.Items[i].Name, r.Items[i].Score)
		}
		mark := " "
		if cell(a) != cell(b) {
			mark = "*"
		}
		fmt.Fprintf(&sb, "%s %2d %-48s | %s\n", mark, i+1, cell(a), cell(b))
	}
	return sb.String()
}
