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
