//go:build unix

package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTheDecisionLogOpensWithoutBlocking: a FIFO as the decision log hung
// start-up in open(2) until a reader came, before the gateway listened
// or heeded SIGTERM.
func TestTheDecisionLogOpensWithoutBlocking(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the path to open and, for a FIFO, starts its
		// reader, which returns what it read when the writer closes.
		setup   func(t *testing.T, dir string) (path string, read func() string)
		wantErr string
	}{
		{"a FIFO without a reader fails at once and says why", func(t *testing.T, dir string) (string, func() string) {
			return mkfifo(t, dir), nil
		}, "no reader"},
		{"a FIFO with a reader gets the records", func(t *testing.T, dir string) (string, func() string) {
			path := mkfifo(t, dir)
			// O_RDWR opens without waiting for a writer, and holds the
			// FIFO open for reading until the test closes it.
			r, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return path, func() string {
				line, _ := bufio.NewReader(r).ReadString('\n')
				return line
			}
		}, ""},
		{"a regular file gets the records", func(t *testing.T, dir string) (string, func() string) {
			path := filepath.Join(dir, "decisions.jsonl")
			return path, func() string {
				b, _ := os.ReadFile(path)
				return string(b)
			}
		}, ""},
		{"a device such as /dev/null opens", func(t *testing.T, dir string) (string, func() string) {
			return os.DevNull, nil
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, read := tc.setup(t, t.TempDir())
			type opened struct {
				file *decisionFile
				err  error
			}
			done := make(chan opened, 1)
			go func() {
				logger, file, err := openDecisionLog(path, io.Discard)
				if err == nil {
					logger.Info("decision", "n", 1)
				}
				done <- opened{file, err}
			}()
			var o opened
			select {
			case o = <-done:
			case <-time.After(2 * time.Second):
				// Unblock the open so the goroutine ends, then fail.
				if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
					defer r.Close()
				}
				t.Fatalf("opening %s blocked for 2 s", path)
			}
			defer o.file.Close()
			switch {
			case tc.wantErr != "" && (o.err == nil || !strings.Contains(o.err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", o.err, tc.wantErr)
			case tc.wantErr == "" && o.err != nil:
				t.Fatal(o.err)
			}
			if read != nil {
				if got := read(); !strings.Contains(got, `"msg":"decision"`) {
					t.Errorf("read %q, want the record", got)
				}
			}
		})
	}
}

func mkfifo(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return path
}
