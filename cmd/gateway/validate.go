package main

import (
	"context"
	"errors"
	"io"
)

// runValidate is not built yet.
func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("validate: not implemented yet")
}
