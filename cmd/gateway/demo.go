package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/demo"
	"github.com/toolgate/toolgate/internal/eval"
	"github.com/toolgate/toolgate/internal/progress"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
)

// runDemo replays the bundled agent tasks direct and through the gateway,
// offline, and prints what each cost.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stream := fs.Bool("stream", false, "replay every request streamed")
	api := fs.String("api", "chat", "the API the agent speaks: chat (Chat Completions), responses (the Responses API) or messages (Anthropic's Messages API)")
	oneSession := fs.Bool("one-session", false, "replay the tasks as successive user turns of one conversation (an agent working through a list)")
	catalog := fs.String("catalog", "", "JSON array of tools to use instead of the bundled catalog")
	tasks := fs.String("tasks", "", "JSON array of scripted tasks to use instead of the bundled ones")
	config := fs.String("config", "", "policy file for the gateway (default: built-in defaults)")
	model := fs.String("model", "gpt-4o", "model name the agent sends")
	cacheRate := fs.Float64("cache-rate", 0.5, "what a prompt-cache hit costs as a share of the input price, for the billed-input row "+
		"(gpt-4o 0.5, gpt-4.1 0.25, gpt-5 family 0.1)")
	queries := fs.String("queries", "", "eval queries (JSONL, the shared format) to replay as tasks instead: the query is the prompt, "+
		"its gold tools the steps; --catalog is then the eval catalog file")
	subset := fs.String("subset", "", "with --queries: only queries whose subset starts with this")
	stepQuery := fs.String("step-query", eval.StepName, "with --queries: what the scripted model searches for a step it is not offered: "+
		"name (the needed tool's name as words: an upper bound) or prompt (the task's text: a lower bound)")
	agentTools := fs.String("agent-tools", "", "with --queries: replay over an agent of this many of the catalog's tools (every tool the tasks call, "+
		"the rest drawn with a fixed seed) instead of the whole catalog; several sizes, comma-separated (120,150,180), print one row each")
	decisionLog := fs.String("decision-log", "", "append the gateway's decision record of every request (active set and why, searches) to FILE as JSON lines, \"-\" for stderr")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: demo takes no arguments, only flags; got %q", errUsage, fs.Args())
	}
	// The flags that shape eval queries into tasks mean nothing without
	// them; accepted and ignored, they would make a run look like what it
	// is not.
	if *queries == "" {
		var stray []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "subset" || f.Name == "step-query" {
				stray = append(stray, "--"+f.Name)
			}
		})
		if len(stray) > 0 {
			return fmt.Errorf("%w: %s: only with --queries", errUsage, strings.Join(stray, " and "))
		}
	}
	sizes, err := agentSizes(*agentTools)
	if err != nil || (len(sizes) > 0 && *queries == "") {
		return fmt.Errorf("%w: --agent-tools %q: want numbers of tools, comma-separated, with --queries", errUsage, *agentTools)
	}
	if !(*cacheRate > 0 && *cacheRate <= 1) { // so NaN fails too
		return fmt.Errorf("%w: --cache-rate %v: want a share of the input price, above 0 and at most 1", errUsage, *cacheRate)
	}
	if *api != "chat" && *api != "responses" && *api != "messages" {
		return fmt.Errorf("%w: --api %q: want chat, responses or messages", errUsage, *api)
	}
	if *stepQuery != eval.StepPrompt && *stepQuery != eval.StepName {
		return fmt.Errorf("%w: --step-query is %q; want prompt or name", errUsage, *stepQuery)
	}
	o := demo.Options{Stream: *stream, API: demo.API(*api), Model: *model, OneSession: *oneSession, CacheRate: *cacheRate}
	var (
		qf   *eval.QueryFile
		defs map[string][]rewrite.Tool
	)
	switch {
	case *queries != "":
		if *catalog == "" || *tasks != "" {
			return fmt.Errorf("%w: --queries needs --catalog (the eval catalog) and replaces --tasks", errUsage)
		}
		if qf, err = eval.LoadQueries(*queries); err != nil {
			return err
		}
		if note := qf.SkippedNote(); note != "" {
			fmt.Fprintln(stderr, "demo:", note)
		}
		if defs, err = readCatalog(*catalog); err != nil {
			return err
		}
		// Checked here, where each query's FILE:LINE is known (demo.Run
		// sees only the tasks made of them), and only for the queries
		// that --subset replays.
		if _, err := qf.WithSubset(*subset).CheckGold(defs, *catalog, true); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	default:
		// Read and checked here, where the files are known: demo.Run's
		// errors about its input cannot name them.
		if *catalog != "" {
			if o.Catalog, err = readDemoCatalog(*catalog); err != nil {
				return err
			}
		}
		if *tasks != "" {
			if o.Tasks, err = readTasks(*tasks); err != nil {
				return err
			}
		}
	}
	if *config != "" {
		if o.Policy, err = policy.Load(*config); err != nil {
			return err
		}
	}
	decisions, dlog, err := openDecisionLog(*decisionLog, stderr, nil, slog.Default())
	if err != nil {
		return err
	}
	defer closeDecisionLog(ctx, dlog, slog.Default())
	o.DecisionLog = decisions
	if len(sizes) == 0 {
		sizes = []int{0} // the bundled tasks, or the whole eval catalog
	}
	runs := make([]*demo.Result, 0, len(sizes))
	for i, n := range sizes {
		label, what := "replaying tasks", "demo"
		if len(sizes) > 1 {
			label = fmt.Sprintf("agent of %d tools (%d of %d)", n, i+1, len(sizes))
			what = fmt.Sprintf("demo over %d tools", n)
		}
		// On *queries, not on what was read from it: a file that yields
		// nothing must never replay the bundled demo instead.
		if *queries != "" {
			o.Tasks, o.Catalog, err = eval.Episodes(qf.Queries, defs, *subset, *stepQuery, n)
			var small *eval.AgentTooSmallError
			if errors.As(err, &small) {
				return fmt.Errorf("%w: --agent-tools %d: the tasks call %d tools of the catalog; want at least that many", errUsage, small.Size, small.Called)
			}
			if err != nil {
				return err
			}
		}
		if isTerminal(stderr) {
			o.Progress = progress.Bar(stderr, label)
		}
		res, err := demo.Run(ctx, o)
		if errors.Is(err, demo.ErrMissingTools) {
			return fmt.Errorf("%s: tasks %s over catalog %s: %w", what, orBundled(*tasks), orBundled(*catalog), err)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		runs = append(runs, res)
	}
	if len(runs) == 1 {
		return runs[0].Print(stdout)
	}
	return demo.PrintSweep(stdout, runs)
}

// agentSizes parses --agent-tools: "" (the whole catalog) or positive
// numbers of tools, comma-separated.
func agentSizes(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad agent size %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// orBundled names an input file for a message: its path, or "(bundled)".
func orBundled(path string) string {
	if path == "" {
		return "(bundled)"
	}
	return path
}

// isTerminal reports whether w is a character device, so progress bars go
// to people and not to logs or pipes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
