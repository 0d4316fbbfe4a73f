package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// searchingUpstream answers a turn's first call with one call of the
// gateway's search tool with args, and the call after it with text; it
// keeps the search's answer, the tool message the model read.
type searchingUpstream struct {
	args   string
	mu     sync.Mutex
	answer string
}

func (u *searchingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	tool := gjson.GetBytes(b, `messages.#(role=="tool")#.content`).Array()
	if len(tool) == 0 {
		args, _ := json.Marshal(u.args)
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_s1","type":"function","function":{"name":"tool_search","arguments":`+string(args)+`}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
		return
	}
	u.mu.Lock()
	u.answer = tool[len(tool)-1].String()
	u.mu.Unlock()
	_, _ = io.WriteString(w, `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
}

// offered reads a search answer's count and the tools it lists, in order.
func offered(t *testing.T, answer string) (int, []string) {
	t.Helper()
	m := regexp.MustCompile(`^Found (\d+) tool\(s\)`).FindStringSubmatch(answer)
	if m == nil {
		t.Fatalf("the search answer offers no tools:\n%s", answer)
	}
	n, _ := strconv.Atoi(m[1])
	var names []string
	for _, l := range strings.Split(answer, "\n") {
		if name, ok := strings.CutPrefix(l, "- "); ok {
			name, _, _ = strings.Cut(name, " (hint:")
			names = append(names, name)
		}
	}
	return n, names
}

// TestSearchRecordsListWhatTheModelWasOffered: the decision log is read
// to learn why the model did not see a tool, so a search's results there
// must be the answer the model read, after bundles and max_active, and
// say how many it held when the record lists fewer.
func TestSearchRecordsListWhatTheModelWasOffered(t *testing.T) {
	for _, tc := range []struct {
		name, policy, args string
	}{
		{"a bundle's tools that lead the answer are the tools logged",
			"gateway: {mode: search}\nbundles: {gadgets: {description: gadget tools, tools: [\"util_gadget_*\"]}}\n",
			`{"query":"gadgets"}`},
		{"a search cut to max_active logs only the tools that stayed",
			"gateway: {mode: search, max_active: 2}\n",
			`{"query":"create issue repository"}`},
		{"a search offering more tools than a record lists says how many it offered",
			"{}\n",
			`{"query":"issue repository pull request branch file","limit":10}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &searchingUpstream{args: tc.args}
			var buf syncBuffer
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, tc.policy)), func(g *Gateway) {
				g.DecisionLog = slog.New(slog.NewJSONHandler(&buf, nil))
			})
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "do the thing"}}, testCatalog(60), false, nil), nil)
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			up.mu.Lock()
			n, names := offered(t, up.answer)
			up.mu.Unlock()
			s := recs[0].Get("searches.0")
			var logged []string
			for _, h := range s.Get("results").Array() {
				logged = append(logged, h.Get("name").String())
			}
			if want := names[:min(len(names), searchHitsLogged)]; !slices.Equal(logged, want) {
				t.Errorf("logged results %v, want the first %d the model was offered %v", logged, len(want), want)
			}
			if got := s.Get("results_total"); got.Int() != int64(n) || !got.Exists() {
				t.Errorf("results_total %v, want the %d tools the answer offered", got, n)
			}
		})
	}
}

// textAnswer is an upstream that answers every call with text.
var textAnswer = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
})

// failingWriter is a decision-log sink on a full disk.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestFailedDecisionLogWritesAreCountedAndSaid: a decision log on a full
// disk lost every record without a word.
func TestFailedDecisionLogWritesAreCountedAndSaid(t *testing.T) {
	const requests = 3
	for _, tc := range []struct {
		name      string
		sink      io.Writer
		failures  float64
		warnings  int
		warnsWith string
	}{
		{"every record a full disk refuses is counted, and said once", failingWriter{}, requests, 1, "no space left on device"},
		{"a log that takes its records counts and says nothing", io.Discard, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics()
			var logs syncBuffer
			base := newTestGateway(t, textAnswer, func(g *Gateway) {
				g.Metrics = m
				g.DecisionLog = slog.New(slog.NewJSONHandler(tc.sink, nil))
				g.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			})
			for range requests {
				if x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(60), false, nil), nil); x.status != http.StatusOK {
					t.Fatalf("status %d: %s", x.status, x.body)
				}
			}
			text := scrapeUntil(t, base, func(text string) bool {
				return metricValue(t, text, `toolgate_requests_total{mode="hybrid",route="chat",status="200"}`) == requests
			})
			if got := metricValue(t, text, `toolgate_decision_log_errors_total{reason="write"}`); got != tc.failures {
				t.Errorf("toolgate_decision_log_errors_total{reason=\"write\"} = %v, want %v", got, tc.failures)
			}
			var warnings []gjson.Result
			for _, l := range logs.lines(t) {
				if strings.Contains(l.Get("msg").String(), "decision log") {
					warnings = append(warnings, l)
				}
			}
			if len(warnings) != tc.warnings {
				t.Fatalf("%d warnings about the decision log, want %d:\n%s", len(warnings), tc.warnings, logs.String())
			}
			if tc.warnings > 0 && !strings.Contains(warnings[0].Get("err").String(), tc.warnsWith) {
				t.Errorf("the warning says %s, want the write's error %q", warnings[0].Raw, tc.warnsWith)
			}
		})
	}
}

func TestDecisionLogWarningsComeOnceAMinute(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var w writeFailures
	for _, tc := range []struct {
		name string
		at   time.Duration
		warn bool
		n    int
	}{
		{"the first failure warns", 0, true, 1},
		{"a failure a second later does not", time.Second, false, 0},
		{"nor one 59 s after the warning", 59 * time.Second, false, 0},
		{"a failure a minute after the warning warns, counting those it did not say", time.Minute, true, 3},
		{"and the next is quiet again", time.Minute + time.Second, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warn, n := w.fail(t0.Add(tc.at))
			if warn != tc.warn || n != tc.n {
				t.Errorf("fail = %v, %d; want %v, %d", warn, n, tc.warn, tc.n)
			}
		})
	}
}

// TestRecordsDoNotGrowWithClientInput: the model name and the search
// queries are the client's and the model's strings; a 2 MB model name
// made a 2 MB record.
func TestRecordsDoNotGrowWithClientInput(t *testing.T) {
	long := func(unit string, bytes int) string { return strings.Repeat(unit, bytes/len(unit)+1) }
	for _, tc := range []struct {
		name, model, query string
		field              string // the record's field, by gjson path
		max                int    // its most bytes, the ellipsis included
		clipped            bool
	}{
		{"a 2 MB model name is logged as its first 256 bytes and an ellipsis", long("x", 2<<20), "create issue", "model", 256 + len("…"), true},
		{"a model name of three-byte runes is cut between runes", long("€", 1000), "create issue", "model", 256 + len("…"), true},
		{"a model name of 256 bytes is logged whole", long("m", 256)[:256], "create issue", "model", 256, false},
		{"a 1.3 MB query is logged as its first 200 bytes and an ellipsis", "gpt-4o", long("pull request ", 1300000), "searches.0.query", maxQueryLen + len("…"), true},
		{"a query of two-byte runes is cut between runes", "gpt-4o", long("ü", 1000), "searches.0.query", maxQueryLen + len("…"), true},
		{"a short query is logged whole", "gpt-4o", "create issue", "searches.0.query", len("create issue"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"query": tc.query})
			up := &searchingUpstream{args: string(args)}
			var buf syncBuffer
			base := newTestGateway(t, up, searchOnly(t), func(g *Gateway) {
				g.DecisionLog = slog.New(slog.NewJSONHandler(&buf, nil))
			})
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(60), false, map[string]any{"model": tc.model}), nil)
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %.300s", x.status, x.body)
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			got := recs[0].Get(tc.field).String()
			full := tc.model
			if tc.field != "model" {
				full = tc.query
			}
			switch {
			case len(got) > tc.max:
				t.Errorf("%s is %d bytes, want at most %d", tc.field, len(got), tc.max)
			case !utf8.ValidString(got):
				t.Errorf("%s %q is not valid UTF-8: cut inside a rune", tc.field, got)
			case strings.HasSuffix(got, "…") != tc.clipped:
				t.Errorf("%s %.60q…: ends in an ellipsis %v, want %v", tc.field, got, !tc.clipped, tc.clipped)
			case !strings.HasPrefix(full, strings.TrimSuffix(got, "…")):
				t.Errorf("%s %.60q is not the head of what the client sent", tc.field, got)
			}
			if len(recs[0].Raw) > 16<<10 {
				t.Errorf("the record is %d bytes", len(recs[0].Raw))
			}
		})
	}
}

// TestOnlyChatRequestsAreRecorded: the README promises one record per
// chat request; a client polling GET /v1/models wrote one per poll.
func TestOnlyChatRequestsAreRecorded(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			textAnswer(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	for _, tc := range []struct {
		name    string
		request func(t *testing.T, base string) int
		records int
	}{
		{"a model list passed through writes no record", func(t *testing.T, base string) int {
			code, _ := getWithHeaders(t, base+"/models", nil)
			return code
		}, 0},
		{"an embeddings call passed through writes no record", func(t *testing.T, base string) int {
			return sendTo(t, base, "/embeddings", []byte(`{"model":"e","input":"hi"}`), nil).status
		}, 0},
		{"a chat request without tools, passed through, writes its record", func(t *testing.T, base string) int {
			return send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, nil, false, nil), nil).status
		}, 1},
		{"a chat request the gateway rewrote writes its record", func(t *testing.T, base string) int {
			return send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(60), false, nil), nil).status
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _, buf := observedGateway(t, upstream)
			if code := tc.request(t, base); code != http.StatusOK {
				t.Fatalf("status %d", code)
			}
			// A chat request after it, whose record comes when the
			// request's would have (records are written once the client has
			// its answer, so not always in order: a little grace follows).
			marker := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(60), false, map[string]any{"model": "marker"}), nil)
			if marker.status != http.StatusOK {
				t.Fatalf("marker status %d", marker.status)
			}
			buf.waitLines(t, tc.records+1)
			time.Sleep(100 * time.Millisecond)
			recs := buf.lines(t)
			n := 0
			for _, r := range recs {
				if r.Get("model").String() != "marker" {
					n++
				}
			}
			if n != tc.records {
				t.Errorf("%d decision records, want %d:\n%s", n, tc.records, buf.String())
			}
		})
	}
}

// TestEverySearchCallIsInTheRecord: a tool_search call with an empty
// query counted in toolgate_tool_search_calls_total but was missing from
// the record's searches, so the two disagreed.
func TestEverySearchCallIsInTheRecord(t *testing.T) {
	const fullPolicy = "gateway: {mode: search, max_active: 2}\ncore: [util_gadget_30, util_gadget_31]\n"
	for _, tc := range []struct {
		name, args string
		err        string // the search's error in the record
		ranked     float64
		policy     string // "" for search mode's defaults
	}{
		{"a search with an empty query is recorded with why it found nothing", `{"query":""}`, searchEmptyQuery, 0, ""},
		{"a search with only spaces for a query is recorded the same", `{"query":"   "}`, searchEmptyQuery, 0, ""},
		{"a search without a query is recorded the same", `{"limit":3}`, searchEmptyQuery, 0, ""},
		{"a search whose query has no word (zero-width spaces, punctuation) is recorded the same", `{"query":"\u200b\u200b ?!"}`, searchEmptyQuery, 0, ""},
		{"a search with a query is recorded without an error", `{"query":"create issue"}`, "", 1, ""},
		{"a search whose tools the full list could not keep is recorded with why it found nothing",
			`{"query":"create issue"}`, searchListFull, 0, fullPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &searchingUpstream{args: tc.args}
			pol := searchOnly(t)
			if tc.policy != "" {
				pol = withPolicy(loadPolicy(t, tc.policy))
			}
			base, _, buf := observedGateway(t, up, pol)
			if x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(60), false, nil), nil); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			text := scrape(t, base)
			searches := recs[0].Get("searches").Array()
			if calls := metricValue(t, text, "toolgate_tool_search_calls_total"); float64(len(searches)) != calls || calls != 1 {
				t.Fatalf("%d searches in the record, %v in toolgate_tool_search_calls_total; want 1 and 1:\n%s", len(searches), calls, recs[0].Raw)
			}
			if got := searches[0].Get("error").String(); got != tc.err {
				t.Errorf("the search's error is %q, want %q", got, tc.err)
			}
			if got := metricValue(t, text, "toolgate_search_duration_seconds_count"); got != tc.ranked {
				t.Errorf("toolgate_search_duration_seconds_count = %v, want %v: only searches of the catalog are timed", got, tc.ranked)
			}
		})
	}
}

// TestAClientThatLeftHasOneStatusInTheRecordAndTheMetrics: the record
// said 0 where toolgate_requests_total said "none".
func TestAClientThatLeftHasOneStatusInTheRecordAndTheMetrics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []map[string]any
		mode  string
	}{
		{"a rewritten request whose client left", testCatalog(60), "hybrid"},
		{"a request passed through whose client left", nil, "passthrough"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan struct{}, 1)
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- struct{}{}
				waitGone(r)
			})
			base, _, buf := observedGateway(t, upstream)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions",
				bytes.NewReader(chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, tc.tools, false, nil)))
			req.Header.Set("Content-Type", "application/json")
			errc := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				errc <- err
			}()
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the request never reached the upstream")
			}
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("the request succeeded; the test needs a client that left")
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			status := recs[0].Get("status").Raw
			series := `toolgate_requests_total{mode="` + tc.mode + `",route="chat",status="` + status + `"}`
			if v := metricValue(t, scrape(t, base), series); v != 1 {
				t.Errorf("%s = %v, want 1: the record's status is %s\n%s", series, v, status, scrape(t, base))
			}
		})
	}
}

// TestRefusedSearchCallsAreCountedAndRecorded: a tool_search call the
// gateway refused without searching, past the calls one round may make
// or after the turn's searches were spent, was neither counted in
// toolgate_tool_search_calls_total nor in the record's searches.
func TestRefusedSearchCallsAreCountedAndRecorded(t *testing.T) {
	alwaysSearches := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, searchReply)
	})
	six := &searchesInOneRound{queries: []string{"create issue", "send email", "read file", "open url", "post message", "publish page"}}
	for _, tc := range []struct {
		name, policy string
		upstream     http.Handler
		errs         []string // each call's error in the record, in order
	}{
		{"six searches in one round: the two past the round's four are counted and recorded as refused",
			"gateway: {mode: search}\n", six,
			[]string{"", "", "", "", searchTooMany, searchTooMany}},
		{"a search in the rounds after the searches are spent is counted and recorded as refused",
			"gateway: {mode: search, max_rounds: 1}\n", alwaysSearches,
			[]string{"", searchSpent, searchSpent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _, buf := observedGateway(t, tc.upstream, withPolicy(loadPolicy(t, tc.policy)))
			if x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(60), false, nil), nil); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			var errs []string
			for _, s := range recs[0].Get("searches").Array() {
				errs = append(errs, s.Get("error").String())
			}
			if !slices.Equal(errs, tc.errs) {
				t.Errorf("the record's searches have errors %q, want %q:\n%s", errs, tc.errs, recs[0].Raw)
			}
			text := scrape(t, base)
			if calls := metricValue(t, text, "toolgate_tool_search_calls_total"); calls != float64(len(tc.errs)) {
				t.Errorf("toolgate_tool_search_calls_total = %v, want %d", calls, len(tc.errs))
			}
			ranked := 0
			for _, e := range tc.errs {
				if e == "" {
					ranked++
				}
			}
			if got := metricValue(t, text, "toolgate_search_duration_seconds_count"); got != float64(ranked) {
				t.Errorf("toolgate_search_duration_seconds_count = %v, want %d: a refused call ranks nothing", got, ranked)
			}
		})
	}
}
