//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestValidateStopsWhenInterrupted(t *testing.T) {
	// A policy of half the size cap takes most of a second to decode (a
	// few under -race), far longer than the interrupt below takes to
	// come. A FIFO no one writes to would hold the load without the CPU,
	// but the loader refuses one before opening it.
	var b strings.Builder
	b.WriteString("tools:\n")
	for i := 0; b.Len() < 512<<10; i++ {
		fmt.Fprintf(&b, "  tool_%d: {title: t%d, keywords: [a, b, c]}\n", i, i)
	}
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
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

func TestValidateRefusesAFIFOWithoutWaitingForAWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tools.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Should a load still wait on the FIFO, open and close its writing
		// end so it ends. Non-blocking: never hang here.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runValidate(context.Background(), []string{"--config", path}, &bytes.Buffer{}, &stderr)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, errSilent) || !strings.Contains(stderr.String(), "named pipe") {
			t.Errorf("err = %v, stderr %q; want the FIFO reported as a problem", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("validate waited 5s on a FIFO")
	}
}
