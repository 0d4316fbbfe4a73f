package selector

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/rewrite"
)

// testTools loads the hand-written catalog under testdata.
func testTools(t *testing.T) []Tool {
	t.Helper()
	return loadCatalogFile(t, "testdata/catalog.json")[""]
}

// loadCatalogFile reads a catalog file (the shared {id: [tools]} format or a
// plain tools array, under the id "") without enrichment, as the selector
// sees a catalog when no policy applies.
func loadCatalogFile(t testing.TB, path string) map[string][]Tool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := rewrite.ParseCatalog(data)
	if err != nil {
		t.Fatalf("parsing catalog %s: %v", path, err)
	}
	out := make(map[string][]Tool, len(defs))
	for id, rts := range defs {
		tools := make([]Tool, len(rts))
		for i, rt := range rts {
			tools[i] = Tool{Name: rt.Name, Description: rt.Description}
			for _, p := range rt.Params {
				tools[i].Params = append(tools[i].Params, Param{Name: p.Name, Description: p.Description})
			}
		}
		out[id] = tools
	}
	return out
}

func compileTest(t *testing.T, tools []Tool, cfg Config) *Catalog {
	t.Helper()
	c, err := Compile(context.Background(), tools, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rankOf returns the 1-based rank of name, or 0 when it is not returned.
func rankOf(t *testing.T, c *Catalog, q Query, name string) int {
	t.Helper()
	q.Limit = c.Len()
	res, err := c.Search(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return position(res, name)
}

// position is name's 1-based rank in res, or 0 when it is not there.
func position(res Results, name string) int {
	for i, it := range res.Items {
		if it.Name == name {
			return i + 1
		}
	}
	return 0
}

func TestLexicalFindsToolsByMeaningfulWords(t *testing.T) {
	c := compileTest(t, testTools(t), Config{})
	tests := []struct {
		name, query, want string
	}{
		{"a paraphrase of the description finds the tool", "capture an image of the web page", "browser_screenshot"},
		{"a camelCase identifier is split into words", "repoMergePullRequest", "repo_merge_pull_request"},
		{"stemming matches plural and verb forms", "merging pull requests", "repo_merge_pull_request"},
		{"the exact tool name wins", "use fs_move_file please", "fs_move_file"},
		{"parameter descriptions count", "CSS selector click", "browser_click"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := rankOf(t, c, Query{Text: tt.query}, tt.want); r != 1 {
				t.Errorf("%q: %s ranked %d, want 1", tt.query, tt.want, r)
			}
		})
	}
}

// TestEverySignalChangesARanking switches each signal on and off and checks
// that it moves the tool it is about in the expected direction.
func TestEverySignalChangesARanking(t *testing.T) {
	base := testTools(t)
	withMeta := func(name string, m Meta) []Tool {
		out := append([]Tool(nil), base...)
		for i := range out {
			if out[i].Name == name {
				out[i].Meta = m
			}
		}
		return out
	}
	off := func(f func(*Weights)) Weights {
		w := DefaultWeights()
		f(&w)
		return w
	}
	tests := []struct {
		name     string
		tools    []Tool
		cfg      Config
		disable  func(*Weights)
		query    Query
		tool     string
		wantRise bool // true: the signal lifts the tool; false: it sinks it
	}{
		{
			name:    "entity focus lifts tools that work on the session's entity",
			tools:   base,
			disable: func(w *Weights) { w.Focus = 0 },
			query:   Query{Text: "list everything", Focus: "channels"},
			tool:    "chat_list_channels", wantRise: true,
		},
		{
			name:    "recently used tools are sticky",
			tools:   base,
			disable: func(w *Weights) { w.Recency = 0 },
			query:   Query{Text: "file", Recent: []string{"fs_write_file"}},
			tool:    "fs_write_file", wantRise: true,
		},
		{
			name:  "an anchor pattern lifts its tools",
			tools: base,
			cfg: Config{Anchors: []Anchor{{
				Pattern: regexp.MustCompile(`(?i)\bPR\b`), Tools: []string{"repo_*pull_request*"}, Boost: 1,
			}}},
			disable: func(w *Weights) { w.Anchor = 0 },
			query:   Query{Text: "show my PR"},
			tool:    "repo_list_pull_requests", wantRise: true,
		},
		{
			name:    "related tools ride along with a top result",
			tools:   withMeta("cms_create_page", Meta{Related: []string{"cms_upload_media"}}),
			disable: func(w *Weights) { w.Related = 0 },
			query:   Query{Text: "create a new website page"},
			tool:    "cms_upload_media", wantRise: true,
		},
		{
			name:    "semantic similarity lifts a tool that shares no word with the query",
			tools:   base,
			disable: func(w *Weights) { w.Semantic = 0 },
			query:   Query{Text: "photograph the site"},
			tool:    "browser_screenshot", wantRise: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			on := tt.cfg
			on.Weights = DefaultWeights()
			offCfg := tt.cfg
			offCfg.Weights = off(tt.disable)
			rOn := rankOf(t, compileTest(t, tt.tools, on), tt.query, tt.tool)
			rOff := rankOf(t, compileTest(t, tt.tools, offCfg), tt.query, tt.tool)
			if rOff == 0 {
				rOff = len(tt.tools) + 1
			}
			if rOn == 0 {
				rOn = len(tt.tools) + 1
			}
			if tt.wantRise && rOn >= rOff {
				t.Errorf("rank with signal %d, without %d: want higher with", rOn, rOff)
			}
			if !tt.wantRise && rOn <= rOff {
				t.Errorf("rank with signal %d, without %d: want lower with", rOn, rOff)
			}
		})
	}
}

// nthTool returns the tool ranked n for q with default weights, so tests
// pick their subject from the ranking instead of hard-coding it.
func nthTool(t *testing.T, c *Catalog, q Query, n int) string {
	t.Helper()
	q.Limit = n
	res, err := c.Search(context.Background(), q)
	if err != nil || len(res.Items) < n {
		t.Fatalf("search %q: %v, %d items", q.Text, err, len(res.Items))
	}
	return res.Items[n-1].Name
}

func TestTransitionsLiftTheUsualNextTool(t *testing.T) {
	tools := testTools(t)
	q := Query{Text: "add content to the website page", Last: "cms_create_page"}
	target := nthTool(t, compileTest(t, tools, Config{}), q, 4)
	t.Run("a seeded transition lifts the next tool and switching it off does not", func(t *testing.T) {
		seed := Config{Transitions: map[string]map[string]float64{"cms_create_page": {target: 0.9}}}
		on := rankOf(t, compileTest(t, tools, seed), q, target)
		seed.Weights = DefaultWeights()
		seed.Weights.Transition = 0
		off := rankOf(t, compileTest(t, tools, seed), q, target)
		if on >= off || off != 4 {
			t.Errorf("rank with transition %d, without %d", on, off)
		}
	})
	t.Run("observed transitions lift the next tool without a seed", func(t *testing.T) {
		c := compileTest(t, tools, Config{})
		learned := NewTransitions(16)
		for range 10 {
			learned.Observe("cms_create_page", target)
		}
		q := q
		q.Learned = learned
		if r := rankOf(t, c, q, target); r >= 4 {
			t.Errorf("rank after observing the transition %d, want above 4", r)
		}
	})
}

func TestAvoidWhenSinksAToolTheQueryWarnsAgainst(t *testing.T) {
	tools := testTools(t)
	q := Query{Text: "delete the old file but keep the file backup"}
	top := nthTool(t, compileTest(t, tools, Config{}), q, 1)
	for i := range tools {
		if tools[i].Name == top {
			tools[i].Meta.AvoidWhen = []string{"keep the file"}
		}
	}
	on := rankOf(t, compileTest(t, tools, Config{}), q, top)
	w := DefaultWeights()
	w.Avoid = 0
	off := rankOf(t, compileTest(t, tools, Config{Weights: w}), q, top)
	if on <= off {
		t.Errorf("rank with avoid_when %d, without %d: want lower with", on, off)
	}
}

func TestSearchHonoursSkipAndLimit(t *testing.T) {
	c := compileTest(t, testTools(t), Config{})
	skipped, ok := c.Position("fs_read_file")
	if !ok {
		t.Fatal("fs_read_file is not in the test catalog")
	}
	res, err := c.Search(context.Background(), Query{
		Text: "file", Limit: 3,
		Skip: func(p int) bool { return p == skipped },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 3 {
		t.Errorf("got %d items, want 3", len(res.Items))
	}
	for _, it := range res.Items {
		if it.Name == "fs_read_file" {
			t.Error("an excluded tool was returned")
		}
	}
}

func TestConfidenceIsLowerForAVagueQuery(t *testing.T) {
	c := compileTest(t, testTools(t), Config{})
	sharp, _ := c.Search(context.Background(), Query{Text: "merge the pull request"})
	vague, _ := c.Search(context.Background(), Query{Text: "do the thing with the stuff quickly"})
	if vague.Confidence >= sharp.Confidence {
		t.Errorf("vague confidence %.2f >= sharp %.2f", vague.Confidence, sharp.Confidence)
	}
}

func TestPreselectUsesEarlierTurnsAsContext(t *testing.T) {
	c := compileTest(t, testTools(t), Config{})
	ctx := context.Background()
	alone, _ := c.Preselect(ctx, []string{"now publish it"}, c.Len(), Query{})
	withCtx, _ := c.Preselect(ctx, []string{"I am building a page on the website", "now publish it"}, c.Len(), Query{})
	pos := func(r Results) int {
		for i, it := range r.Items {
			if it.Name == "cms_publish_page" {
				return i + 1
			}
		}
		return len(r.Items) + 1
	}
	if pos(withCtx) > pos(alone) || pos(withCtx) != 1 {
		t.Errorf("cms_publish_page at %d with context, %d alone", pos(withCtx), pos(alone))
	}
}

func TestDecomposeSplitsOnlyRealSeams(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		parts int
	}{
		{"a plain request stays whole", "search and replace text in a file", 0},
		{"two sentences are two parts", "Create a page for the launch. Then upload the hero image to it.", 2},
		{"'and also' joins two tasks", "find the weather in Paris and also book a table for two", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decompose(tt.text, decomposeMinWords); len(got) != tt.parts {
				t.Errorf("decompose(%q) = %q, want %d parts", tt.text, got, tt.parts)
			}
		})
	}
}

func TestAreasSummariseTheCatalog(t *testing.T) {
	c := compileTest(t, testTools(t), Config{})
	areas := c.Areas(3)
	if len(areas) != 3 {
		t.Fatalf("Areas(3) = %v", areas)
	}
	for _, a := range areas {
		n := 0
		for _, name := range c.Names() {
			if areaLabel(name) == a {
				n++
			}
		}
		if n < 2 {
			t.Errorf("area %q covers %d tools, want a shared prefix", a, n)
		}
	}
}

func TestAnAreaIsAPrefixOrTheWordAfterAVerb(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"playwright_click", "playwright"},
		{"desktop-commander__read_file", "desktop-commander"},
		{"get_stock_price_global_market", "stock"},
		{"list_notifications", "notifications"},
		{"Search_Repositories", "repositories"},
		{"get__weather", "weather"},
		{"getBaziDetail", ""},
		{"create-research-plan", ""},
	} {
		t.Run(tc.name+" counts for "+strconv.Quote(tc.want), func(t *testing.T) {
			if got := areaLabel(tc.name); got != tc.want {
				t.Errorf("areaLabel(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
	t.Run("a catalog of verbs and objects is summed up by its objects", func(t *testing.T) {
		var tools []Tool
		for _, n := range []string{"get_stock_price", "list_stock_alerts", "get_weather", "search_weather_alerts", "create_issue", "get_issue"} {
			tools = append(tools, Tool{Name: n, Description: "A tool."})
		}
		got := compileTest(t, tools, Config{}).Areas(5)
		if !slices.Equal(got, []string{"issue", "stock", "weather"}) {
			t.Errorf("areas %v, want [issue stock weather]", got)
		}
	})
}

func TestLexLeadFindsTheWinnerAndItsMargin(t *testing.T) {
	tests := []struct {
		name       string
		score      map[int32]float64
		wantTop    int32
		wantMargin float64
	}{
		{"a clear winner gets its margin over the runner-up", map[int32]float64{3: 1, 5: 0.25, 7: 0.5}, 3, 0.5},
		{"a tie gives no margin", map[int32]float64{4: 1, 2: 1}, 2, 0},
		{"a single candidate has the whole margin", map[int32]float64{9: 0.8}, 9, 1},
		{"no candidates means no winner", map[int32]float64{}, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lex lexScores
			for d, v := range tt.score {
				lex.order, lex.score = append(lex.order, d), append(lex.score, v)
			}
			top, m := lexLead(lex)
			if top != tt.wantTop || m != tt.wantMargin {
				t.Errorf("lexLead = %d, %v; want %d, %v", top, m, tt.wantTop, tt.wantMargin)
			}
		})
	}
}

func TestRankScoredRanksByScoreThenDocument(t *testing.T) {
	want := []int32{2, 6, 0, 3, 5} // by score, ties by document
	for _, tc := range []struct {
		name   string
		docs   []int32
		scores []float64
	}{
		{"a list already in rank order keeps it", []int32{2, 6, 0, 3, 5}, []float64{0.9, 0.9, 0.5, 0.5, 0.1}},
		{"a shuffled list is sorted", []int32{5, 3, 6, 0, 2}, []float64{0.1, 0.5, 0.9, 0.5, 0.9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ranks := make([]int32, 8)
			got := rankScored(tc.docs, tc.scores, ranks)
			if !slices.Equal(got, want) {
				t.Fatalf("rankScored = %v, want %v", got, want)
			}
			for i, d := range want {
				if ranks[d] != int32(i+1) {
					t.Errorf("rank of document %d = %d, want %d", d, ranks[d], i+1)
				}
			}
			if ranks[1] != 0 || ranks[4] != 0 || ranks[7] != 0 {
				t.Errorf("documents not listed got ranks: %v", ranks)
			}
		})
	}
}

func TestMergedLexicalScoresCombineOrJoin(t *testing.T) {
	ls := lexScores{order: []int32{4, 1}, score: []float64{1, 0.5}}
	at := make([]int32, 8)
	ls.merge(lexScores{order: []int32{1, 7}, score: []float64{1, 0.2}}, at, func(old, v float64) float64 { return old + v })
	if !slices.Equal(ls.order, []int32{4, 1, 7}) || !slices.Equal(ls.score, []float64{1, 1.5, 0.2}) {
		t.Errorf("merged = %v %v, want [4 1 7] [1 1.5 0.2]", ls.order, ls.score)
	}
	if slices.ContainsFunc(at, func(v int32) bool { return v != 0 }) {
		t.Errorf("the slots were left set: %v", at)
	}
}

// TestLexicalLeadKeepsAClearWinnerFirst shows the lead bonus change a
// ranking: without it, a tool that is only close lexically can take rank
// 1 through semantic rank fusion.
func TestLexicalLeadKeepsAClearWinnerFirst(t *testing.T) {
	c := compileTest(t, testTools(t), Config{})
	res, err := c.Search(context.Background(), Query{Text: "merging pull requests", Limit: 3, Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) == 0 || res.Items[0].Signals["lead"] <= 0 {
		t.Fatalf("top result %+v has no lead bonus", res.Items)
	}
	if res.Items[0].Name != "repo_merge_pull_request" {
		t.Errorf("top = %s, want repo_merge_pull_request", res.Items[0].Name)
	}
}

// TestQuerySpellingAOneWordNameFindsIt: a tool whose name has no separator
// (read, sendMessage) is found first when a short query spells its name, in
// any case, against longer names that share or split its words; a word of
// a long request that a tool happens to be named after is prose and gets no
// whole-name match.
func TestQuerySpellingAOneWordNameFindsIt(t *testing.T) {
	tools := []Tool{
		{Name: "read", Description: "Read the aquarium sensor telemetry."},
		{Name: "sendMessage", Description: "Deliver a note to the pager of the on-call engineer."},
		{Name: "now", Description: "Tells the time of a city."},
	}
	for _, s := range []string{"text_file", "media_file", "multiple_files", "resource", "config", "env_vars", "clipboard", "logs", "metrics", "calendar"} {
		tools = append(tools, Tool{Name: "read_" + s, Description: "Read the " + strings.ReplaceAll(s, "_", " ") + "."})
	}
	for _, s := range []string{"chat", "mail", "sms", "slack", "teams", "discord", "telegram", "whatsapp", "push", "fax"} {
		tools = append(tools, Tool{Name: "send_" + s + "_message", Description: "Send a " + s + " message."})
	}
	c := compileTest(t, tools, Config{})
	tests := []struct {
		name, query, tool string
		wantFirst         bool
	}{
		{"a one-word query that is a tool's name ranks that tool first", "read", "read", true},
		{"a camelCase name spelled as written ranks first", "sendMessage", "sendMessage", true},
		{"a camelCase name spelled in lower case ranks first", "sendmessage", "sendMessage", true},
		{"a name spelled in upper case ranks first", "READ", "read", true},
		{"a name in a short query of other words ranks first", "read tool please", "read", true},
		{"a camelCase name in a long request ranks first", "please page the on call person with sendMessage about the outage tonight", "sendMessage", true},
		{"a prose word of a long request that a tool is named after does not lift it", "what is the weather in Paris right now and tomorrow", "now", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lq, _ := c.analyzeQuery(tt.query, 1)
			spelled := slices.Contains(lq.raw, strings.ToLower(tt.tool))
			if spelled != tt.wantFirst {
				t.Errorf("query %q matches the whole name %q: %v, want %v", tt.query, tt.tool, spelled, tt.wantFirst)
			}
			if r := rankOf(t, c, Query{Text: tt.query}, tt.tool); tt.wantFirst && r != 1 {
				t.Errorf("query %q ranks %s at %d, want 1", tt.query, tt.tool, r)
			}
		})
	}
}
