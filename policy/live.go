package policy

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// debounce collapses the burst of events one save produces (editors write,
// chmod, rename) into one reload.
const debounce = 200 * time.Millisecond

// Live holds the current policy and replaces it when the file changes. A
// reload that fails keeps the last good snapshot serving and logs every
// problem; requests that already hold a snapshot finish on it. Safe for
// concurrent use.
type Live struct {
	// OnReload, if set, is called after every reload attempt with its error
	// (nil on success), e.g. to count reloads and failures. Set it before
	// Watch; it runs on the reloading goroutine and must not block. Nil by
	// default.
	OnReload func(err error)

	// OnChange, if set, is called after a reload that published a new
	// snapshot, with it: not after a failed reload, nor after one that
	// found the file and its hints unchanged. The gateway purges its
	// catalog cache there, since catalogs are keyed by generation. Set it
	// before Watch; it runs after OnReload, on the reloading goroutine, and
	// must not block. Nil by default.
	OnChange func(snap *Snapshot)

	path   string
	logger *slog.Logger
	cur    atomic.Pointer[Snapshot]
	mu     sync.Mutex // serialises reloads so generations and logs stay in order
	// digest identifies the file and hints text the current snapshot was
	// loaded from (contentDigest); guarded by mu.
	digest [sha256.Size]byte
}

// NewLive loads path once and returns a Live serving it. An empty path
// serves Default() and never reloads. It fails if the initial file is bad:
// a gateway should not start on a policy it cannot read. It does not start
// watching; call Watch.
func NewLive(path string, logger *slog.Logger) (*Live, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	snap, src, err := loadSource(path, newGeneration())
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	l := &Live{path: path, logger: logger, digest: contentDigest(src, snap)}
	l.cur.Store(snap)
	return l, nil
}

// Current returns the snapshot to use for a request. It never returns nil
// and never blocks.
func (l *Live) Current() *Snapshot {
	return l.cur.Load()
}

// Reload loads the file again and, if it is valid, publishes it; for
// SIGHUP and for Watch. On failure the current snapshot stays and the error
// (an *Errors when the file is bad) is returned and logged. A valid file
// whose text, and whose hints' text, are what the current snapshot was
// loaded from keeps the current snapshot and its generation: a successful
// reload that calls OnReload(nil) but not OnChange.
func (l *Live) Reload() error {
	if l.path == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	snap, src, err := loadSource(l.path, newGeneration())
	if err != nil {
		var perr *Errors
		if errors.As(err, &perr) {
			for _, p := range perr.Problems {
				l.logger.Error("policy reload rejected; keeping the last good policy", "problem", p.String())
			}
		} else {
			l.logger.Error("policy reload failed; keeping the last good policy", "err", err)
		}
		if l.OnReload != nil {
			l.OnReload(err)
		}
		return fmt.Errorf("reloading policy %s: %w", l.path, err)
	}
	if d := contentDigest(src, snap); d != l.digest {
		l.digest = d
	} else {
		// Nothing the policy reads changed (a touch, a SIGHUP, an editor
		// saving unchanged text, the last good text restored after a
		// broken edit): a new generation would only make every catalog
		// compile again under a key no one asks for twice.
		l.logger.Debug("policy unchanged; keeping the current snapshot", "file", l.path, "generation", l.Current().Generation())
		if l.OnReload != nil {
			l.OnReload(nil)
		}
		return nil
	}
	l.cur.Store(snap)
	l.logger.Info("policy reloaded", "file", l.path, "generation", snap.Generation(), "profiles", len(snap.profiles))
	if l.OnReload != nil {
		l.OnReload(nil)
	}
	if l.OnChange != nil {
		l.OnChange(snap)
	}
	return nil
}

// contentDigest identifies what a load read from disk: the policy file's
// bytes and the hints text of the snapshot and of each of its profiles.
// Nothing else a load reads can change under a running process (the
// environment references it expands are the process's own), so two loads
// with one digest compile to equal snapshots.
func contentDigest(src []byte, s *Snapshot) [sha256.Size]byte {
	h := sha256.New()
	field := func(b string) { // length-prefixed, so fields cannot run into each other
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write([]byte(b))
	}
	field(string(src))
	snaps := []*Snapshot{s}
	for _, p := range s.profiles {
		snaps = append(snaps, p.snap)
	}
	for _, sn := range snaps {
		cats := make([]string, 0, len(sn.hints))
		for c := range sn.hints {
			cats = append(cats, c)
		}
		slices.Sort(cats)
		field(fmt.Sprint(len(cats)))
		for _, c := range cats {
			field(c)
			field(sn.hints[c])
		}
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// Watch reloads the policy whenever the file or a hints file changes, until
// ctx ends; then it returns nil after releasing the watcher, leaving no
// goroutine behind. It watches directories, not files, so editors that save
// by writing a new file and renaming it over the old one are seen. When the
// file is a symlink, the directory of the file it resolves to is watched
// too, resolved again after every reload, so edits of a target kept
// elsewhere and a re-pointed link both apply. A failing reload is logged and
// Watch goes on. It returns an error only if watching cannot start. Do not
// call it twice at once.
func (l *Live) Watch(ctx context.Context) error {
	if l.path == "" {
		<-ctx.Done()
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching policy: %w", err)
	}
	defer w.Close()
	watched := map[string]bool{}
	var target string // the file the config resolves to, as of the last rewatch
	rewatch := func() error {
		target = resolveFile(l.path)
		want := l.watchDirs(target)
		for dir := range want {
			if watched[dir] {
				continue
			}
			if _, err := os.Stat(dir); err != nil && dir != filepath.Dir(l.path) {
				continue // not there yet; its creation is an event in the parent, and the reload retries
			}
			if err := w.Add(dir); err != nil {
				// A hints directory may not exist yet; the config directory must.
				if dir == filepath.Dir(l.path) {
					return fmt.Errorf("watching %s: %w", dir, err)
				}
				l.logger.Warn("not watching hints directory", "dir", dir, "err", err)
				continue
			}
			watched[dir] = true
		}
		for dir := range watched {
			if !want[dir] {
				_ = w.Remove(dir) // it may be gone already; nothing to undo
				delete(watched, dir)
			}
		}
		return nil
	}
	if err := rewatch(); err != nil {
		return err
	}

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if l.relevant(ev.Name, target) {
				timer.Reset(debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			l.logger.Warn("policy watcher error", "err", err)
		case <-timer.C:
			_ = l.Reload() // logged and reported through OnReload
			if err := rewatch(); err != nil {
				l.logger.Warn("policy watcher", "err", err)
			}
		}
	}
}

// watchDirs returns the config file's directory, its hints/ directory, the
// directory of target (the file the config resolves to) and the directory
// of every hints file the current snapshot uses.
func (l *Live) watchDirs(target string) map[string]bool {
	dir := filepath.Dir(l.path)
	out := map[string]bool{dir: true, filepath.Join(dir, "hints"): true}
	if target != "" && !sameDir(dir, filepath.Dir(target)) {
		out[filepath.Dir(target)] = true
	}
	for _, f := range l.Current().hintFiles() {
		out[filepath.Dir(f)] = true
	}
	return out
}

// resolveFile returns path with every symlink followed, or "" when it does
// not resolve (a dangling link, a missing file).
func resolveFile(path string) string {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	return p
}

// sameDir reports whether a and b name one directory. A config reached
// through a symlinked directory resolves to another name for its own
// directory. inotify has one watch per directory, which fsnotify reports
// under the name added first (in map order here), so watching the second
// name could put the config directory's events under a name the checks in
// relevant do not expect.
func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ai, errA := os.Stat(a)
	bi, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ai, bi)
}

// relevant filters out events for files the policy does not read, such as
// an editor's swap files next to tools.yaml. target is the file the config
// resolved to at the last rewatch.
func (l *Live) relevant(name, target string) bool {
	name = filepath.Clean(name)
	if name == filepath.Clean(l.path) {
		return true
	}
	// A symlinked config reads a file that may live in another directory:
	// the file last watched (its removal is a failed reload to log), or any
	// name that resolves to the file the config resolves to now (an edit, a
	// rename over it, a re-pointed link).
	if target != "" && name == target {
		return true
	}
	if now := resolveFile(l.path); now != "" && resolveFile(name) == now {
		return true
	}
	dir := filepath.Dir(name)
	hintsDir := filepath.Join(filepath.Dir(l.path), "hints")
	if dir == hintsDir || name == hintsDir {
		return true
	}
	// Kubernetes mounts swap a "..data" symlink rather than the file.
	if dir == filepath.Dir(filepath.Clean(l.path)) && strings.HasPrefix(filepath.Base(name), "..") {
		return true
	}
	for _, f := range l.Current().hintFiles() {
		if f == name || filepath.Dir(f) == dir {
			return true
		}
	}
	return false
}
