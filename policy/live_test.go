package policy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// syncBuffer is a log sink the watcher goroutine and the test can share.
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

// eventually polls cond for up to 3s: a reload must land "within a couple of
// seconds".
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting until %s", what)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceFile saves the way many editors do: write a temp file, rename it
// over the original.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp~"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestLiveWatch(t *testing.T) {
	defer goleak.VerifyNone(t, ignoreBleveWorkers)
	dir := writeFiles(t, map[string]string{
		"tools.yaml":    "deny: [a_*]\ncategories:\n  code: {hints: hints/code.md}\n",
		"hints/code.md": "old guidance",
	})
	path := filepath.Join(dir, "tools.yaml")
	logs := &syncBuffer{}
	live, err := NewLive(path, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reloads []error
	live.OnReload = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reloads = append(reloads, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- live.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v", err)
		}
	}()
	time.Sleep(100 * time.Millisecond) // let the watcher register its directories

	t.Run("a good edit applies within a couple of seconds", func(t *testing.T) {
		before := live.Current().Generation()
		writeFile(t, path, "deny: [a_*, '*delete*']\ncategories:\n  code: {hints: hints/code.md}\n")
		eventually(t, "delete tools are denied", func() bool { return !live.Current().Decide("delete_repo", "delete it").Visible })
		if live.Current().Generation() == before {
			t.Error("generation did not change")
		}
	})
	t.Run("an editor's rename-over save applies", func(t *testing.T) {
		replaceFile(t, path, "deny: ['*drop*']\ncategories:\n  code: {hints: hints/code.md}\n")
		eventually(t, "drop tools are denied", func() bool { return !live.Current().Decide("drop_table", "drop").Visible })
	})
	t.Run("editing a hints file reloads its text", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "hints", "code.md"), "new guidance")
		eventually(t, "hints change", func() bool { return live.Current().Hints("code") == "new guidance" })
	})
	t.Run("a broken edit keeps the last good policy and logs file:line", func(t *testing.T) {
		good := live.Current()
		writeFile(t, path, "deny: ['*drop*'\n")
		eventually(t, "the failure is logged", func() bool { return strings.Contains(logs.String(), "tools.yaml:1:") })
		if live.Current() != good {
			t.Error("a broken edit replaced the snapshot")
		}
		if live.Current().Decide("drop_table", "drop").Visible {
			t.Error("the last good deny stopped applying")
		}
		mu.Lock()
		defer mu.Unlock()
		var perr *Errors
		if len(reloads) == 0 || !errors.As(reloads[len(reloads)-1], &perr) {
			t.Errorf("OnReload did not see the failure: %v", reloads)
		}
	})
	t.Run("removing a referenced hints file is a rejected edit", func(t *testing.T) {
		writeFile(t, path, "deny: ['*drop*']\ncategories:\n  code: {hints: hints/code.md}\n")
		eventually(t, "the fixed file applies", func() bool { return live.Current().Hints("code") == "new guidance" })
		good := live.Current()
		if err := os.Remove(filepath.Join(dir, "hints", "code.md")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the failure is logged", func() bool { return strings.Contains(logs.String(), "hints/code.md") })
		if live.Current() != good {
			t.Error("a missing hints file replaced the snapshot")
		}
	})
}

func TestLiveReload(t *testing.T) {
	dir := writeFiles(t, map[string]string{"tools.yaml": "core: [a]\n"})
	path := filepath.Join(dir, "tools.yaml")
	live, err := NewLive(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a SIGHUP-style reload applies a good file", func(t *testing.T) {
		writeFile(t, path, "core: [b]\n")
		if err := live.Reload(); err != nil {
			t.Fatal(err)
		}
		if !live.Current().Decide("b", "").Core {
			t.Error("reload did not apply")
		}
	})
	t.Run("a reload of a bad file returns its problems and keeps serving", func(t *testing.T) {
		old := live.Current()
		writeFile(t, path, "core: [b]\nrisk: {gate: sometimes}\n")
		err := live.Reload()
		var perr *Errors
		if !errors.As(err, &perr) || perr.Problems[0].Line != 2 {
			t.Fatalf("got %v", err)
		}
		if live.Current() != old {
			t.Error("snapshot replaced")
		}
	})
	t.Run("an emptied file is refused on reload and the last good policy keeps serving", func(t *testing.T) {
		writeFile(t, path, "deny: [\"*delete*\"]\n")
		if err := live.Reload(); err != nil {
			t.Fatal(err)
		}
		good := live.Current()
		writeFile(t, path, "")
		if err := live.Reload(); err == nil || !strings.Contains(err.Error(), "the policy file is empty") {
			t.Fatalf("got %v, want the empty file refused", err)
		}
		if live.Current() != good || live.Current().Decide("delete_repo", "delete it").Visible {
			t.Error("the empty file replaced the policy and its deny")
		}
	})
	t.Run("a file over 1 MiB is refused on reload and the last good policy keeps serving", func(t *testing.T) {
		writeFile(t, path, "deny: [\"*delete*\"]\n")
		if err := live.Reload(); err != nil {
			t.Fatal(err)
		}
		good := live.Current()
		writeFile(t, path, "core: [a]\n#"+strings.Repeat("x", 1<<20)+"\n")
		if err := live.Reload(); err == nil || !strings.Contains(err.Error(), "1 MiB") {
			t.Fatalf("got %v, want the oversized file refused", err)
		}
		if live.Current() != good {
			t.Error("the oversized file replaced the policy")
		}
	})
	t.Run("an empty initial file is an error", func(t *testing.T) {
		writeFile(t, path, "")
		if _, err := NewLive(path, nil); err == nil {
			t.Error("NewLive accepted an empty file")
		}
	})
	t.Run("a bad initial file is an error", func(t *testing.T) {
		writeFile(t, path, "core: [\n")
		if _, err := NewLive(path, nil); err == nil {
			t.Error("NewLive accepted a bad file")
		}
	})
	t.Run("no path serves the defaults and Watch ends with ctx", func(t *testing.T) {
		defer goleak.VerifyNone(t, ignoreBleveWorkers)
		l, err := NewLive("", nil)
		if err != nil || l.Current().Source() != "built-in" {
			t.Fatalf("%v %v", err, l)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := l.Watch(ctx); err != nil {
			t.Error(err)
		}
	})
}

// ignoreBleveWorkers skips the analysis workers bleve starts when its
// package loads (policy imports selector, which imports bleve): they live as
// long as the process and are not the watcher's.
var ignoreBleveWorkers = goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker")
