package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// lines returns the JSON lines of the file at path (none when it is
// missing) and fails on one that is not JSON: a torn record.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		if !json.Valid([]byte(l)) {
			t.Fatalf("%s holds a line that is not JSON: %q", path, l)
		}
		out = append(out, l)
	}
	return out
}

// TestSIGHUPReopensTheDecisionLog: logrotate renames or deletes the
// file and sends SIGHUP; the records after it must land in a file at the
// path, not in the rotated or deleted one.
func TestSIGHUPReopensTheDecisionLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rotate func(t *testing.T, path string)
	}{
		{"after a rename and a new empty file, records go to the new file", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"after a rename alone, the file is created again", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"after the file is deleted, records go to a new file at its path", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "decisions.jsonl")
			logger, dlog, err := openDecisionLog(path, io.Discard, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer dlog.Close(context.Background())
			live, err := policy.NewLive("", nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hup := make(chan os.Signal, 1)
			var said syncBuffer
			go reloadOnHangup(ctx, hup, live, dlog, slog.New(slog.NewJSONHandler(&said, nil)))

			logger.Info("decision", "n", 0)
			tc.rotate(t, path)
			hup <- nil // the value is not read
			for deadline := time.Now().Add(2 * time.Second); !strings.Contains(said.String(), "decision log reopened"); {
				if time.Now().After(deadline) {
					t.Fatalf("the decision log was not reopened in 2 s after SIGHUP; the gateway said: %s", said.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			logger.Info("decision", "n", "last")
			if err := dlog.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := lines(t, path); len(got) != 1 || !strings.Contains(got[0], `"n":"last"`) {
				t.Errorf("%s holds %v, want the record logged after the SIGHUP alone", path, got)
			}
			if got := lines(t, path+".1"); len(got) > 0 && (len(got) != 1 || !strings.Contains(got[0], `"n":0`)) {
				t.Errorf("the rotated file holds %v, want the record logged before the SIGHUP alone", got)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer for a logger written from goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAReopenLosesAndTearsNoRecord: records are written from request
// goroutines while SIGHUP swaps the file under them.
func TestAReopenLosesAndTearsNoRecord(t *testing.T) {
	const writers, each, rotations = 8, 300, 30
	dir := t.TempDir()
	path := filepath.Join(dir, "decisions.jsonl")
	logger, dlog, err := openDecisionLog(path, io.Discard, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				logger.Info("decision", "writer", w, "i", i, "pad", strings.Repeat("x", 200))
			}
		}()
	}
	for r := range rotations {
		if err := os.Rename(path, fmt.Sprintf("%s.%d", path, r)); err != nil {
			t.Fatal(err)
		}
		if err := dlog.Reopen(context.Background()); err != nil {
			t.Fatalf("reopen %d: %v", r, err)
		}
	}
	wg.Wait()
	if err := dlog.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(path + "*")
	total := 0
	for _, f := range files {
		total += len(lines(t, f))
	}
	t.Run("every record written lands whole in one of the files", func(t *testing.T) {
		if total != writers*each {
			t.Errorf("%d records in %d files, want %d", total, len(files), writers*each)
		}
	})
}
