package bench

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// BenchmarkPreselect200Tools is one new turn's preselection as the gateway
// runs it: the bench's 200-tool catalog compiled through the default
// policy (parameters and all), the user messages in rotation, their words
// seen before. selector's benchmarks use bare names and descriptions,
// which rank at about half this cost.
//
// In place a preselection follows a wait on the network, so each case
// does something before every call and reports the call alone as
// ns/preselect (ns/op includes what came before it). StopTimer is not
// used: it reads the memory statistics, which stops the world and alone
// slowed the call that followed by a fifth on the bench VM. "after a
// cache sweep" writes 2 MB through the caches, as a body's read and
// compare do; "after an idle millisecond" sleeps first (time.Sleep rounds
// anything shorter up to about 1 ms there; the gateway's own waits are
// 0.1-0.3 ms). On the shared VM the sweep cost a preselection about 10 %
// and the idle millisecond 70-180 %.
func BenchmarkPreselect200Tools(b *testing.B) {
	raws, err := catalog(200)
	if err != nil {
		b.Fatal(err)
	}
	body, err := requestBody(raws, false, userMessages[0])
	if err != nil {
		b.Fatal(err)
	}
	req, err := rewrite.ParseRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	tools, cfg := policy.Default().Catalog(req.ToolsWithParams())
	ctx := context.Background()
	c, err := selector.Compile(ctx, tools, cfg)
	if err != nil {
		b.Fatal(err)
	}
	q := selector.Query{Skip: func(int) bool { return false }}
	for range 2 { // a word's row is kept on its second sighting
		for _, m := range userMessages {
			if _, err := c.Preselect(ctx, []string{m}, 7, q); err != nil {
				b.Fatal(err)
			}
		}
	}
	sweep := make([]byte, 2<<20)
	for _, tc := range []struct {
		name   string
		before func()
	}{
		{"back to back", func() {}},
		{"after a cache sweep", func() {
			for i := 0; i < len(sweep); i += 64 {
				sweep[i]++
			}
		}},
		{"after an idle millisecond", func() { time.Sleep(time.Millisecond) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var took time.Duration
			n := 0
			for b.Loop() {
				tc.before()
				start := time.Now()
				if _, err := c.Preselect(ctx, []string{userMessages[n%len(userMessages)]}, 7, q); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
				n++
			}
			b.ReportMetric(float64(took.Nanoseconds())/float64(n), "ns/preselect")
		})
	}
}
