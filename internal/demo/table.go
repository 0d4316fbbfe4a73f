package demo

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Print writes the comparison table. Every row counts all upstream calls,
// the gateway's tool_search rounds included: the saving shown is net of
// the gateway's own cost.
func (r *Result) Print(w io.Writer) error {
	d, g := r.Direct, r.Gateway
	fmt.Fprintf(w, "toolgate demo: %d scripted agent tasks (%d tool steps) over a %d-tool catalog, %s, offline\n\n",
		r.Tasks, r.Steps, r.CatalogTools, r.mode())
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\tdirect\tvia toolgate\tchange\t\n")
	fmt.Fprintf(tw, "tools per upstream call\t%.1f\t%.1f\t%s\t\n", per(d.Tools, d.Calls), per(g.Tools, g.Calls),
		pct(per(d.Tools, d.Calls), per(g.Tools, g.Calls)))
	fmt.Fprintf(tw, "tool tokens, all calls\t%s\t%s\t%s\t\n", group(d.ToolTokens), group(g.ToolTokens),
		pct(float64(d.ToolTokens), float64(g.ToolTokens)))
	fmt.Fprintf(tw, "input tokens, all calls\t%s\t%s\t%s\t\n", group(d.InputTokens), group(g.InputTokens),
		pct(float64(d.InputTokens), float64(g.InputTokens)))
	fmt.Fprintf(tw, "of which prompt-cache hits (est.)\t%s\t%s\t\t\n", group(d.CachedTokens), group(g.CachedTokens))
	db, gb := d.billed(r.CacheRate), g.billed(r.CacheRate)
	fmt.Fprintf(tw, "input billed, hits at %.0f%%\t%s\t%s\t%s\t\n", r.CacheRate*100, group(int64(db+0.5)), group(int64(gb+0.5)), pct(db, gb))
	fmt.Fprintf(tw, "upstream calls\t%d\t%d\t%.2fx\t\n", d.Calls, g.Calls, per(g.Calls, d.Calls))
	fmt.Fprintf(tw, "agent requests\t%d\t%d\t\t\n", d.ClientRequests, g.ClientRequests)
	fmt.Fprintf(tw, "tasks completed\t%d/%d\t%d/%d\t\t\n", d.TasksCompleted, r.Tasks, g.TasksCompleted, r.Tasks)
	fmt.Fprintf(tw, "tool steps completed\t%d/%d\t%d/%d\t\t\n", d.StepsCompleted, r.Steps, g.StepsCompleted, r.Steps)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	fmt.Fprintf(w, "\nTokens are o200k_base counts of each request the upstream received (tools array and the rest\n"+
		"of the body); the gateway's column includes its tool_search rounds. Cache hits: the longest run of\n"+
		"leading tools and messages an earlier request began with, from %s tokens in steps of %d (a\n"+
		"provider's prefix cache; --cache-rate sets what a hit costs). The scripted model accepts up to\n"+
		"%d tools in the direct run; a real OpenAI model refuses more than 128. Took %s.\n",
		group(cacheMinTokens), cacheStep, DirectMaxTools, r.Elapsed.Round(1e6))
	if r.API == APIMessages {
		// Anthropic's cache is not automatic: the estimate would claim hits
		// its API gives only to a client that asks for them.
		fmt.Fprint(w, "Anthropic caches a prompt only up to the cache_control breakpoints a client sets (a write\n"+
			"costs 1.25x an input token, a hit 0.1x): the hits above are what an agent that marks its latest\n"+
			"message could get; this demo's agent marks none.\n")
	}
	return nil
}

// mode says how the run replayed its tasks, for a table's heading.
func (r *Result) mode() string {
	mode := "non-streamed"
	if r.Stream {
		mode = "streamed"
	}
	switch r.API {
	case APIResponses:
		mode += ", Responses API"
	case APIMessages:
		mode += ", Messages API"
	}
	if r.OneSession {
		mode += ", one conversation"
	}
	return mode
}

func per(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func pct(direct, gateway float64) string {
	if direct == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", (gateway/direct-1)*100)
}

// group formats n with thousands separators.
func group(n int64) string {
	// The sign is cut off the digits rather than negating n: the smallest
	// int64 (what a NaN or an overflowing float converts to) has no
	// positive counterpart.
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	if n < 0 {
		b.WriteByte('-')
		s = s[1:]
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
