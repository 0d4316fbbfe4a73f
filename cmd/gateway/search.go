package main

import (
	"context"
	"errors"
	"io"
)

// runSearch is not built yet.
func runSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("search: not implemented yet")
}
