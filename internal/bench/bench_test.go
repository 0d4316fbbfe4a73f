package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
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

func TestBenchStopsAtItsBudget(t *testing.T) {
	start := time.Now()
	res, err := Run(context.Background(), Options{Sizes: []int{50}, Requests: 100000, Runs: 1, Sessions: 0, Budget: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Partial {
		t.Error("a run cut by its budget is not marked partial")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s with a 300ms budget", d)
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
			{Tools: 200, Stream: stream, Path: Direct, P50: ms(direct[0]), P99: ms(direct[1])},
			{Tools: 200, Stream: stream, Path: Bare, P50: ms(bare[0]), P99: ms(bare[1])},
			{Tools: 200, Stream: stream, Path: Gateway, P50: ms(gw[0]), P99: ms(gw[1])},
		}
	}
	for _, tc := range []struct {
		name string
		rows []Row
		want []string
	}{
		{"ratios are of added latency, not of totals", rows(false, [2]float64{0.2, 0.5}, [2]float64{0.4, 0.9}, [2]float64{0.42, 1.1}),
			[]string{"200 tools json: p50 1.10x, p99 1.50x"}},
		{"a bare proxy that added nothing gives no ratio", rows(true, [2]float64{0.2, 0.9}, [2]float64{0.3, 0.8}, [2]float64{0.25, 1.0}),
			[]string{"200 tools stream: p50 0.50x, p99 n/a"}},
		{"a size without every path is left out", rows(false, [2]float64{0.2, 0.5}, [2]float64{0.4, 0.9}, [2]float64{0.42, 1.1})[:2], nil},
		{"several runs add the spread of the runs' own ratios", withRuns(rows(false, [2]float64{0.2, 0.5}, [2]float64{0.4, 0.9}, [2]float64{0.42, 1.1}),
			[][]float64{{0.2, 0.2, 0.3}, {0.4, 0.3, 0.5}, {0.42, 0.4, 0.5}}, [][]float64{{0.5, 0.5, 0.5}, {0.9, 0.9, 0.5}, {1.1, 0.7, 0.9}}),
			[]string{"200 tools json: p50 1.10x (runs 1.00x-2.00x), p99 1.50x (runs 0.50x-1.50x)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Result{Rows: tc.rows}).ratios()
			if !slices.Equal(got, tc.want) {
				t.Errorf("ratios = %q, want %q", got, tc.want)
			}
		})
	}
}
