package bench

import (
	"bytes"
	"context"
	"testing"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// BenchmarkPreselect200Tools is one new turn's preselection as the gateway
// runs it: the bench's 200-tool catalog compiled through the default
// policy (parameters and all), the user messages in rotation, their words
// seen before. selector's benchmarks use bare names and descriptions,
// which rank at about half this cost. "cold caches" sweeps 2 MB through
// the CPU caches between preselections, outside the timer, as reading and
// comparing a 190 KB request does in place: the same work costs about a
// third more there.
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
	for _, tc := range []struct {
		name  string
		sweep bool
	}{{"warm caches", false}, {"cold caches", true}} {
		b.Run(tc.name, func(b *testing.B) {
			src, dst := make([]byte, 1<<20), make([]byte, 1<<20)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if tc.sweep {
					b.StopTimer()
					copy(dst, src)
					if !bytes.Equal(src, dst) {
						b.Fatal("the sweep's copy differs")
					}
					b.StartTimer()
				}
				if _, err := c.Preselect(ctx, []string{userMessages[i%len(userMessages)]}, 7, q); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
