package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadReportsProblemsWithPositions(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		extra map[string]string
		want  []string // "LINE:COL: substring of the message", in order
	}{
		{
			name: "an unclosed flow list is a syntax error at the bracket",
			src:  "core: [a, b\n",
			want: []string{"1:7: sequence end token ']' not found"},
		},
		{
			name: "a tab indentation is a syntax error on its line",
			src:  "gateway:\n\tmode: search\n",
			want: []string{"2:"},
		},
		{
			name: "an unknown top-level key names the key and its column",
			src:  "core: []\nmodes: search\n",
			want: []string{`2:1: unknown key "modes" in the top level`},
		},
		{
			name: "an unknown nested key is reported where it is written",
			src:  "gateway:\n  timeouts:\n    conect: 1s\n",
			want: []string{`3:5: unknown key "conect" in gateway.timeouts`},
		},
		{
			name: "risk catastrophic is a bad enum at the value",
			src:  "tools:\n  delete_repo:\n    risk: catastrophic\n",
			want: []string{`3:11: tools.delete_repo.risk: unknown risk "catastrophic"`},
		},
		{
			name: "an unknown mode is a bad enum",
			src:  "gateway:\n  mode: hybird\n",
			want: []string{`2:9: gateway.mode: unknown mode "hybird"`},
		},
		{
			name: "an unterminated glob class is a bad glob",
			src:  "deny:\n  - ok_*\n  - \"[abc\"\n",
			want: []string{`3:5: deny[1]: bad glob "[abc"`},
		},
		{
			name: "a reversed class range in a deny is a bad glob, not a rule that matches nothing",
			src:  "deny: [\"[z-a]*\"]\n",
			want: []string{`1:8: deny[0]: bad glob "[z-a]*": reversed range z-a`},
		},
		{
			name: "a reversed class range in an allow is a bad glob, not a rule that hides everything",
			src:  "allow:\n  - \"[!9-0]_*\"\n",
			want: []string{`2:5: allow[0]: bad glob "[!9-0]_*": reversed range 9-0`},
		},
		{
			name: "a bad anchor regex is reported at the pattern",
			src:  "anchors:\n  - pattern: \"(open\"\n    tools: [x]\n",
			want: []string{"2:14: anchors[0].pattern: bad regular expression"},
		},
		{
			name: "a missing hints file is reported at the hints key's value",
			src:  "categories:\n  code:\n    hints: hints/nope.md\n",
			want: []string{"3:12: categories.code.hints: hints file hints/nope.md: no such file"},
		},
		{
			name: "a wrongly typed value is reported at the value",
			src:  "gateway:\n  min_tools: many\n",
			want: []string{"2:14: gateway.min_tools:"},
		},
		{
			name: "a fractional min_tools is an error, not truncated",
			src:  "gateway:\n  min_tools: 20.9\n",
			want: []string{"2:14: gateway.min_tools: want a whole number, got 20.9"},
		},
		{
			name: "every integer setting refuses a fraction, each at its value",
			src: "gateway:\n  max_rounds: 2.5\n  max_active: 3.5\n  preselect: 6.5\n  follow_up: 1.5\n" +
				"  passthrough_history_tokens: 9.5\n  body_limit: 1024.5\n  retries: 0.5\n" +
				"search:\n  limit: 3.5\nsessions:\n  max_entries: 10.5\n" +
				"profiles:\n  - gateway: {preselect: 4.5}\n",
			want: []string{
				"2:15: gateway.max_rounds: want a whole number, got 2.5",
				"3:15: gateway.max_active: want a whole number",
				"4:14: gateway.preselect: want a whole number",
				"5:14: gateway.follow_up: want a whole number",
				"6:31: gateway.passthrough_history_tokens: want a whole number",
				"7:15: gateway.body_limit: want a whole number",
				"8:12: gateway.retries: want a whole number",
				"10:10: search.limit: want a whole number",
				"12:16: sessions.max_entries: want a whole number",
				"14:26: profiles[0].gateway.preselect: want a whole number",
			},
		},
		{
			name: "a quoted fraction is no way around it",
			src:  "gateway:\n  min_tools: \"20.9\"\n",
			want: []string{"2:14: gateway.min_tools: want a whole number, got 20.9"},
		},
		{
			name: "not-a-number is not a whole number",
			src:  "gateway:\n  min_tools: .nan\n",
			want: []string{"2:14: gateway.min_tools: want a whole number, got .nan"},
		},
		{
			name: "minus infinity is not a whole number either",
			src:  "gateway:\n  preselect: -.inf\n",
			want: []string{"2:14: gateway.preselect: want a whole number, got -.inf"},
		},
		{
			name: "a byte-order mark does not shift the columns of line 1",
			src:  "\ufeffgateway: {mode: x}\n",
			want: []string{`1:17: gateway.mode: unknown mode "x"`},
		},
		{
			name: "a bad duration is reported at the value",
			src:  "sessions:\n  ttl: 5x\n",
			want: []string{`2:8: sessions.ttl: want a duration such as "10s"`},
		},
		{
			name: "a session ttl too short for the store to sweep is reported",
			src:  "sessions:\n  ttl: 50ns\n",
			want: []string{"2:8: sessions.ttl: must be a duration of at least 1s, such as 1h"},
		},
		{
			name: "a scalar where a list belongs is reported",
			src:  "core: github_*\n",
			want: []string{"1:7: core must be a list"},
		},
		{
			name: "a duplicate key is reported at the second one",
			src:  "gateway:\n  mode: search\n  mode: hybrid\n",
			want: []string{`3:3: mapping key "mode" already defined at [2:3]`},
		},
		{
			name: "every problem is reported, not just the first",
			src:  "gateway:\n  mode: x\n  bogus: 1\ntools:\n  a:\n    risk: huge\ndeny: [\"[\"]\n",
			want: []string{"2:9: gateway.mode", `3:3: unknown key "bogus"`, "6:11: tools.a.risk", "7:8: deny[0]"},
		},
		{
			name: "a profile cannot set listen and its unknown keys are found",
			src:  "profiles:\n  - match: {model: x}\n    gateway: {listen: ':1'}\n    colour: red\n",
			want: []string{"3:23: profiles[0].gateway.listen: cannot be set per profile", `4:5: unknown key "colour" in profiles[0]`},
		},
		{
			name: "a profile cannot set what is read at start-up or before it is chosen",
			src:  "profiles:\n  - match: {model: x}\n    gateway:\n      upstream: http://other:1/v1\n      upstream_key: k\n      body_limit: 10\n      timeouts: {connect: 1s, first_byte: 1s, idle: 5s}\n    search:\n      embeddings: {provider: openai, url: http://e:1/v1, model: m, key: k, cache_dir: c, query_timeout: 5s}\n",
			want: []string{
				"4:17: profiles[0].gateway.upstream: cannot be set per profile: the upstream URL is read at start-up",
				"5:21: profiles[0].gateway.upstream_key: cannot be set per profile",
				"6:19: profiles[0].gateway.body_limit: cannot be set per profile: the body is read before",
				"7:27: profiles[0].gateway.timeouts.connect: cannot be set per profile",
				"7:43: profiles[0].gateway.timeouts.first_byte: cannot be set per profile",
				"9:43: profiles[0].search.embeddings.url: cannot be set per profile",
				"9:65: profiles[0].search.embeddings.model",
				"9:73: profiles[0].search.embeddings.key",
				"9:87: profiles[0].search.embeddings.cache_dir",
				"9:105: profiles[0].search.embeddings.query_timeout",
			},
		},
		{
			name: "a profile cannot set the embeddings disk cache bound",
			src:  "profiles:\n  - match: {model: x}\n    search:\n      embeddings: {cache_max_mb: 64}\n",
			want: []string{"4:34: profiles[0].search.embeddings.cache_max_mb: cannot be set per profile: the embeddings client is built at start-up"},
		},
		{
			name: "an embeddings disk cache bound written in bytes is an error",
			src:  "search:\n  embeddings:\n    cache_max_mb: 1073741824\n",
			want: []string{"3:19: search.embeddings.cache_max_mb: must be at most 1048576 (1 TiB); the value is in MiB"},
		},
		{
			name: "an embeddings query timeout of 0s is an error",
			src:  "search:\n  embeddings: {query_timeout: 0s}\n",
			want: []string{"2:31: search.embeddings.query_timeout: must be a duration above 0 and at most 1m"},
		},
		{
			name: "an embeddings query timeout over a minute is an error",
			src:  "search:\n  embeddings:\n    query_timeout: 90s\n",
			want: []string{"3:20: search.embeddings.query_timeout: must be a duration above 0 and at most 1m"},
		},
		{
			name: "a profile's bad enum is located inside the profile",
			src:  "profiles:\n  - tools:\n      x: {risk: nuclear}\n",
			want: []string{`3:17: profiles[0].tools.x.risk: unknown risk "nuclear"`},
		},
		{
			name: "pinning an unknown bundle is an error",
			src:  "bundles:\n  git: {tools: [git_*]}\npin: [git, gti]\n",
			want: []string{`3:12: pin[1]: no bundle named "gti"`},
		},
		{
			name:  "hints and text together are ambiguous",
			src:   "categories:\n  c:\n    hints: hints/c.md\n    text: inline\n",
			extra: map[string]string{"hints/c.md": "x"},
			want:  []string{"4:11: categories.c.text: set hints (a file) or text, not both"},
		},
		{
			name: "a transition probability above one is an error",
			src:  "transitions:\n  a:\n    b: 1.5\n",
			want: []string{"3:8: transitions.a.b: probability 1.5"},
		},
		{
			name: "a listen port out of range is an error, as serve refuses it",
			src:  "gateway:\n  listen: 127.0.0.1:99999\n",
			want: []string{"2:11: gateway.listen: want host:port such as 127.0.0.1:8080 (address 99999: invalid port)"},
		},
		{
			name: "a bad upstream URL is an error",
			src:  "gateway:\n  upstream: ftp://x/v1\n",
			want: []string{"2:13: gateway.upstream: want an http:// or https:// URL"},
		},
		{
			name: "an unknown usage is an error naming the choices",
			src:  "gateway:\n  usage: last\n",
			want: []string{"2:10: gateway.usage: unknown usage \"last\"; want summed or context"},
		},
		{
			name: "an unknown search_round is an error naming the choices",
			src:  "gateway:\n  search_round: some\n",
			want: []string{"2:17: gateway.search_round: unknown search round \"some\"; want found or all"},
		},
		{
			name: "a negative follow_up is an error",
			src:  "gateway:\n  follow_up: -1\n",
			want: []string{"2:14: gateway.follow_up: must be >= 0"},
		},
		{
			name: "a negative passthrough_history_tokens is an error",
			src:  "gateway:\n  passthrough_history_tokens: -5\n",
			want: []string{"2:31: gateway.passthrough_history_tokens: must be >= 0"},
		},
		{
			name: "a done weight above one is an error",
			src:  "search:\n  weights:\n    done: 1.5\n",
			want: []string{"3:11: search.weights.done: must be between 0 and 1"},
		},
		{
			name: "a negative habit weight is an error",
			src:  "search:\n  weights:\n    habit: -1\n",
			want: []string{"3:12: search.weights.habit: must be a number >= 0"},
		},
		{
			name: "an embeddings key naming an unset environment variable is an error",
			src:  "search:\n  embeddings:\n    provider: openai\n    key: $TOOLGATE_TEST_UNSET_KEY\n",
			want: []string{"4:10: search.embeddings.key: environment variable TOOLGATE_TEST_UNSET_KEY is not set"},
		},
		{
			name: "an embeddings key naming an unset environment variable in braces is an error",
			src:  "search:\n  embeddings: {provider: openai, key: \"${TOOLGATE_TEST_UNSET_KEY}\"}\n",
			want: []string{"2:39: search.embeddings.key: environment variable TOOLGATE_TEST_UNSET_KEY is not set"},
		},
		{
			name: "an upstream key naming an unset environment variable is an error, not a pass-through of clients' keys",
			src:  "gateway:\n  upstream_key: $TOOLGATE_TEST_UNSET_KEY\n",
			want: []string{"2:17: gateway.upstream_key: environment variable TOOLGATE_TEST_UNSET_KEY is not set"},
		},
		{
			name: "an upstream key naming an unset environment variable in braces is an error",
			src:  "gateway: {upstream_key: \"${TOOLGATE_TEST_UNSET_KEY}\"}\n",
			want: []string{"1:25: gateway.upstream_key: environment variable TOOLGATE_TEST_UNSET_KEY is not set"},
		},
		{
			name: "a null profile is an error, not a catch-all that shadows the profiles after it",
			src:  "profiles: [~, {match: {model: x}}]\n",
			want: []string{"1:12: profiles[0] is empty (a stray '-' or null), which would match every request"},
		},
		{
			name: "a stray dash in profiles is an error on its line",
			src:  "profiles:\n  -\n  - name: small-models\n    match: {model: \"gpt-4o-mini*\"}\n",
			want: []string{"2:4: profiles[0] is empty"},
		},
		{
			name: "two documents in one file are an error",
			src:  "core: [a]\n---\ncore: [b]\n",
			want: []string{"3:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.src, tt.extra)
			if err == nil {
				t.Fatal("Load accepted a bad file")
			}
			got := problemsOf(t, err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				pos, msg, _ := strings.Cut(w, ": ")
				if !strings.HasPrefix(got[i], pos) || !strings.Contains(got[i], msg) {
					t.Errorf("problem %d = %q, want position %s and %q", i, got[i], pos, msg)
				}
			}
		})
	}
}

// TestProblemsSayWhatToWrite: a message names the setting as the file
// writes it and says what to write there, at FILE:LINE:COL.
func TestProblemsSayWhatToWrite(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // "LINE:COL: the message, whole"
	}{
		{"a bad glob as a tools key is named without the decoder's key marker",
			"tools:\n  \"bad[\": {hint: x}\n", `2:3: tools.bad[: bad glob "bad[": unterminated character class '['`},
		{"a bundle without tools is named without the decoder's key marker",
			"bundles:\n  empty: {description: d}\n", `2:3: bundles.empty: bundle "empty" has no tools`},
		{"a duration written as a bare number says to write one with a unit",
			"gateway:\n  timeouts: {idle: 10}\n", `2:20: gateway.timeouts.idle: want a duration such as "10s" (a number and a unit: ms, s, m or h), got 10`},
		{"a duration that does not parse says the same",
			"sessions: {ttl: soon}\n", `1:17: sessions.ttl: want a duration such as "10s" (a number and a unit: ms, s, m or h), got soon`},
		{"a bool written as yes says that YAML 1.2 wants true or false",
			"gateway:\n  explore: yes\n", `2:12: gateway.explore: want true or false (YAML 1.2: yes, no, on and off are not booleans), got yes`},
		{"a bool written as a number says the same",
			"gateway: {scale_with_catalog: 1}\n", `1:31: gateway.scale_with_catalog: want true or false (YAML 1.2: yes, no, on and off are not booleans), got 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.src, nil)
			if err == nil {
				t.Fatal("Load accepted a bad file")
			}
			got := problemsOf(t, err)
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("problems %q, want [%q]", got, tt.want)
			}
		})
	}
}

func TestErrorsPrintOneFileLineColPerLine(t *testing.T) {
	_, err := loadString(t, "gateway:\n  mode: x\ntools:\n  a: {risk: b}\n", nil)
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", err.Error())
	}
	for _, l := range lines {
		parts := strings.SplitN(l, ":", 4)
		if len(parts) < 4 || !strings.HasSuffix(parts[0], "tools.yaml") || parts[1] == "" || parts[2] == "" {
			t.Errorf("line %q is not FILE:LINE:COL: message", l)
		}
	}
}

func TestLoadOfAMissingFileNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := Load(path)
	var perr *Errors
	if !errors.As(err, &perr) || !strings.HasPrefix(err.Error(), path+": reading policy") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadRefusesAFileWithoutSettings(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{"a zero-byte file, as a truncated save leaves it, is refused", ""},
		{"a file of blank lines is refused", "\n  \n\t\n"},
		{"a file of comments only is refused", "# deny: [\"*delete*\"]\n# nothing else\n"},
		{"a lone document marker is refused", "---\n"},
		{"an explicit null document is refused", "~\n"},
		{"a byte-order mark alone is refused", "\ufeff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"tools.yaml": tt.src})
			path := filepath.Join(dir, "tools.yaml")
			_, err := Load(path)
			var perr *Errors
			if !errors.As(err, &perr) || len(perr.Problems) != 1 {
				t.Fatalf("got %v, want one problem", err)
			}
			want := path + ": the policy file is empty"
			if got := err.Error(); !strings.HasPrefix(got, want) || !strings.Contains(got, "write {} for the built-in defaults") {
				t.Errorf("got %q, want %q and how to ask for the defaults", got, want)
			}
		})
	}
}

func TestLoadCapsTheFileSize(t *testing.T) {
	const limit = 1 << 20 // 1 MiB
	// padded is a valid policy of exactly n bytes: a deny rule, then a
	// comment, which costs the decoder next to nothing.
	padded := func(n int) string {
		head := "deny: [\"*delete*\"]\n# "
		return head + strings.Repeat("x", n-len(head)-1) + "\n"
	}
	t.Run("a file of exactly 1 MiB loads", func(t *testing.T) {
		s := mustLoad(t, padded(limit), nil)
		if s.Decide("delete_repo", "delete it").Visible {
			t.Error("the deny did not apply")
		}
	})
	t.Run("a file one byte over 1 MiB is refused, naming the file and the limit", func(t *testing.T) {
		dir := writeFiles(t, map[string]string{"tools.yaml": padded(limit + 1)})
		path := filepath.Join(dir, "tools.yaml")
		_, err := Load(path)
		var perr *Errors
		if !errors.As(err, &perr) || len(perr.Problems) != 1 {
			t.Fatalf("got %v, want one problem", err)
		}
		if got := err.Error(); !strings.HasPrefix(got, path+": ") || !strings.Contains(got, "1 MiB") || !strings.Contains(got, "1048576 bytes") {
			t.Errorf("got %q, want the file, 1 MiB and 1048576 bytes", got)
		}
	})
}

func TestDefaults(t *testing.T) {
	t.Run("no file at all is the built-in policy", func(t *testing.T) {
		s, err := Load("")
		if err != nil {
			t.Fatal(err)
		}
		if s.Source() != "built-in" || s.Generation() != 0 {
			t.Errorf("source %q generation %d", s.Source(), s.Generation())
		}
	})
	t.Run("a file holding {} keeps every default", func(t *testing.T) {
		s := mustLoad(t, "# the built-in defaults\n{}\n", nil)
		d := Default()
		if s.Gateway != d.Gateway || s.Sessions != d.Sessions || s.Search != d.Search {
			t.Errorf("empty file differs from Default:\n%+v\n%+v", s.Gateway, d.Gateway)
		}
	})
	t.Run("the defaults are the documented ones", func(t *testing.T) {
		g := Default().Gateway
		want := Gateway{
			Listen: "127.0.0.1:8080", Upstream: "https://api.openai.com/v1", Mode: ModeHybrid,
			MinTools: 12, MaxRounds: 4, MaxActive: 32, Preselect: 6, FollowUp: 2, SearchRound: SearchRoundFound, Usage: UsageSummed, ScaleWithCatalog: true, BodyLimit: 32 << 20,
			ConnectTimeout: 10 * time.Second, HeaderTimeout: 10 * time.Minute,
			IdleTimeout: 120 * time.Second, RequestTimeout: 10 * time.Minute, Retries: 1,
		}
		if g != want {
			t.Errorf("got %+v\nwant %+v", g, want)
		}
		if s := Default().Sessions; s.TTL != time.Hour || s.MaxEntries != 10000 || s.Store != "memory" {
			t.Errorf("sessions %+v", s)
		}
		if s := Default().Search; s.Limit != 4 || s.Weights.Lexical != 1 || s.Embeddings.Provider != "offline" {
			t.Errorf("search %+v", s)
		}
	})
	t.Run("setting one field keeps its siblings' defaults", func(t *testing.T) {
		s := mustLoad(t, "gateway:\n  timeouts:\n    idle: 5s\n  mode: search\n", nil)
		if s.Gateway.IdleTimeout != 5*time.Second || s.Gateway.ConnectTimeout != 10*time.Second || s.Gateway.Mode != ModeSearch || s.Gateway.MinTools != 12 {
			t.Errorf("got %+v", s.Gateway)
		}
	})
	t.Run("a whole number written with a decimal point or an exponent is accepted", func(t *testing.T) {
		s := mustLoad(t, "gateway:\n  min_tools: 20.0\n  body_limit: 1e6\n", nil)
		if s.Gateway.MinTools != 20 || s.Gateway.BodyLimit != 1000000 {
			t.Errorf("min_tools %d body_limit %d", s.Gateway.MinTools, s.Gateway.BodyLimit)
		}
	})
	t.Run("a byte-order mark before the first key is skipped", func(t *testing.T) {
		s := mustLoad(t, "\ufeffdeny: [\"delete_*\"]\n", nil)
		if s.Decide("delete_repo", "delete it").Visible {
			t.Error("the deny after the byte-order mark does not apply")
		}
	})
	t.Run("a key with no value keeps the default", func(t *testing.T) {
		s := mustLoad(t, "gateway:\nsessions:\n  ttl:\n", nil)
		if s.Gateway.Mode != ModeHybrid || s.Sessions.TTL != time.Hour {
			t.Errorf("got %+v %+v", s.Gateway, s.Sessions)
		}
	})
	t.Run("an environment reference fills the upstream key", func(t *testing.T) {
		t.Setenv("TOOLGATE_TEST_KEY", "sk-test")
		s := mustLoad(t, "gateway:\n  upstream_key: ${TOOLGATE_TEST_KEY}\n", nil)
		if s.Gateway.UpstreamKey != "sk-test" {
			t.Errorf("got %q", s.Gateway.UpstreamKey)
		}
	})
	t.Run("an environment reference fills the embeddings key", func(t *testing.T) {
		t.Setenv("TOOLGATE_TEST_KEY", "sk-test")
		s := mustLoad(t, "search:\n  embeddings: {provider: openai, key: $TOOLGATE_TEST_KEY}\n", nil)
		if s.Search.Embeddings.Key != "sk-test" {
			t.Errorf("got %q", s.Search.Embeddings.Key)
		}
	})
	t.Run("an unset environment reference is no error while the provider is offline", func(t *testing.T) {
		mustLoad(t, "search:\n  embeddings: {provider: offline, key: $TOOLGATE_TEST_UNSET_KEY}\n", nil)
	})
	for _, tc := range []struct {
		name, src string
		want      int
	}{
		{"an unset embeddings disk cache bound is 1024 MiB", "{}\n", 1024},
		{"an embeddings disk cache bound of 0 means the default", "search:\n  embeddings: {cache_max_mb: 0}\n", 1024},
		{"a negative embeddings disk cache bound means the default", "search:\n  embeddings: {cache_max_mb: -5}\n", 1024},
		{"an embeddings disk cache bound is kept as written", "search:\n  embeddings: {cache_max_mb: 64}\n", 64},
		{"the largest embeddings disk cache bound is accepted", "search:\n  embeddings: {cache_max_mb: 1048576}\n", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustLoad(t, tc.src, nil).Search.Embeddings.CacheMaxMB; got != tc.want {
				t.Errorf("cache_max_mb = %d, want %d", got, tc.want)
			}
		})
	}
	t.Run("anchors without a boost get boost 1", func(t *testing.T) {
		s := mustLoad(t, "anchors:\n  - {pattern: x, tools: [a]}\n  - {pattern: y, tools: [a], boost: 2.5}\n", nil)
		if s.anchors[0].boost != 1 || s.anchors[1].boost != 2.5 {
			t.Errorf("boosts %v %v", s.anchors[0].boost, s.anchors[1].boost)
		}
	})
	t.Run("yaml anchors and aliases are resolved", func(t *testing.T) {
		s := mustLoad(t, "core: &c [a_*]\nbundles:\n  b: {tools: *c}\n", nil)
		if !s.Bundles()[0].Match("a_x") {
			t.Error("alias not resolved")
		}
	})
}

func TestGenerationChangesOnEveryLoad(t *testing.T) {
	dir := writeFiles(t, map[string]string{"tools.yaml": "profiles:\n  - match: {model: a}\n"})
	a, err := Load(filepath.Join(dir, "tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(filepath.Join(dir, "tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pa := a.ForRequest(Request{Model: "a"})
	if a.Generation() == b.Generation() || a.Generation() == pa.Generation() || a.Generation() == 0 {
		t.Errorf("generations a=%d b=%d profile=%d", a.Generation(), b.Generation(), pa.Generation())
	}
}

func TestHintsAreLoadedRelativeToTheConfigFile(t *testing.T) {
	s := mustLoad(t, "categories:\n  code:\n    hints: hints/code.md\n  web:\n    text: \"  Open the page first.  \"\n",
		map[string]string{"hints/code.md": "\n# Code hosting\nSearch before creating an issue.\n"})
	if got := s.Hints("code"); got != "# Code hosting\nSearch before creating an issue." {
		t.Errorf("code hints %q", got)
	}
	if got := s.Hints("web"); got != "Open the page first." {
		t.Errorf("web hints %q", got)
	}
	if got := s.Hints("nope"); got != "" {
		t.Errorf("unknown category hints %q", got)
	}
}

func TestAHintsFileIsReadAsAnEditorShowsIt(t *testing.T) {
	tests := []struct{ name, file, want string }{
		{"a file saved with a byte-order mark reads without it", "\xef\xbb\xbfOpen the page first.\n", "Open the page first."},
		{"a file saved with CRLF line ends reads with LF", "Open the page.\r\nThen read it.\r\n", "Open the page.\nThen read it."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustLoad(t, "categories:\n  web:\n    hints: web.md\n", map[string]string{"web.md": tt.file})
			if got := s.Hints("web"); got != tt.want {
				t.Errorf("hints %q, want %q", got, tt.want)
			}
		})
	}
}

func TestShippedPolicyLoadsAndRunsTheDefaults(t *testing.T) {
	s, err := Load(filepath.Join("..", "tools.yaml"))
	if err != nil {
		t.Fatalf("the shipped tools.yaml must be valid: %v", err)
	}
	if s.Gateway.Mode != ModeHybrid || s.Gateway.Upstream != "https://api.openai.com/v1" || s.Gateway.Listen != "127.0.0.1:8080" {
		t.Errorf("shipped gateway %+v", s.Gateway)
	}
	for _, cat := range []string{"code", "files", "browser", "chat", "cms"} {
		if s.Hints(cat) == "" {
			t.Errorf("shipped policy has no hints for %s", cat)
		}
	}
	if _, err := os.Stat(filepath.Join("..", "hints")); err != nil {
		t.Error(err)
	}
}

// TestABadUpstreamURLIsReportedWithoutItsPassword: validate prints these
// problems, and CI keeps what it prints. Nor does it repeat a key given as
// the user name or in the query, which url.URL's Redacted printed.
func TestABadUpstreamURLIsReportedWithoutItsPassword(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"a scheme that is not http", "gateway:\n  upstream: \"ftp://user:hunter2@x/v1\"\n", "want an http:// or https:// URL"},
		{"a URL that does not parse", "gateway:\n  upstream: \"https://user:hunter2@ho st/v1\"\n", "not a URL"},
		{"a URL without a host", "gateway:\n  upstream: \"https://user:hunter2@/v1\"\n", "has no host"},
		{"a scheme that is not http with a key as the user name", "gateway:\n  upstream: \"ftp://sk-live-hunter2@x/v1\"\n", `got "ftp://xxxxx@x/v1"`},
		{"a scheme that is not http with a key in the query", "gateway:\n  upstream: \"ftp://x/v1?api-key=hunter2\"\n", `got "ftp://x/v1?api-key=xxxxx"`},
		{"a URL without a host with a key in the query", "gateway:\n  upstream: \"https:///v1?api-key=hunter2\"\n", `URL "https:///v1?api-key=xxxxx" has no host`},
		{"an embeddings URL that is not http with a key as the user name", "search:\n  embeddings:\n    url: \"ftp://sk-hunter2@x/v1\"\n", "search.embeddings.url: want an http:// or https:// URL"},
	} {
		t.Run(tc.name+" is refused without its password", func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tools.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v; want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the problem repeats the password: %v", err)
			}
		})
	}
}

func TestWritesTellsASettingTheFileSetFromABuiltInDefault(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(path, []byte("gateway:\n  listen: 127.0.0.1:8080\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		snap *Snapshot
		path string
		want bool
	}{
		{"a setting the file wrote is reported, though it equals the default", snap, "gateway.listen", true},
		{"a setting the file left to its default is not", snap, "gateway.upstream", false},
		{"the built-in policy writes nothing", Default(), "gateway.listen", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.snap.Writes(tc.path); got != tc.want {
				t.Errorf("Writes(%q) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}
