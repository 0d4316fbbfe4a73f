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
// percentile (the median over runs of each run's percentile).
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
	turns := fmt.Sprintf("user messages drawn in rotation from %d", len(userMessages))
	if o.Retries {
		turns = fmt.Sprintf("each of %d sessions re-sending one of %d user messages (retries)", benchSessions, len(userMessages))
	}
	fmt.Fprintf(w, "toolgate bench: %s; %d runs x %d sequential requests per path (interleaved), then %d requests from %d clients for throughput; %s%s\n\n",
		upstream, o.Runs, o.Requests, o.Throughput, o.Concurrency, turns, mode)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "tools\tbody\tmode\tpath\tp50\tp95\tp99\tadded p50\tadded p95\tadded p99\treq/s\terrors\t\n")
	cases, _ := r.cases()
	for _, row := range r.Rows {
		d := cases[caseOf(row)][Direct]
		mode := "json"
		if row.Stream {
			mode = "stream"
		}
		added := func(x, base time.Duration) string {
			if row.Path == Direct {
				return "-"
			}
			return us(x - base)
		}
		fmt.Fprintf(tw, "%d\t%dKB\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%d\t\n", row.Tools, row.BodyBytes>>10, mode, row.Path,
			us(row.P50), us(row.P95), us(row.P99), added(row.P50, d.P50), added(row.P95, d.P95), added(row.P99, d.P99),
			row.Throughput, row.Errors)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	if lines := r.ratios(); len(lines) > 0 {
		fmt.Fprintf(w, "\ngateway's added latency over the bare proxy's (issue #5's target: at most 1.0x at p50, 1.5x at p99):\n")
		for _, l := range lines {
			fmt.Fprintln(w, "  "+l)
		}
		if o.Runs > 1 {
			fmt.Fprintln(w, "  (each ratio is of the medians in the table; in brackets the lowest and highest of the runs' own)")
		}
	}
	if m := r.Memory; m != nil {
		fmt.Fprintf(w, "\nmemory: %d sessions held after %d requests through the gateway (200 tools each, %s): RSS %s, Go heap in use %s\n"+
			"(client, upstream and gateway share this process: RSS is an upper bound of the gateway's)\n",
			m.Sessions, o.Sessions, m.Took.Round(time.Millisecond), mb(m.RSS), mb(int64(m.HeapInuse)))
	}
	if r.Partial {
		fmt.Fprintln(w, "\nthe time budget ended the run early: the table is partial")
	}
	return nil
}

// caseKey is one catalog size and mode: the rows of its paths compare.
type caseKey struct {
	tools  int
	stream bool
}

func caseOf(row Row) caseKey { return caseKey{row.Tools, row.Stream} }

// cases returns the rows by case and path, and the cases in table order.
func (r *Result) cases() (map[caseKey]map[string]Row, []caseKey) {
	rows := map[caseKey]map[string]Row{}
	var order []caseKey
	for _, row := range r.Rows {
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
// over the bare proxy's at p50 and p99 (from the same run's rows), as the
// latency target is stated, and with several runs the lowest and highest
// of the runs' own ratios: on a shared machine the spread is part of the
// answer. A ratio is "n/a" when the bare proxy added nothing measurable: a
// p99 above the direct call's by chance only.
func (r *Result) ratios() []string {
	value := func(gw, bare, direct time.Duration) (float64, bool) {
		if bare-direct <= 0 {
			return 0, false
		}
		return float64(gw-direct) / float64(bare-direct), true
	}
	x := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "x" }
	ratio := func(gw, bare, direct time.Duration, runs [3][]time.Duration) string {
		v, ok := value(gw, bare, direct)
		if !ok {
			return "n/a"
		}
		out := x(v)
		if n := len(runs[0]); n > 1 && len(runs[1]) == n && len(runs[2]) == n {
			var each []float64
			for i := range n {
				if v, ok := value(runs[2][i], runs[1][i], runs[0][i]); ok {
					each = append(each, v)
				}
			}
			if len(each) > 1 {
				out += " (runs " + x(slices.Min(each)) + "-" + x(slices.Max(each)) + ")"
			}
		}
		return out
	}
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
		mode := "json"
		if k.stream {
			mode = "stream"
		}
		p50 := ratio(g.P50, b.P50, d.P50, [3][]time.Duration{d.RunP50, b.RunP50, g.RunP50})
		p99 := ratio(g.P99, b.P99, d.P99, [3][]time.Duration{d.RunP99, b.RunP99, g.RunP99})
		out = append(out, fmt.Sprintf("%d tools %s: p50 %s, p99 %s", k.tools, mode, p50, p99))
	}
	return out
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
