package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBenchRunsAndReportsEveryPath(t *testing.T) {
	res, err := Run(context.Background(), Options{
		Sizes: []int{20}, Requests: 5, Runs: 1, Concurrency: 2, Throughput: 6, Sessions: 50, Budget: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("every path has a row per mode with no errors", func(t *testing.T) {
		if len(res.Rows) != 6 {
			t.Fatalf("%d rows, want 6 (3 paths x 2 modes)", len(res.Rows))
		}
		for _, r := range res.Rows {
			if r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 || r.Throughput <= 0 {
				t.Errorf("row %+v", r)
			}
		}
	})
	t.Run("the memory phase holds the sessions it created", func(t *testing.T) {
		if res.Memory == nil || res.Memory.Sessions < 50 || res.Memory.HeapInuse == 0 {
			t.Errorf("memory %+v", res.Memory)
		}
	})
	t.Run("the table names the three paths", func(t *testing.T) {
		var b bytes.Buffer
		if err := res.Print(&b); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{Direct, Bare, Gateway, "added p99", "sessions held", "over the bare proxy's"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, b.String())
			}
		}
	})
}

func TestBenchStopsAtItsBudgetOrWhenInterrupted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		interrupt   bool
		say, notSay string // in and not in the printed footer
	}{
		{"a run cut by its budget says so", false, "the time budget (--budget 300ms) ended the run early", "interrupted"},
		{"a run cut by Ctrl-C says it was interrupted, not that the budget ended it", true, "interrupted: the table shows what was measured", "budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			budget := 300 * time.Millisecond
			if tc.interrupt {
				budget = time.Minute
				time.AfterFunc(300*time.Millisecond, cancel)
			}
			start := time.Now()
			res, err := Run(ctx, Options{Sizes: []int{50}, Requests: 100000, Runs: 1, Sessions: 0, Budget: budget})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Partial || res.Interrupted != tc.interrupt {
				t.Errorf("partial %v, interrupted %v; want true and %v", res.Partial, res.Interrupted, tc.interrupt)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s, cut after 300ms", d)
			}
			var b bytes.Buffer
			if err := res.Print(&b); err != nil {
				t.Fatal(err)
			}
			// Its one run was cut, so no path has a latency to show.
			if out := b.String(); !strings.Contains(out, tc.say) || strings.Contains(out, tc.notSay) || strings.Contains(out, "0.000ms") {
				t.Errorf("want %q, not %q, and no row of zeros:\n%s", tc.say, tc.notSay, out)
			}
		})
	}
}

func TestPrintLeavesOutWhatWasNotMeasured(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	row := func(stream bool, path string, runs int, p50 float64, rps float64) Row {
		return Row{Tools: 200, BodyBytes: 190 << 10, Stream: stream, Path: path, Runs: runs, P50: ms(p50), P95: ms(2 * p50), P99: ms(3 * p50), Throughput: rps}
	}
	res := &Result{
		Options: Options{Runs: 3, Requests: 300, Throughput: 400, Concurrency: 8, Budget: time.Minute},
		Rows: []Row{
			row(false, Direct, 3, 0.2, 9000), row(false, Bare, 3, 0.4, 4000), row(false, Gateway, 3, 0.42, 0),
			row(true, Direct, 1, 0.2, 0), row(true, Bare, 1, 0.4, 0), row(true, Gateway, 1, 0.45, 0),
			row(false, Direct, 0, 0, 0), row(false, Bare, 0, 0, 0), row(false, Gateway, 0, 0, 0),
		},
		Partial: true,
	}
	res.Rows[6].Tools, res.Rows[7].Tools, res.Rows[8].Tools = 1000, 1000, 1000
	var b bytes.Buffer
	if err := res.Print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a path whose latency was not measured has no row", !strings.Contains(out, "0.000ms") && !regexp.MustCompile(`(?m)^\s+1000 `).MatchString(out)},
		{"a throughput not measured is -, not 0", regexp.MustCompile(`(?m)gateway\s.*\s-\s+0\s*$`).MatchString(out) && !regexp.MustCompile(`\s0\s+0\s*$`).MatchString(out)},
		{"a case cut short says how many of its runs completed", strings.Contains(out, "200 tools stream: 1 of 3 runs")},
		{"a case without rows has no ratio line", !strings.Contains(out, "1000 tools json:")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("printed:\n%s", out)
			}
		})
	}
}

func TestPrintWordsTheHeaderAndMemory(t *testing.T) {
	res := &Result{Options: Options{Runs: 1, Requests: 1, Throughput: 1, Concurrency: 1, Sessions: 1},
		Memory: &Memory{Sessions: 42, Earlier: 41, HeapInuse: 1 << 20, Took: time.Millisecond}}
	var b bytes.Buffer
	if err := res.Print(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("user message drawn in rotation from %d different ones", len(userMessages)),
		"42 sessions held: 1 opened by the memory phase's requests (one each, 200 tools, 1ms) and 41 left by the latency and throughput phases",
	} {
		t.Run("the report says "+want, func(t *testing.T) {
			if !strings.Contains(b.String(), want) {
				t.Errorf("printed:\n%s", b.String())
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p50, p95, p99 := percentiles(d)
	if p50 != 51*time.Millisecond || p95 != 96*time.Millisecond || p99 != 100*time.Millisecond {
		t.Errorf("p50 %s p95 %s p99 %s", p50, p95, p99)
	}
}

// BenchmarkLoopback200Tools is one request of a 200-tool catalog (about
// 190 KB) over loopback TCP on each path, user messages in rotation as in
// `gateway bench`: the client, the proxies and the upstream share the
// process, so ns/op and allocs are the whole round trip's, and the
// gateway's cost is its row minus the bare proxy's.
func BenchmarkLoopback200Tools(b *testing.B) {
	e, err := start(Options{Sessions: 0})
	if err != nil {
		b.Fatal(err)
	}
	defer e.close()
	tools, err := catalog(200)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, stream := range []bool{false, true} {
		bodies, err := requestBodies(tools, stream)
		if err != nil {
			b.Fatal(err)
		}
		mode := "json"
		if stream {
			mode = "stream"
		}
		for _, path := range pathOrder() {
			b.Run(mode+"/"+strings.ReplaceAll(path, " ", "_"), func(b *testing.B) {
				for n := range warmup() {
					if err := e.do(ctx, path, bodies.at(int64(n)), stream, "warm"); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				n := int64(0)
				for b.Loop() {
					if err := e.do(ctx, path, bodies.at(n), stream, "s"+strconv.FormatInt(n%64, 10)); err != nil {
						b.Fatal(err)
					}
					n++
				}
			})
		}
	}
}

// BenchmarkHandler200Tools is BenchmarkLoopback200Tools's gateway row
// without the client's side of the network: the request is served by the
// gateway's handler in-process (its upstream is still on loopback), so the
// difference to the loopback row is what the client connection costs.
func BenchmarkHandler200Tools(b *testing.B) {
	e, err := start(Options{Sessions: 0})
	if err != nil {
		b.Fatal(err)
	}
	defer e.close()
	tools, err := catalog(200)
	if err != nil {
		b.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		bodies, err := requestBodies(tools, stream)
		if err != nil {
			b.Fatal(err)
		}
		mode := "json"
		if stream {
			mode = "stream"
		}
		b.Run(mode, func(b *testing.B) {
			serve := func(n int64) {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(bodies.at(n)))
				req.Header.Set("Authorization", "Bearer bench-key-not-a-secret")
				req.Header.Set("X-Session-ID", "s"+strconv.FormatInt(n%64, 10))
				w := httptest.NewRecorder()
				e.handler.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body.String())
				}
			}
			for n := range warmup() {
				serve(int64(n))
			}
			b.ReportAllocs()
			b.ResetTimer()
			n := int64(0)
			for b.Loop() {
				serve(n)
				n++
			}
		})
	}
}

func TestFastUpstreamReadsOrDecodesTheBody(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decode bool
		body   string
		want   bool
	}{
		{"reading accepts any bytes", false, "not json", true},
		{"reading refuses an empty body", false, "", false},
		{"decoding accepts a chat request", true, `{"model":"m","messages":[]}`, true},
		{"decoding refuses bytes that are not JSON", true, "not json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newFastUpstream(tc.decode).readBody(strings.NewReader(tc.body)); got != tc.want {
				t.Errorf("readBody = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequestsRotateTurnsOrRetryThem(t *testing.T) {
	bodies := requests{[]byte("a"), []byte("b"), []byte("c")}
	for _, tc := range []struct {
		name    string
		retries bool
		same    bool
	}{
		{"by default a session's next request is a new turn", false, false},
		{"with retries a session re-sends its turn", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Retries: tc.retries}
			b1, s1 := o.pick(bodies, 1)
			b2, s2 := o.pick(bodies, 1+benchSessions)
			if s1 != s2 {
				t.Fatalf("requests 1 and 1+%d went to sessions %s and %s", benchSessions, s1, s2)
			}
			if same := string(b1) == string(b2); same != tc.same {
				t.Errorf("the session's two requests were %q and %q", b1, b2)
			}
		})
	}
}

func TestRatiosCompareWhatTheProxiesAdd(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	// withRuns sets each path's per-run p50s and p99s (direct, bare,
	// gateway, in that order).
	withRuns := func(rows []Row, p50, p99 [][]float64) []Row {
		for i := range rows {
			for j := range p50[i] {
				rows[i].RunP50 = append(rows[i].RunP50, ms(p50[i][j]))
				rows[i].RunP99 = append(rows[i].RunP99, ms(p99[i][j]))
			}
		}
		return rows
	}
	rows := func(stream bool, direct, bare, gw [2]float64) []Row {
		return []Row{
			{Tools: 200, Stream: stream, Path: Direct, Runs: 1, P50: ms(direct[0]), P99: ms(direct[1])},
			{Tools: 200, Stream: stream, Path: Bare, Runs: 1, P50: ms(bare[0]), P99: ms(bare[1])},
			{Tools: 200, Stream: stream, Path: Gateway, Runs: 1, P50: ms(gw[0]), P99: ms(gw[1])},
		}
	}
	for _, tc := range []struct {
		name string
		rows []Row
		want []string
	}{
		{"ratios are of added latency, not of totals", rows(false, [2]float64{0.2, 0.5}, [2]float64{0.4, 0.9}, [2]float64{0.42, 1.1}),
			[]string{"200 tools json: p50 1.10x, p99 1.50x"}},
		{"a bare proxy that added nothing gives no ratio, and says why", rows(true, [2]float64{0.2, 0.9}, [2]float64{0.3, 0.8}, [2]float64{0.25, 1.0}),
			[]string{"200 tools stream: p50 0.50x, p99 n/a (the bare proxy added nothing at p99: its latency was at or below direct's)"}},
		{"a size without every path is left out", rows(false, [2]float64{0.2, 0.5}, [2]float64{0.4, 0.9}, [2]float64{0.42, 1.1})[:2], nil},
		{"several runs give the median of the runs' own ratios and their spread, counting runs without one",
			withRuns(rows(false, [2]float64{0.2, 0.5}, [2]float64{0.4, 0.9}, [2]float64{0.42, 1.1}),
				[][]float64{{0.2, 0.2, 0.3}, {0.4, 0.3, 0.5}, {0.42, 0.4, 0.5}}, [][]float64{{0.5, 0.5, 0.5}, {0.9, 0.9, 0.5}, {1.1, 0.7, 0.9}}),
			[]string{"200 tools json: p50 1.10x (runs 1.00x to 2.00x), p99 1.00x (runs 0.50x to 1.50x; 1 of 3 runs n/a: the bare proxy added nothing)"}},
		// The table's medians come from different runs: their quotient
		// here is 0.95x, outside the runs' own 0.90x, as in "p99 5.41x
		// (runs 0.80x-0.99x)".
		{"the headline lies within its runs' range", withRuns(rows(false, [2]float64{0.4, 0.4}, [2]float64{0.6, 0.6}, [2]float64{0.59, 0.59}),
			[][]float64{{0.1, 0.5, 0.4}, {1.1, 0.6, 0.5}, {1.0, 0.59, 0.49}}, [][]float64{{0.1, 0.5, 0.4}, {1.1, 0.6, 0.5}, {1.0, 0.59, 0.49}}),
			[]string{"200 tools json: p50 0.90x (runs 0.90x to 0.90x), p99 0.90x (runs 0.90x to 0.90x)"}},
		{"a gateway path faster than direct is said so, not printed as a large negative ratio",
			withRuns(rows(false, [2]float64{2, 2}, [2]float64{2.01, 2.3}, [2]float64{1, 1.9}),
				[][]float64{{2, 2}, {2.01, 2.02}, {1, 1.1}}, [][]float64{{2, 2}, {2.3, 2.1}, {1.9, 2.2}}),
			[]string{"200 tools json: p50 <0x (the gateway's path was faster than direct in every run), p99 0.83x (runs <0x to 2.00x)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Result{Rows: tc.rows}).ratios()
			if !slices.Equal(got, tc.want) {
				t.Errorf("ratios = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMaxToolsIsTheGatewaysLimit keeps MaxTools equal to the gateway's
// own limit, which proxy does not export: a request of MaxTools+1 tools
// is refused with it named.
func TestMaxToolsIsTheGatewaysLimit(t *testing.T) {
	e, err := start(Options{Sessions: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	tools, err := catalog(MaxTools + 1)
	if err != nil {
		t.Fatal(err)
	}
	body, err := requestBody(tools, false, userMessages[0])
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer bench-key-not-a-secret")
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, req)
	if want := fmt.Sprintf("at most %d", MaxTools); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), want) {
		t.Errorf("%d tools: status %d, %s; want 400 and %q", MaxTools+1, w.Code, w.Body.String(), want)
	}
}

func TestRunRefusesWhatItCannotMeasure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      Options
		want   string
		banned string
	}{
		{"an unknown mode names the modes, not a temporary file", Options{Mode: "bogus"}, "want one of hybrid, search, preselect, passthrough", "toolgate-bench-"},
		{"a size above the gateway's limit is refused before anything runs", Options{Sizes: []int{MaxTools + 1}}, "want 1 to 4096 tools", "status 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Budget = time.Minute
			_, err := Run(context.Background(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.banned) {
				t.Errorf("err = %v; want %q in it", err, tc.want)
			}
		})
	}
}
