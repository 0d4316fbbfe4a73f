package selector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// syntheticTools generates n tools over a fixed vocabulary of verbs,
// objects and servers, with descriptions and parameters of realistic size.
func syntheticTools(n int) []Tool {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	verbs := []string{"create", "list", "get", "update", "delete", "search", "send", "upload", "merge", "publish", "archive", "share"}
	objects := []string{"issue", "file", "page", "message", "channel", "branch", "image", "user", "comment", "invoice", "event", "record", "folder", "ticket", "report"}
	servers := []string{"github", "fs", "browser", "slack", "cms", "drive", "jira", "calendar", "mail", "crm"}
	words := []string{"quickly", "securely", "with", "filters", "pagination", "owner", "workspace", "metadata", "status", "draft", "version", "history", "permissions", "content", "title"}
	out := make([]Tool, n)
	for i := range out {
		v, o, s := verbs[r.IntN(len(verbs))], objects[r.IntN(len(objects))], servers[r.IntN(len(servers))]
		desc := fmt.Sprintf("%s a %s in %s", v, o, s)
		for range 12 {
			desc += " " + words[r.IntN(len(words))]
		}
		out[i] = Tool{
			Name:        fmt.Sprintf("%s_%s_%s_%d", s, v, o, i),
			Description: desc,
			Params:      []Param{{Name: o + "_id", Description: "the " + o}, {Name: "query", Description: "text to match"}},
		}
	}
	return out
}

// BenchmarkSearch measures one search. Budget: ≤ 0.5 ms and a few hundred
// allocations at 2,000 tools (candidate maps and result signals).
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{200, 2000, 10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			c, err := Compile(context.Background(), syntheticTools(n), Config{})
			if err != nil {
				b.Fatal(err)
			}
			q := Query{Text: "upload an image to the cms page and share it on slack", Limit: 5}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Search(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompile measures compiling a catalog. Budget: ≤ 80 ms at 500
// tools; allocations are reported per compile, and MB-held is the heap a
// compiled catalog keeps alive (what each entry of the proxy's catalog
// cache costs).
func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{500, 2000} {
		tools := syntheticTools(n)
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(context.Background(), tools, Config{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			c, err := Compile(context.Background(), tools, Config{})
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "MB-held")
			runtime.KeepAlive(c)
		})
	}
}

// BenchmarkPreselect measures one user turn's preselection (the latest
// message plus an earlier one as context), which the proxy runs before
// every first upstream call of a turn in hybrid and preselect modes.
func BenchmarkPreselect(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			c, err := Compile(context.Background(), syntheticTools(n), Config{})
			if err != nil {
				b.Fatal(err)
			}
			texts := []string{
				"I wrote a draft of the release notes in the drive folder last week.",
				"Please upload the cover image to the cms page, publish the draft and share the link with the team on slack.",
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Preselect(context.Background(), texts, 7, Query{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
