package main

import (
	"context"
	"errors"
	"io"
)

// runBench is not built yet.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench: not implemented yet")
}
