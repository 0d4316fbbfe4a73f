package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
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
	t.Run("a reload whose upstream key names an unset variable is refused and the last good key keeps serving", func(t *testing.T) {
		t.Setenv("TOOLGATE_TEST_KEY", "sk-good")
		writeFile(t, path, "gateway: {upstream_key: $TOOLGATE_TEST_KEY}\n")
		if err := live.Reload(); err != nil {
			t.Fatal(err)
		}
		good := live.Current()
		writeFile(t, path, "gateway: {upstream_key: $TOOLGATE_TEST_UNSET_KEY}\n")
		err := live.Reload()
		var perr *Errors
		if !errors.As(err, &perr) || perr.Problems[0].Line != 1 || perr.Problems[0].Col != 25 {
			t.Fatalf("got %v, want the unset variable refused at 1:25", err)
		}
		if live.Current() != good || live.Current().Gateway.UpstreamKey != "sk-good" {
			t.Errorf("the refused file replaced the policy: upstream key %q", live.Current().Gateway.UpstreamKey)
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

// watching starts l.Watch for the rest of the test and stops it, checking
// it leaves no goroutine behind, when the test ends.
func watching(t *testing.T, l *Live) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v", err)
		}
		goleak.VerifyNone(t, ignoreBleveWorkers)
	})
	time.Sleep(100 * time.Millisecond) // let the watcher register its directories
}

// symlink points link at target, replacing any link there atomically the
// way ln -sfn and Kubernetes do: a new link renamed over the old.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp~"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

func TestLiveWatchFollowsASymlinkedConfig(t *testing.T) {
	root := writeFiles(t, map[string]string{
		"real/tools.yaml":  "deny: [a_*]\n",
		"other/tools.yaml": "deny: [c_*]\n",
	})
	if err := os.Mkdir(filepath.Join(root, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "conf", "tools.yaml")
	symlink(t, filepath.Join("..", "real", "tools.yaml"), path)
	live, err := NewLive(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	watching(t, live)
	denied := func(tool string) func() bool {
		return func() bool { return !live.Current().Decide(tool, "").Visible }
	}

	t.Run("editing the target in another directory applies", func(t *testing.T) {
		writeFile(t, filepath.Join(root, "real", "tools.yaml"), "deny: [b_*]\n")
		eventually(t, "b_x is denied", denied("b_x"))
	})
	t.Run("an atomic replace of the target applies", func(t *testing.T) {
		replaceFile(t, filepath.Join(root, "real", "tools.yaml"), "deny: [d_*]\n")
		eventually(t, "d_x is denied", denied("d_x"))
	})
	t.Run("pointing the link at a file in a third directory applies", func(t *testing.T) {
		symlink(t, filepath.Join("..", "other", "tools.yaml"), path)
		eventually(t, "c_x is denied", denied("c_x"))
	})
	t.Run("editing the new target then applies too", func(t *testing.T) {
		writeFile(t, filepath.Join(root, "other", "tools.yaml"), "deny: [e_*]\n")
		eventually(t, "e_x is denied", denied("e_x"))
	})
}

func TestLiveWatchFollowsAConfigMapSwap(t *testing.T) {
	// A Kubernetes ConfigMap volume: tools.yaml -> ..data/tools.yaml, and
	// ..data -> ..<timestamp>, swapped for a new directory on every update.
	dir := writeFiles(t, map[string]string{"..v1/tools.yaml": "deny: [a_*]\n"})
	symlink(t, "..v1", filepath.Join(dir, "..data"))
	path := filepath.Join(dir, "tools.yaml")
	symlink(t, filepath.Join("..data", "tools.yaml"), path)
	logs := &syncBuffer{}
	live, err := NewLive(path, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	watching(t, live)
	defer func() {
		// The old ..<timestamp> directory is gone for good, and nothing
		// reads it any more: its removal is no cause for a warning.
		if strings.Contains(logs.String(), "level=WARN") {
			t.Errorf("an ordinary update logged a warning:\n%s", logs.String())
		}
	}()
	for i, tool := range []string{"b_x", "c_x"} {
		t.Run("update "+strconv.Itoa(i+1)+" applies", func(t *testing.T) {
			old, next := "..v"+strconv.Itoa(i+1), "..v"+strconv.Itoa(i+2)
			if err := os.Mkdir(filepath.Join(dir, next), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, next, "tools.yaml"), "deny: ["+tool[:1]+"_*]\n")
			symlink(t, next, filepath.Join(dir, "..data"))
			if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
				t.Fatal(err)
			}
			eventually(t, tool+" is denied", func() bool { return !live.Current().Decide(tool, "").Visible })
		})
	}
}

func TestLiveWatchFollowsALinkedConfigInALinkedDirectory(t *testing.T) {
	// /etc/toolgate -> /srv/toolgate, and there tools.yaml -> current.yaml:
	// the link and its target share a directory known by two names.
	root := writeFiles(t, map[string]string{"srv/current.yaml": "deny: [a_*]\n"})
	symlink(t, "current.yaml", filepath.Join(root, "srv", "tools.yaml"))
	symlink(t, "srv", filepath.Join(root, "etc"))
	live, err := NewLive(filepath.Join(root, "etc", "tools.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	watching(t, live)
	t.Run("editing the target applies", func(t *testing.T) {
		writeFile(t, filepath.Join(root, "srv", "current.yaml"), "deny: [b_*]\n")
		eventually(t, "b_x is denied", func() bool { return !live.Current().Decide("b_x", "").Visible })
	})
}

func TestLiveReloadOfUnchangedContentKeepsTheSnapshot(t *testing.T) {
	const policy = "deny: [a_*]\ncategories:\n  code: {hints: hints/code.md}\nprofiles:\n  - name: p\n    match: {model: 'gpt-*'}\n    categories:\n      web: {hints: hints/web.md}\n"
	dir := writeFiles(t, map[string]string{
		"tools.yaml":    policy,
		"hints/code.md": "code guidance",
		"hints/web.md":  "web guidance",
	})
	path := filepath.Join(dir, "tools.yaml")
	live, err := NewLive(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var changes, oks, fails int
	live.OnChange = func(*Snapshot) { changes++ }
	live.OnReload = func(err error) {
		if err != nil {
			fails++
		} else {
			oks++
		}
	}
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name    string
		edit    func(t *testing.T)
		wantNew bool
	}{
		{"a touch keeps the snapshot and its generation", func(t *testing.T) {
			if err := os.Chtimes(path, later, later); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a reload with nothing changed (SIGHUP) keeps the snapshot", func(*testing.T) {}, false},
		{"rewriting the same text by a rename keeps the snapshot", func(t *testing.T) { replaceFile(t, path, policy) }, false},
		{"a changed hints file of a profile publishes a new snapshot", func(t *testing.T) {
			writeFile(t, filepath.Join(dir, "hints", "web.md"), "new web guidance")
		}, true},
		{"a changed hints file publishes a new snapshot", func(t *testing.T) {
			writeFile(t, filepath.Join(dir, "hints", "code.md"), "new code guidance")
		}, true},
		{"a changed policy file publishes a new snapshot", func(t *testing.T) { writeFile(t, path, policy+"core: [b]\n") }, true},
		{"restoring the last good text after a broken edit keeps the snapshot", func(t *testing.T) {
			writeFile(t, path, "deny: [\n")
			if err := live.Reload(); err == nil {
				t.Fatal("the broken edit was accepted")
			}
			writeFile(t, path, policy+"core: [b]\n")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, changesBefore, oksBefore := live.Current(), changes, oks
			tc.edit(t)
			if err := live.Reload(); err != nil {
				t.Fatal(err)
			}
			if oks != oksBefore+1 {
				t.Errorf("OnReload(nil) called %d times, want once: it is a successful reload", oks-oksBefore)
			}
			gotNew := live.Current() != before
			if gotNew != tc.wantNew {
				t.Errorf("new snapshot: %v, want %v", gotNew, tc.wantNew)
			}
			if gotNew == (live.Current().Generation() == before.Generation()) {
				t.Errorf("generation %x -> %x with new snapshot %v", before.Generation(), live.Current().Generation(), gotNew)
			}
			if (changes != changesBefore) != tc.wantNew {
				t.Errorf("OnChange called %d times, want it only for a new snapshot", changes-changesBefore)
			}
		})
	}
	if live.Current().Hints("code") != "new code guidance" || !live.Current().Decide("b", "").Core {
		t.Error("the last change is not what serves")
	}
}

// copyDir copies the regular files of src into a new directory dst, the
// way cp -r does: the directory first, then its files.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dst, e.Name()), string(b))
	}
}

func mustDo(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestLiveWatchSurvivesReplacedDirectories(t *testing.T) {
	const (
		events = time.Hour              // the periodic check never runs: events alone must do
		poll   = 100 * time.Millisecond // nothing reports the change: the periodic check must see it
	)
	denied := func(tool string) func(*Snapshot) bool {
		return func(s *Snapshot) bool { return !s.Decide(tool, "").Visible }
	}
	hints := func(text string) func(*Snapshot) bool {
		return func(s *Snapshot) bool { return s.Hints("code") == text }
	}
	const withHints = "categories:\n  code: {hints: hints/code.md}\n"
	for _, tc := range []struct {
		name   string
		poll   time.Duration
		files  map[string]string
		setup  func(t *testing.T, root string) // links, made before loading
		config string                          // relative to root
		// change replaces a directory; applied is true once what it
		// brought serves. edit then changes a file in place, and edited
		// is true once that serves: the new directory is watched.
		change  func(t *testing.T, root string)
		applied func(*Snapshot) bool
		edit    func(t *testing.T, root string)
		edited  func(*Snapshot) bool
		logs    []string
	}{
		{
			name:  "a Capistrano current link re-pointed by ln -s and mv -T applies, and so do edits of the new release",
			poll:  poll,
			files: map[string]string{"releases/r1/tools.yaml": "deny: [a_*]\n", "releases/r2/tools.yaml": "deny: [b_*]\n"},
			setup: func(t *testing.T, root string) {
				symlink(t, filepath.Join("releases", "r1"), filepath.Join(root, "current"))
			},
			config: "current/tools.yaml",
			change: func(t *testing.T, root string) {
				symlink(t, filepath.Join("releases", "r2"), filepath.Join(root, "current"))
			},
			applied: denied("b_x"),
			edit: func(t *testing.T, root string) {
				writeFile(t, filepath.Join(root, "releases", "r2", "tools.yaml"), "deny: [c_*]\n")
			},
			edited: denied("c_x"),
			logs:   []string{"watching a policy directory again"},
		},
		{
			name:  "a current link re-pointed by ln -sfn applies",
			poll:  poll,
			files: map[string]string{"releases/r1/tools.yaml": "deny: [a_*]\n", "releases/r2/tools.yaml": "deny: [b_*]\n"},
			setup: func(t *testing.T, root string) {
				mustDo(t, os.Symlink(filepath.Join("releases", "r1"), filepath.Join(root, "current")))
			},
			config: "current/tools.yaml",
			change: func(t *testing.T, root string) { // ln -sfn: unlink, then link
				link := filepath.Join(root, "current")
				mustDo(t, os.Remove(link), os.Symlink(filepath.Join("releases", "r2"), link))
			},
			applied: denied("b_x"),
			edit: func(t *testing.T, root string) {
				writeFile(t, filepath.Join(root, "releases", "r2", "tools.yaml"), "deny: [c_*]\n")
			},
			edited: denied("c_x"),
		},
		{
			name:   "a config directory removed and created again applies, and so do edits in it",
			poll:   poll,
			files:  map[string]string{"conf/tools.yaml": "deny: [a_*]\n"},
			config: "conf/tools.yaml",
			change: func(t *testing.T, root string) {
				mustDo(t, os.RemoveAll(filepath.Join(root, "conf")))
				time.Sleep(300 * time.Millisecond) // long enough for the watch to be gone
				mustDo(t, os.Mkdir(filepath.Join(root, "conf"), 0o755))
				writeFile(t, filepath.Join(root, "conf", "tools.yaml"), "deny: [b_*]\n")
			},
			applied: denied("b_x"),
			edit: func(t *testing.T, root string) {
				writeFile(t, filepath.Join(root, "conf", "tools.yaml"), "deny: [c_*]\n")
			},
			edited: denied("c_x"),
			logs:   []string{"a watched policy directory disappeared", "watching a policy directory again"},
		},
		{
			name:   "hints/ removed and copied anew applies, and so do edits in it",
			poll:   events,
			files:  map[string]string{"tools.yaml": withHints, "hints/code.md": "old", "hints.new/code.md": "new"},
			config: "tools.yaml",
			change: func(t *testing.T, root string) {
				mustDo(t, os.RemoveAll(filepath.Join(root, "hints")))
				copyDir(t, filepath.Join(root, "hints.new"), filepath.Join(root, "hints"))
			},
			applied: hints("new"),
			edit:    func(t *testing.T, root string) { writeFile(t, filepath.Join(root, "hints", "code.md"), "edited") },
			edited:  hints("edited"),
			logs:    []string{"watching a policy directory again"},
		},
		{
			name:   "hints/ replaced by renames applies, and so do edits in it",
			poll:   events,
			files:  map[string]string{"tools.yaml": withHints, "hints/code.md": "old", "hints.new/code.md": "new"},
			config: "tools.yaml",
			change: func(t *testing.T, root string) {
				mustDo(t, os.Rename(filepath.Join(root, "hints"), filepath.Join(root, "hints.old")),
					os.Rename(filepath.Join(root, "hints.new"), filepath.Join(root, "hints")))
			},
			applied: hints("new"),
			edit:    func(t *testing.T, root string) { writeFile(t, filepath.Join(root, "hints", "code.md"), "edited") },
			edited:  hints("edited"),
			logs:    []string{"watching a policy directory again"},
		},
		{
			name:  "a hints file by absolute path whose directory is created again applies, and so do edits in it",
			poll:  poll,
			files: map[string]string{"ext/code.md": "old"},
			setup: func(t *testing.T, root string) {
				writeFile(t, filepath.Join(root, "tools.yaml"), "categories:\n  code: {hints: "+filepath.Join(root, "ext", "code.md")+"}\n")
			},
			config: "tools.yaml",
			change: func(t *testing.T, root string) {
				mustDo(t, os.RemoveAll(filepath.Join(root, "ext")))
				time.Sleep(300 * time.Millisecond)
				mustDo(t, os.Mkdir(filepath.Join(root, "ext"), 0o755))
				writeFile(t, filepath.Join(root, "ext", "code.md"), "new")
			},
			applied: hints("new"),
			edit:    func(t *testing.T, root string) { writeFile(t, filepath.Join(root, "ext", "code.md"), "edited") },
			edited:  hints("edited"),
			logs:    []string{"a watched policy directory disappeared", "watching a policy directory again"},
		},
		{
			name:  "a symlinked config whose target is deleted and created again a second later applies, and so do edits of it",
			poll:  events,
			files: map[string]string{"real/tools.yaml": "deny: [a_*]\n", "conf/.keep": ""},
			setup: func(t *testing.T, root string) {
				symlink(t, filepath.Join("..", "real", "tools.yaml"), filepath.Join(root, "conf", "tools.yaml"))
			},
			config: "conf/tools.yaml",
			change: func(t *testing.T, root string) {
				mustDo(t, os.Remove(filepath.Join(root, "real", "tools.yaml")))
				time.Sleep(time.Second)
				writeFile(t, filepath.Join(root, "real", "tools.yaml"), "deny: [b_*]\n")
			},
			applied: denied("b_x"),
			edit: func(t *testing.T, root string) {
				writeFile(t, filepath.Join(root, "real", "tools.yaml"), "deny: [c_*]\n")
			},
			edited: denied("c_x"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeFiles(t, tc.files)
			if tc.setup != nil {
				tc.setup(t, root)
			}
			logs := &syncBuffer{}
			live, err := NewLive(filepath.Join(root, tc.config), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if err != nil {
				t.Fatal(err)
			}
			live.poll, live.settle = tc.poll, 200*time.Millisecond
			watching(t, live)
			tc.change(t, root)
			defer func() {
				if t.Failed() {
					t.Log(logs.String())
				}
			}()
			eventually(t, "the replaced directory's content serves", func() bool { return tc.applied(live.Current()) })
			tc.edit(t, root)
			eventually(t, "an edit in it serves", func() bool { return tc.edited(live.Current()) })
			for _, want := range tc.logs {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("no log %q in:\n%s", want, logs.String())
				}
			}
		})
	}
}

func TestLiveWatchChecksWithoutReloadingWhatItRead(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T, dir string)
		reloads int
	}{
		{"an unchanged policy is never reloaded", func(*testing.T, string) {}, 0},
		{"a broken edit is reloaded once, not at every check", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "tools.yaml"), "deny: [\n")
		}, 1},
		{"a removed hints file is reloaded once, not at every check", func(t *testing.T, dir string) {
			mustDo(t, os.Remove(filepath.Join(dir, "hints", "code.md")))
		}, 1},
		{"a policy that starts reading a new hints file is reloaded once", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "tools.yaml"), "categories:\n  code: {hints: hints/code.md}\n  web: {hints: hints/web.md}\n")
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"tools.yaml":    "categories:\n  code: {hints: hints/code.md}\n",
				"hints/code.md": "guidance",
				"hints/web.md":  "web guidance",
			})
			live, reloads := countingLive(t, filepath.Join(dir, "tools.yaml"))
			live.poll, live.settle = 20*time.Millisecond, 100*time.Millisecond
			watching(t, live)
			tc.change(t, dir)
			time.Sleep(time.Second) // 50 checks
			if n := reloads(); n != tc.reloads {
				t.Errorf("%d reloads, want %d", n, tc.reloads)
			}
		})
	}
}

func TestLiveWatchReadsAFileOnlyOnceItSettled(t *testing.T) {
	const (
		before = "core: [a]\ndeny: [secret_*]\n"
		head   = "core: [b]\n" // valid on its own, and without the deny
		tail   = "deny: [secret_*]\n"
	)
	for _, tc := range []struct {
		name string
		save func(t *testing.T, path string)
	}{
		{"a save that stalls part-way is read only once it is whole", func(t *testing.T, path string) {
			f, err := os.Create(path) // truncates in place, as most editors' plain save does
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(head); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // longer than the debounce, shorter than the settle time
			if _, err := f.WriteString(tail); err != nil {
				t.Fatal(err)
			}
		}},
		{"a temp file renamed over the policy applies", func(t *testing.T, path string) {
			replaceFile(t, path, head+tail)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"tools.yaml": before})
			path := filepath.Join(dir, "tools.yaml")
			live, err := NewLive(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var leaked bool
			live.OnChange = func(s *Snapshot) {
				mu.Lock()
				defer mu.Unlock()
				leaked = leaked || s.Decide("secret_x", "").Visible
			}
			live.debounce, live.settle = 50*time.Millisecond, 600*time.Millisecond
			watching(t, live)
			tc.save(t, path)
			eventually(t, "the whole save serves", func() bool { return live.Current().Decide("b", "").Core })
			mu.Lock()
			defer mu.Unlock()
			if leaked {
				t.Error("a half-written file was published: the denied tool was visible")
			}
			if live.Current().Decide("secret_x", "").Visible {
				t.Error("the denied tool is visible")
			}
		})
	}
}

// rewriting rewrites each of names every 50 ms, as an editor's swap file
// or a busy tool does, until the returned func is called or the test ends.
func rewriting(t *testing.T, names ...string) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
				for _, n := range names {
					_ = os.WriteFile(n, []byte(strconv.Itoa(i)), 0o644) // best effort: the test checks the reloads
				}
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop) // before watching's cleanup checks for leaks
	return stop
}

func TestLiveWatchIsNotHeldUpByOtherFilesInHints(t *testing.T) {
	newLive := func(t *testing.T) (string, *Live, func() int) {
		dir := writeFiles(t, map[string]string{
			"tools.yaml":     "deny: [a_*]\ncategories:\n  files: {hints: hints/files.md}\n",
			"hints/files.md": "guidance",
		})
		live, reloads := countingLive(t, filepath.Join(dir, "tools.yaml"))
		live.settle = 100 * time.Millisecond
		return dir, live, reloads
	}
	t.Run("editor temp files rewritten in hints/ reload nothing", func(t *testing.T) {
		dir, live, reloads := newLive(t)
		watching(t, live)
		var names []string
		for _, n := range []string{".files.md.swp", ".files.md.swx", "files.md~", "files.md.tmp", ".#files.md"} {
			names = append(names, filepath.Join(dir, "hints", n))
		}
		stop := rewriting(t, names...)
		time.Sleep(600 * time.Millisecond)
		stop()
		time.Sleep(600 * time.Millisecond) // past the debounce and the settle time
		if n := reloads(); n != 0 {
			t.Errorf("%d reloads, want none", n)
		}
	})
	t.Run("a stream of events in hints/ puts a policy edit off no longer than the cap", func(t *testing.T) {
		dir, live, _ := newLive(t)
		live.maxWait = 500 * time.Millisecond
		watching(t, live)
		rewriting(t, filepath.Join(dir, "hints", "notes.md")) // in hints/, so it counts; not in use, so it settles nothing
		writeFile(t, filepath.Join(dir, "tools.yaml"), "deny: [b_*]\ncategories:\n  files: {hints: hints/files.md}\n")
		eventually(t, "the edit serves while the stream goes on", func() bool { return !live.Current().Decide("b_x", "").Visible })
	})
}

// countingLive returns a Live serving path and a count of its reload
// attempts so far.
func countingLive(t *testing.T, path string) (*Live, func() int) {
	t.Helper()
	live, err := NewLive(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reloads := 0
	live.OnReload = func(error) {
		mu.Lock()
		defer mu.Unlock()
		reloads++
	}
	return live, func() int {
		mu.Lock()
		defer mu.Unlock()
		return reloads
	}
}

func TestLiveWatchReadsFilesThatNeverSettleAfterTheCap(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"tools.yaml":    "deny: [a_*]\ncategories:\n  code: {hints: hints/code.md}\n",
		"hints/code.md": "guidance",
	})
	live, err := NewLive(filepath.Join(dir, "tools.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	live.settle, live.maxSettle = 300*time.Millisecond, time.Second
	watching(t, live)
	// A program touches the hints file every 100 ms: it never settles.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for now := time.Now(); ; now = now.Add(time.Millisecond) {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				_ = os.Chtimes(filepath.Join(dir, "hints", "code.md"), now, now)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	writeFile(t, filepath.Join(dir, "tools.yaml"), "deny: [b_*]\ncategories:\n  code: {hints: hints/code.md}\n")
	eventually(t, "b_x is denied while the hints file keeps changing", func() bool { return !live.Current().Decide("b_x", "").Visible })
}

func TestLiveWatchFallsBackToThePeriodicCheckWithoutAWatcher(t *testing.T) {
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
	live.poll, live.settle = 50*time.Millisecond, 100*time.Millisecond
	live.newWatcher = func() (*fsnotify.Watcher, error) {
		return nil, fmt.Errorf("creating inotify instance: %w", syscall.EMFILE) // max_user_instances used up
	}
	watching(t, live)

	t.Run("an edit of the policy applies within the check's period", func(t *testing.T) {
		writeFile(t, path, "deny: ['*delete*']\ncategories:\n  code: {hints: hints/code.md}\n")
		eventually(t, "delete tools are denied", func() bool { return !live.Current().Decide("delete_repo", "delete it").Visible })
	})
	t.Run("an edit of a hints file applies too", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "hints", "code.md"), "new guidance")
		eventually(t, "the hints change", func() bool { return live.Current().Hints("code") == "new guidance" })
	})
	t.Run("the watcher's failure is logged once, as a warning", func(t *testing.T) {
		if n := strings.Count(logs.String(), "cannot watch the policy for changes"); n != 1 {
			t.Errorf("logged %d times, want once:\n%s", n, logs.String())
		}
		if !strings.Contains(logs.String(), "level=WARN msg=\"cannot watch the policy") || !strings.Contains(logs.String(), "too many open files") {
			t.Errorf("no warning naming the cause in:\n%s", logs.String())
		}
	})
}
