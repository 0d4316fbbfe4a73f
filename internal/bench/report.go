package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// percentiles returns p50, p95 and p99 of d (sorted in place).
func percentiles(d []time.Duration) (p50, p95, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return at(0.50), at(0.95), at(0.99)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// rss returns the process's resident set size from /proc/self/status, or 0
// where that file does not exist.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// Print writes the latency table: each path's latency percentiles and,
// for the proxies, what they add over the direct call at the same
// percentile (the median over runs of each run's percentile). Rows the
// run did not reach are left out, and a throughput it did not reach is
// "-": printed as zeros they read as measurements.
func (r *Result) Print(w io.Writer) error {
	o := r.Options
	mode := ""
	if o.Mode != "" {
		mode = "; gateway in " + o.Mode + " mode"
	}
	upstream := "fast loopback upstream (reads the body)"
	if o.DecodeBody {
		upstream = "fast loopback upstream (decodes the JSON body)"
	}
	turns := fmt.Sprintf("each request's user message drawn in rotation from %d different ones", len(userMessages))
	if o.Retries {
		turns = fmt.Sprintf("each of %d sessions re-sending one of %d user messages (retries)", benchSessions, len(userMessages))
	}
	fmt.Fprintf(w, "toolgate bench: %s; %d runs x %d sequential requests per path (interleaved), then %d requests from %d clients for throughput; %s%s\n\n",
		upstream, o.Runs, o.Requests, o.Throughput, o.Concurrency, turns, mode)
	cases, order := r.cases()
	if len(order) == 0 {
		fmt.Fprintln(w, "no latency measured: the run ended before a path completed one run")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "tools\tbody\tmode\tpath\tp50\tp95\tp99\tadded p50\tadded p95\tadded p99\treq/s\terrors\t\n")
		for _, row := range r.Rows {
			if !row.measured() {
				continue
			}
			d, direct := cases[caseOf(row)][Direct]
			added := func(x, base time.Duration) string {
				if row.Path == Direct || !direct {
					return "-"
				}
				return us(x - base)
			}
			rps := "-"
			if row.Throughput > 0 {
				rps = strconv.FormatFloat(row.Throughput, 'f', 0, 64)
			}
			fmt.Fprintf(tw, "%d\t%dKB\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", row.Tools, row.BodyBytes>>10, caseOf(row).mode(), row.Path,
				us(row.P50), us(row.P95), us(row.P99), added(row.P50, d.P50), added(row.P95, d.P95), added(row.P99, d.P99),
				rps, row.Errors)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("writing table: %w", err)
		}
	}
	if lines := r.ratios(); len(lines) > 0 {
		fmt.Fprintf(w, "\ngateway's added latency over the bare proxy's (issue #5's target: at most 1.0x at p50, 1.5x at p99):\n")
		for _, l := range lines {
			fmt.Fprintln(w, "  "+l)
		}
		if o.Runs > 1 {
			fmt.Fprintln(w, "  (each ratio is the median of the runs' own ratios, in brackets the lowest and highest of them;\n"+
				"  the table's columns are medians taken path by path, so their quotient can differ)")
		}
	}
	if m := r.Memory; m != nil {
		// The store also holds the latency and throughput phases'
		// sessions; counting them as the memory phase's said "42 sessions
		// held after 1 requests".
		fmt.Fprintf(w, "\nmemory: %d sessions held: %d opened by the memory phase's requests (one each, 200 tools, %s) "+
			"and %d left by the latency and throughput phases; RSS %s, Go heap in use %s\n"+
			"(client, upstream and gateway share this process: RSS is an upper bound of the gateway's)\n",
			m.Sessions, m.Sessions-m.Earlier, m.Took.Round(time.Millisecond), m.Earlier, mb(m.RSS), mb(int64(m.HeapInuse)))
	}
	if r.Partial {
		why := fmt.Sprintf("the time budget (--budget %s) ended the run early", o.Budget)
		if r.Interrupted {
			why = "interrupted"
		}
		fmt.Fprintf(w, "\n%s: the table shows what was measured (paths not reached are left out; a req/s of - was not measured)\n", why)
		for _, k := range order {
			if n := cases[k][Direct].Runs; n < o.Runs {
				fmt.Fprintf(w, "  %d tools %s: %d of %d runs\n", k.tools, k.mode(), n, o.Runs)
			}
		}
	}
	return nil
}

// caseKey is one catalog size and mode: the rows of its paths compare.
type caseKey struct {
	tools  int
	stream bool
}

func (k caseKey) mode() string {
	if k.stream {
		return "stream"
	}
	return "json"
}

func caseOf(row Row) caseKey { return caseKey{row.Tools, row.Stream} }

// cases returns the measured rows by case and path, and the cases in table
// order.
func (r *Result) cases() (map[caseKey]map[string]Row, []caseKey) {
	rows := map[caseKey]map[string]Row{}
	var order []caseKey
	for _, row := range r.Rows {
		if !row.measured() {
			continue
		}
		k := caseOf(row)
		if rows[k] == nil {
			rows[k] = map[string]Row{}
			order = append(order, k)
		}
		rows[k][row.Path] = row
	}
	return rows, order
}

// ratios returns, per catalog size and mode, the gateway's added latency
// over the bare proxy's at p50 and p99, as the latency target is stated.
// Each run gives its own ratio, from its own three percentiles; the
// headline is their median and, with several runs, the range their lowest
// and highest: on a shared machine the spread is part of the answer. (The
// ratio of the table's medians, each taken path by path from different
// runs, can fall outside its own range: "p99 5.41x (runs 0.80x-0.99x)".)
// A run whose bare proxy added nothing at that
// percentile (its latency at or below direct's, by chance) has no ratio,
// and is counted; a gateway path faster than direct gives a ratio below 0,
// printed as such rather than as a large negative number that only says
// how small the bare proxy's share was.
func (r *Result) ratios() []string {
	rows, order := r.cases()
	var out []string
	for _, k := range order {
		paths := rows[k]
		d, dok := paths[Direct]
		b, bok := paths[Bare]
		g, gok := paths[Gateway]
		if !dok || !bok || !gok {
			continue
		}
		p50 := ratio("p50", runsOf(d.P50, d.RunP50), runsOf(b.P50, b.RunP50), runsOf(g.P50, g.RunP50))
		p99 := ratio("p99", runsOf(d.P99, d.RunP99), runsOf(b.P99, b.RunP99), runsOf(g.P99, g.RunP99))
		out = append(out, fmt.Sprintf("%d tools %s: p50 %s, p99 %s", k.tools, k.mode(), p50, p99))
	}
	return out
}

// runsOf returns a row's per-run percentiles, or its one value when the
// row has none.
func runsOf(v time.Duration, runs []time.Duration) []time.Duration {
	if len(runs) == 0 {
		return []time.Duration{v}
	}
	return runs
}

// ratio formats the gateway's added latency over the bare proxy's at one
// percentile from each run's direct, bare and gateway values (see ratios).
func ratio(pct string, direct, bare, gw []time.Duration) string {
	n := min(len(direct), len(bare), len(gw))
	var each []float64
	for i := range n {
		if added := bare[i] - direct[i]; added > 0 {
			each = append(each, float64(gw[i]-direct[i])/float64(added))
		}
	}
	if len(each) == 0 {
		return fmt.Sprintf("n/a (the bare proxy added nothing at %s: its latency was at or below direct's)", pct)
	}
	slices.Sort(each)
	mid := len(each) / 2
	med := each[mid]
	if len(each)%2 == 0 {
		med = (each[mid-1] + each[mid]) / 2
	}
	x := func(v float64) string {
		if v < 0 {
			return "<0x"
		}
		return strconv.FormatFloat(v, 'f', 2, 64) + "x"
	}
	var notes []string
	switch hi := each[len(each)-1]; {
	case hi < 0 && len(each) > 1:
		notes = append(notes, "the gateway's path was faster than direct in every run")
	case hi < 0:
		notes = append(notes, "the gateway's path was faster than direct")
	case len(each) > 1:
		notes = append(notes, "runs "+x(each[0])+" to "+x(hi))
	}
	if skipped := n - len(each); skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d runs n/a: the bare proxy added nothing", skipped, n))
	}
	if len(notes) == 0 {
		return x(med)
	}
	return x(med) + " (" + strings.Join(notes, "; ") + ")"
}

func us(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

func mb(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MB"
}
