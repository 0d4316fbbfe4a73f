package selector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
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
			// heapGrowth waits out the compiles above: their indexes
			// close in cleanups, which freed memory inside a plain
			// GC-to-GC window (MB-held came out negative).
			held, _ := heapGrowth(func() *Catalog {
				c, err := Compile(context.Background(), tools, Config{})
				if err != nil {
					b.Fatal(err)
				}
				return c
			})
			b.ReportMetric(float64(held)/(1<<20), "MB-held")
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

// BenchmarkPreselectCatalog is the preselection on the project's bundled
// 183-tool catalog (../testdata: real tool texts, a vocabulary of real
// words) for agent requests in rotation. "warm words" is the steady state
// of a catalog that has served requests (query words' max-sim rows
// remembered); "cold words" forgets them before every request, the cost
// of requests in words the catalog has never seen. "after idle" is warm
// words with the goroutine asleep (untimed) before each request: it asks
// for 200 µs, and time.Sleep lasts about 1.1 ms on the bench VM however
// little it is asked for; a gateway's request follows a wait on the
// network, of 0.1-0.3 ms in the gateway bench. The CPU's caches and
// predictors no longer hold the catalog, which is what a preselection
// costs in place (the gateway bench's requests). "caches
// swept" writes 64 MB, more than the shared cache, before each request
// (untimed): every line the preselection touches comes from memory, the
// repeatable form of "after idle" (a pure ALU loop runs as fast after a
// sleep as in a tight loop on this VM, so the idle penalty is the caches).
// Where the misses fall, measured with cachegrind (100 requests, 8 MB swept
// before each, misses per request): rank 109 and 137 written, accumulate
// 99, bestSims 88, semRows.scores 85, string map lookups 104; rank's were
// its first read of each candidate's Tool, for names the session signals
// looked up per candidate, and are now looked up once.
func BenchmarkPreselectCatalog(b *testing.B) {
	tools := loadCatalogFile(b, "../testdata/catalog.json")[""]
	c, err := Compile(context.Background(), tools, Config{})
	if err != nil {
		b.Fatal(err)
	}
	asks := []string{
		"Summarise the open issues in the repository and post the summary in the team channel.",
		"Read the config file, change the log level to info and open a pull request with the fix.",
		"Take a screenshot of the staging dashboard and email it to the design team.",
		"Create a draft blog post about the spring release and add a hero image.",
		"Find every TODO comment under src and list the files they are in.",
		"Schedule a meeting with Maria next Tuesday afternoon about the budget.",
		"What did people complain about in the support channel yesterday?",
		"Move the PDF invoices from downloads into the finance folder.",
	}
	var sweep []byte
	for _, cs := range []struct {
		name              string
		cold, idle, swept bool
	}{{"warm words", false, false, false}, {"cold words", true, false, false}, {"after idle", false, true, false}, {"caches swept", false, false, true}} {
		b.Run(cs.name, func(b *testing.B) {
			if cs.swept && sweep == nil {
				sweep = make([]byte, 64<<20)
			}
			b.ReportAllocs()
			i := 0
			// The sleeps are timed and taken off after: StopTimer reads
			// the memory statistics, stopping the world, which would
			// chill the caches by itself.
			var slept time.Duration
			for b.Loop() {
				if cs.cold && c.msWords != nil {
					c.msWords.forget()
				}
				if cs.idle {
					t0 := time.Now()
					time.Sleep(200 * time.Microsecond)
					slept += time.Since(t0)
				}
				if cs.swept {
					t0 := time.Now()
					for j := 0; j < len(sweep); j += 64 {
						sweep[j]++
					}
					slept += time.Since(t0)
				}
				if _, err := c.Preselect(context.Background(), asks[i%len(asks):i%len(asks)+1], 7, Query{}); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if cs.idle || cs.swept {
				b.ReportMetric(float64((b.Elapsed()-slept).Nanoseconds())/float64(b.N), "ns/preselect")
			}
		})
	}
}
