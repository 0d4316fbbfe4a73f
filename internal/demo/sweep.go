package demo

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
)

// PrintSweep writes one row per run of the same tasks over agents of
// different sizes (each Result's CatalogTools), so how the saving moves
// with the number of tools an agent sends reads in one table. Each row is
// net of the gateway's own search rounds, as in Print.
func PrintSweep(w io.Writer, runs []*Result) error {
	if len(runs) == 0 {
		return errors.New("no runs to print")
	}
	first := runs[0]
	fmt.Fprintf(w, "toolgate demo: %d scripted agent tasks (%d tool steps) over agents of %d sizes, %s, offline\n\n",
		first.Tasks, first.Steps, len(runs), first.mode())
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "agent tools\ttools per call\tsteps completed\tupstream calls\tinput tokens\tinput billed, hits at %.0f%%\t\n", first.CacheRate*100)
	for _, r := range runs {
		d, g := r.Direct, r.Gateway
		db, gb := d.billed(r.CacheRate), g.billed(r.CacheRate)
		fmt.Fprintf(tw, "%d\t%.1f\t%d/%d\t%.2fx\t%s\t%s\t\n", r.CatalogTools, per(g.Tools, g.Calls),
			g.StepsCompleted, r.Steps, per(g.Calls, d.Calls),
			pct(float64(d.InputTokens), float64(g.InputTokens)), pct(db, gb))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	fmt.Fprintf(w, "\nEach row replays every task direct and through a gateway of its own (nothing learned carries\n"+
		"over) and compares the two: upstream calls and o200k_base input tokens of every request the\n"+
		"upstream received, the gateway's tool_search rounds included. Run one size alone for the whole table.\n")
	return nil
}
