// Command gateway is toolgate: a transparent OpenAI-compatible gateway that
// routes large tool catalogs through tool_search. This package holds flags,
// environment, subcommands and wiring only; the logic lives in proxy,
// rewrite, selector, policy and session, and that of the demo, bench and
// eval commands in internal/demo, internal/bench and internal/eval.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/gin-gonic/gin"
)

// errUsage marks a command-line mistake: exit code 2 instead of 1.
var errUsage = errors.New("usage error")

func main() {
	// The gateway's handler is a gin router, and gin's mode is
	// process-wide: the program, not the proxy package, chooses it.
	// Release mode keeps gin's debug lines (every route, a warning) out
	// of stdout, where serve's output and the subcommands' reports go.
	// The package's tests set it too (TestMain).
	gin.SetMode(gin.ReleaseMode)
	// The runtime's soft memory limit is process-wide too (see
	// softMemoryLimit); serve's start-up line reports it.
	if limit := softMemoryLimit(os.Getenv("GOMEMLIMIT"), cgroupMemoryFiles); limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode is the one place that turns an error into an exit status.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0 // -h asked for the usage, which the flag set has printed
	case errors.Is(err, errSilent):
		return 1
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(stderr, "gateway:", err)
		return 130 // as a shell reports a command that SIGINT ended
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "gateway:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "gateway:", err)
		return 1
	}
}

// errSilent is returned by commands that already printed why they failed.
var errSilent = errors.New("failed")

// errInterrupted marks a command that Ctrl-C or SIGTERM cut short, so that
// it exits 130 and says so instead of reporting whatever the cancellation
// broke: the error of work cut short, such as a stopping gateway's 404,
// says nothing about the command.
var errInterrupted = errors.New("interrupted")

// interrupted marks err as an interruption when the command's context was
// canceled: once it is, any failure is the cancellation's doing.
func interrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, errInterrupted) {
		return err
	}
	return fmt.Errorf("%w: %w", errInterrupted, err)
}

const usage = `usage: gateway [command] [flags]

commands:
  serve        run the gateway (default)
  validate     check a tools.yaml and print every problem as FILE:LINE:COL
  search       rank a catalog's tools for a query, with per-signal scores
  eval         measure recall of a catalog against a query set
  demo         replay agent tasks direct and through the gateway, offline
  bench        measure the latency the gateway adds, next to a bare proxy
  healthcheck  ask a running gateway's /healthz (exit 0 when ready)
  version      print the build's version

run 'gateway COMMAND -h' for a command's flags.
`

// run dispatches to a subcommand. It never calls os.Exit.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && (isHelp(args[0]) || isVersion(args[0]) || len(args[0]) > 0 && args[0][0] != '-') {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, stdout, stderr)
	case "validate":
		return interrupted(ctx, runValidate(ctx, args, stdout, stderr))
	case "search":
		return interrupted(ctx, runSearch(ctx, args, stdout, stderr))
	case "eval":
		return interrupted(ctx, runEval(ctx, args, stdout, stderr))
	case "demo":
		return interrupted(ctx, runDemo(ctx, args, stdout, stderr))
	case "bench":
		return interrupted(ctx, runBench(ctx, args, stdout, stderr))
	case "healthcheck":
		return interrupted(ctx, runHealthcheck(ctx, args, stdout, stderr))
	case "version", "-version", "--version":
		return runVersion(args, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

// isVersion reports whether arg is a version flag, taken as the command.
func isVersion(arg string) bool { return arg == "-version" || arg == "--version" }

// isHelp reports whether arg asks for help the way the flag package
// understands it, so "gateway --help" lists the commands instead of being
// taken for serve's flags.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}
