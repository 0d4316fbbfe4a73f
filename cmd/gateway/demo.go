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
	c, err := parseDemo(args, stderr)
	if err != nil {
		return err
	}
	in, err := loadDemo(c, stderr)
	if err != nil {
		return err
	}
	decisions, dlog, err := openDecisionLog(c.decisionLog, stderr, nil, slog.Default())
	if err != nil {
		return err
	}
	defer closeDecisionLog(ctx, dlog, slog.Default())
	in.opts.DecisionLog = decisions
	runs, err := replayDemo(ctx, c, in, stderr)
	if err != nil {
		return err
	}
	if len(runs) == 1 {
		return runs[0].Print(stdout)
	}
	return demo.PrintSweep(stdout, runs)
}

// demoConfig is what demo reads from its flags, checked: the options of
// every run, and the files and eval settings to load.
type demoConfig struct {
	opts      demo.Options // Stream, API, Model, OneSession, CacheRate
	catalog   string       // the catalog file; "" is the bundled one
	tasks     string       // the tasks file; "" is the bundled one
	config    string       // the policy file; "" is the built-in defaults
	queries   string       // eval queries to replay as tasks; "" replays tasks
	subset    string       // with queries: the subset prefix
	stepQuery string       // with queries: eval.StepName or eval.StepPrompt
	sizes     []int        // with queries: agent sizes, one run each; none is the whole catalog
	// decisionLog is where decision records go: a file, "-" for stderr,
	// "" for nowhere.
	decisionLog string
}

// parseDemo reads demo's flags and checks them and their combinations.
// It reads no file.
func parseDemo(args []string, stderr io.Writer) (demoConfig, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c demoConfig
	fs.BoolVar(&c.opts.Stream, "stream", false, "replay every request streamed")
	api := fs.String("api", "chat", "the API the agent speaks: chat (Chat Completions), responses (the Responses API) or messages (Anthropic's Messages API)")
	fs.BoolVar(&c.opts.OneSession, "one-session", false, "replay the tasks as successive user turns of one conversation (an agent working through a list)")
	fs.StringVar(&c.catalog, "catalog", "", "JSON array of tools to use instead of the bundled catalog")
	fs.StringVar(&c.tasks, "tasks", "", "JSON array of scripted tasks to use instead of the bundled ones")
	fs.StringVar(&c.config, "config", "", "policy file for the gateway (default: built-in defaults)")
	fs.StringVar(&c.opts.Model, "model", "gpt-4o", "model name the agent sends")
	fs.Float64Var(&c.opts.CacheRate, "cache-rate", 0.5, "what a prompt-cache hit costs as a share of the input price, for the billed-input row "+
		"(gpt-4o 0.5, gpt-4.1 0.25, gpt-5 family 0.1)")
	fs.StringVar(&c.queries, "queries", "", "eval queries (JSONL, the shared format) to replay as tasks instead: the query is the prompt, "+
		"its gold tools the steps; --catalog is then the eval catalog file")
	fs.StringVar(&c.subset, "subset", "", "with --queries: only queries whose subset starts with this")
	fs.StringVar(&c.stepQuery, "step-query", eval.StepName, "with --queries: what the scripted model searches for a step it is not offered: "+
		"name (the needed tool's name as words: an upper bound) or prompt (the task's text: a lower bound)")
	agentTools := fs.String("agent-tools", "", "with --queries: replay over an agent of this many of the catalog's tools (every tool the tasks call, "+
		"the rest drawn with a fixed seed) instead of the whole catalog; several sizes, comma-separated (120,150,180), print one row each")
	fs.StringVar(&c.decisionLog, "decision-log", "", "append the gateway's decision record of every request (active set and why, searches) to FILE as JSON lines, \"-\" for stderr")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("%w: demo takes no arguments, only flags; got %q", errUsage, fs.Args())
	}
	// The flags that shape eval queries into tasks mean nothing without
	// them; accepted and ignored, they would make a run look like what it
	// is not.
	if c.queries == "" {
		var stray []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "subset" || f.Name == "step-query" {
				stray = append(stray, "--"+f.Name)
			}
		})
		if len(stray) > 0 {
			return c, fmt.Errorf("%w: %s: only with --queries", errUsage, strings.Join(stray, " and "))
		}
	}
	var err error
	c.sizes, err = agentSizes(*agentTools)
	if err != nil || (len(c.sizes) > 0 && c.queries == "") {
		return c, fmt.Errorf("%w: --agent-tools %q: want numbers of tools, comma-separated, with --queries", errUsage, *agentTools)
	}
	if !(c.opts.CacheRate > 0 && c.opts.CacheRate <= 1) { // so NaN fails too
		return c, fmt.Errorf("%w: --cache-rate %v: want a share of the input price, above 0 and at most 1", errUsage, c.opts.CacheRate)
	}
	if *api != "chat" && *api != "responses" && *api != "messages" {
		return c, fmt.Errorf("%w: --api %q: want chat, responses or messages", errUsage, *api)
	}
	c.opts.API = demo.API(*api)
	if c.stepQuery != eval.StepPrompt && c.stepQuery != eval.StepName {
		return c, fmt.Errorf("%w: --step-query is %q; want prompt or name", errUsage, c.stepQuery)
	}
	if c.queries != "" && (c.catalog == "" || c.tasks != "") {
		return c, fmt.Errorf("%w: --queries needs --catalog (the eval catalog) and replaces --tasks", errUsage)
	}
	return c, nil
}

// demoInputs are the files a demoConfig names, read and checked: the
// options of every run with the catalog, tasks and policy in them, or,
// with --queries, the queries and the eval catalog each run makes its
// tasks and catalog of.
type demoInputs struct {
	opts    demo.Options
	queries *eval.QueryFile           // nil without --queries
	defs    map[string][]rewrite.Tool // the eval catalog, with --queries
}

// loadDemo reads and checks the files c names, where their names are
// known: demo.Run's errors about its input cannot name them. It notes on
// stderr the queries it skips.
func loadDemo(c demoConfig, stderr io.Writer) (demoInputs, error) {
	in := demoInputs{opts: c.opts}
	var err error
	if c.queries != "" {
		if in.queries, err = eval.LoadQueries(c.queries); err != nil {
			return in, err
		}
		if note := in.queries.SkippedNote(); note != "" {
			fmt.Fprintln(stderr, "demo:", note)
		}
		if in.defs, err = readCatalog(c.catalog); err != nil {
			return in, err
		}
		// Checked here, where each query's FILE:LINE is known (demo.Run
		// sees only the tasks made of them), and only for the queries
		// that --subset replays.
		if _, err := in.queries.WithSubset(c.subset).CheckGold(in.defs, c.catalog, true); err != nil {
			return in, fmt.Errorf("demo: %w", err)
		}
	} else {
		if c.catalog != "" {
			if in.opts.Catalog, err = readDemoCatalog(c.catalog); err != nil {
				return in, err
			}
		}
		if c.tasks != "" {
			if in.opts.Tasks, err = readTasks(c.tasks); err != nil {
				return in, err
			}
		}
	}
	if c.config != "" {
		if in.opts.Policy, err = policy.Load(c.config); err != nil {
			return in, err
		}
	}
	return in, nil
}

// replayDemo runs the demo once per agent size of c (once over the whole
// catalog without sizes), with a progress bar when stderr is a terminal.
func replayDemo(ctx context.Context, c demoConfig, in demoInputs, stderr io.Writer) ([]*demo.Result, error) {
	sizes := c.sizes
	if len(sizes) == 0 {
		sizes = []int{0} // the bundled tasks, or the whole eval catalog
	}
	o := in.opts
	runs := make([]*demo.Result, 0, len(sizes))
	for i, n := range sizes {
		label, what := "replaying tasks", "demo"
		if len(sizes) > 1 {
			label = fmt.Sprintf("agent of %d tools (%d of %d)", n, i+1, len(sizes))
			what = fmt.Sprintf("demo over %d tools", n)
		}
		// On c.queries, not on what was read from it: a file that yields
		// nothing must never replay the bundled demo instead.
		if c.queries != "" {
			var err error
			o.Tasks, o.Catalog, err = eval.Episodes(in.queries.Queries, in.defs, c.subset, c.stepQuery, n)
			var small *eval.AgentTooSmallError
			if errors.As(err, &small) {
				return nil, fmt.Errorf("%w: --agent-tools %d: the tasks call %d tools of the catalog; want at least that many", errUsage, small.Size, small.Called)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: making tasks of queries %s: %w", what, c.queries, err)
			}
		}
		if isTerminal(stderr) {
			o.Progress = progress.Bar(stderr, label)
		}
		res, err := demo.Run(ctx, o)
		if errors.Is(err, demo.ErrMissingTools) {
			return nil, fmt.Errorf("%s: tasks %s over catalog %s: %w", what, orBundled(c.tasks), orBundled(c.catalog), err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		runs = append(runs, res)
	}
	return runs, nil
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
