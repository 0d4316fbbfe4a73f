package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHelpPrintsTheUsageAndExitsZero(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in what the command printed
	}{
		{"gateway --help lists the commands", []string{"--help"}, "commands:"},
		{"gateway -h lists the commands", []string{"-h"}, "commands:"},
		{"gateway help lists the commands", []string{"help"}, "commands:"},
		{"serve --help lists serve's flags", []string{"serve", "--help"}, "-listen"},
		{"validate --help lists validate's flags", []string{"validate", "--help"}, "-config"},
		{"search -h lists search's flags", []string{"search", "-h"}, "-catalog"},
		{"eval --help lists eval's flags", []string{"eval", "--help"}, "-queries"},
		{"demo --help lists demo's flags", []string{"demo", "--help"}, "-cache-rate"},
		{"bench --help lists bench's flags", []string{"bench", "--help"}, "-sizes"},
		{"healthcheck --help lists healthcheck's flags", []string{"healthcheck", "--help"}, "-timeout"},
		{"version --help says what version prints", []string{"version", "--help"}, "usage: gateway version"},
		{"version -h says what version prints", []string{"version", "-h"}, "usage: gateway version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut, exitOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			if code := exitCode(err, &exitOut); code != 0 || exitOut.Len() > 0 {
				t.Errorf("exit %d, printed %q (err %v), want 0 and nothing", code, exitOut.String(), err)
			}
			if printed := out.String() + errOut.String(); !strings.Contains(printed, tc.want) {
				t.Errorf("printed %q, want %q in it", printed, tc.want)
			}
		})
	}
}

// runGateway runs the gateway with args as main would and returns what it
// printed on stdout, on stderr (exitCode's line included) and its exit
// status.
func runGateway(t *testing.T, ctx context.Context, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	code = exitCode(err, &errOut)
	return out.String(), errOut.String(), code
}

// writeFile writes text to name in a new temporary directory and returns
// its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMistakenCommandLinesAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // in what the command printed
	}{
		{"version with an argument is a usage error", []string{"version", "now"}, "version takes no arguments"},
		{"version with an unknown flag is a usage error", []string{"version", "--short"}, "flag provided but not defined"},
		{"a healthcheck timeout of 0 is a usage error", []string{"healthcheck", "--timeout", "0"}, "--timeout 0s must be a duration above 0"},
		{"a negative healthcheck timeout is a usage error", []string{"healthcheck", "--timeout", "-1s"}, "--timeout -1s must be a duration above 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runGateway(t, context.Background(), tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, printed %q; want 2 and %q", code, stdout+stderr, tc.want)
			}
		})
	}
}

// TestAnInterruptedCommandExits130: Ctrl-C or SIGTERM cancels the
// command's context, and the command says it was interrupted instead of
// reporting whatever the cancellation broke ("context canceled", exit 1).
func TestAnInterruptedCommandExits130(t *testing.T) {
	cfg := writeFile(t, "tools.yaml", "deny: [a_*]\n")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"an interrupted validate exits 130", []string{"validate", cfg}},
		{"an interrupted healthcheck exits 130", []string{"healthcheck", "--listen", "127.0.0.1:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, stderr, code := runGateway(t, ctx, tc.args...)
			if code != 130 || !strings.Contains(stderr, "interrupted") {
				t.Errorf("exit %d, printed %q; want 130 and a line saying it was interrupted", code, stderr)
			}
		})
	}
}
