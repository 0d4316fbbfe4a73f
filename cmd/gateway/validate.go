package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/toolgate/toolgate/policy"
)

// runValidate checks a policy file the way the gateway would load it and
// prints either a one-line summary or every problem as FILE:LINE:COL:
// message. It does not start anything or contact the upstream.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "policy file to check, also given as the one argument: gateway validate FILE (env GATEWAY_CONFIG; default tools.yaml)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	// The file named on the command line, by --config or as the argument
	// ("gateway validate tools.yaml" reads naturally too), wins over
	// GATEWAY_CONFIG, which the container image always sets.
	path := *config
	switch {
	case fs.NArg() == 1 && path == "":
		path = fs.Arg(0)
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	case path == "":
		path = envOr("GATEWAY_CONFIG", "tools.yaml")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	snap, err := loadUntil(ctx, path)
	if err != nil {
		var perr *policy.Errors
		if !errors.As(err, &perr) {
			return fmt.Errorf("validating %s: %w", path, err)
		}
		for _, p := range perr.Problems {
			fmt.Fprintln(stderr, p.String())
		}
		fmt.Fprintf(stderr, "%s: %d problem(s)\n", path, len(perr.Problems))
		return errSilent
	}
	fmt.Fprintln(stdout, summary(snap))
	return nil
}

// loadUntil is policy.Load that gives up waiting when ctx ends (SIGINT,
// SIGTERM). Load takes no context because go-yaml's parser cannot be
// interrupted, and a file at the size cap takes seconds; the abandoned load
// ends with the process.
func loadUntil(ctx context.Context, path string) (*policy.Snapshot, error) {
	type result struct {
		snap *policy.Snapshot
		err  error
	}
	done := make(chan result, 1) // buffered: an abandoned load must not block
	go func() {
		snap, err := policy.Load(path)
		done <- result{snap, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-done:
		return r.snap, r.err
	}
}

// summary is the one line validate prints for a good file. The upstream
// is printed through policy.RedactURL: the line goes to CI logs, and a
// URL may carry credentials (https://user:pw@host/v1, a key as the user
// name or in the query).
func summary(s *policy.Snapshot) string {
	st := s.Stats()
	return fmt.Sprintf("%s: ok (mode %s, upstream %s, %d core, %d deny, %d allow, %d tools, %d bundles, %d anchors, %d categories with hints, %d profiles)",
		s.Source(), s.Gateway.Mode, policy.RedactURL(s.Gateway.Upstream), st.Core, st.Deny, st.Allow, st.Tools, st.Bundles, st.Anchors, st.Hints, st.Profiles)
}
