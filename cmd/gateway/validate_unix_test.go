//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestValidateStopsWhenInterrupted(t *testing.T) {
	// A FIFO no one writes to holds the load as long as a policy at the
	// size cap takes to decode (seconds), without burning the CPU.
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Open and close the writing end so the load still waiting on the
		// FIFO reads an empty file and ends. Non-blocking: never hang here.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		done <- runValidate(ctx, []string{"--config", path}, &stdout, &stderr)
	}()
	time.Sleep(50 * time.Millisecond) // let the load start
	cancel()                          // what SIGINT does to main's context
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("validate kept loading for 2s after the interrupt")
	}
}
