package bench

import (
	"bytes"
	"context"
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
		for _, want := range []string{Direct, Bare, Gateway, "added p99", "sessions held"} {
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
