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

// Watch's intervals in production; Live holds them as fields so tests can
// shorten them.
const (
	// defaultDebounce collapses the burst of events one save produces
	// (editors write, chmod, rename) into one reload.
	defaultDebounce = 200 * time.Millisecond
	// defaultPoll is how often Watch checks, without an event, that the
	// directories it watches are still the ones on disk and that the
	// files the policy reads are the ones the last reload read. inotify
	// watches a directory, not a path: a directory replaced under its
	// name (a re-pointed "current" release link, a hints/ directory
	// copied anew) sends nothing more, and the check is what notices.
	defaultPoll = 2 * time.Second
	// defaultSettle is how long the policy file and the hints files in
	// use must keep their size and mtime before Watch reads them: an
	// in-place save that stalls part-way (tools.yaml written up to core:,
	// deny: still to come) would otherwise be read half-written, and a
	// half-written file can be valid YAML that drops a deny rule.
	defaultSettle = time.Second
	// defaultMaxWait caps the debounce: a stream of events (a program
	// rewriting a file in hints/ every 100 ms) would otherwise put a
	// reload off for as long as it runs. It does not cut the settle time
	// short: a file still changing is not read.
	defaultMaxWait = 2 * time.Second
)

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
	// read is what the last load found on disk, stat'ed just before it
	// read: the periodic check reloads when the files differ from it.
	// Guarded by mu.
	read stamps

	debounce, poll, settle, maxWait time.Duration // Watch's intervals; NewLive sets the defaults
}

// NewLive loads path once and returns a Live serving it. An empty path
// serves Default() and never reloads. It fails if the initial file is bad:
// a gateway should not start on a policy it cannot read. It does not start
// watching; call Watch.
func NewLive(path string, logger *slog.Logger) (*Live, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &Live{path: path, logger: logger, debounce: defaultDebounce, poll: defaultPoll, settle: defaultSettle, maxWait: defaultMaxWait}
	read := l.stampFiles(nil)
	snap, src, err := loadSource(path, newGeneration())
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	l.digest, l.read = contentDigest(src, snap), read.forSnapshot(l, snap)
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
	// Stat'ed before the read, so a write that lands during it makes the
	// files differ from l.read and is read by the next check.
	l.read = l.stampFiles(l.Current())
	snap, src, err := loadSource(l.path, newGeneration())
	if err == nil {
		l.read = l.read.forSnapshot(l, snap)
	}
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
// elsewhere and a re-pointed link both apply. A reload follows the last
// event by the debounce (200 ms), and the first by at most 2 s however
// many follow; editors' temp files in hints/ (dot-files, *~, *.swp, *.swx,
// *.tmp) are not events.
//
// A watched directory that goes away, or is replaced under its name
// (a Capistrano-style "current" link re-pointed, hints/ removed and copied
// anew), is watched again as soon as it is back: Watch logs a warning when
// it disappears and an info line when it is watched again. Every poll
// interval it also checks, without waiting for an event, that each watched
// directory is still the one on disk and that the policy file and its hints
// files (their resolved paths, sizes, mtimes and inodes) are what the last
// reload read, and reloads when they are not.
//
// A reload reads the files once they have kept their size and mtime for the
// settle time (1 s), so an in-place save that stalls part-way is not read
// half-written; one that stalls longer still can be. Writing a temp file
// and renaming it over the policy is atomic and never is. SIGHUP (Reload)
// reads at once.
//
// A failing reload is logged and Watch goes on. It returns an error only if
// watching cannot start. Do not call it twice at once.
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
	ws := &watchSet{l: l, w: w, dirs: map[string]os.FileInfo{}, lost: map[string]bool{}, failed: map[string]bool{}}
	if _, err := ws.rewatch(true); err != nil {
		return err
	}

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	poll := time.NewTicker(l.poll)
	defer poll.Stop()
	pending := false       // the timer runs toward a reload
	var first time.Time    // the first event of the pending reload
	var settleAt time.Time // while the files settle, when to look at them again
	arm := func() {
		now := time.Now()
		if !pending {
			pending, first = true, now
		}
		at := now.Add(l.debounce)
		if limit := first.Add(l.maxWait); at.After(limit) {
			at = limit // may be past: the files are looked at now
		}
		if at.Before(settleAt) {
			at = settleAt // the look then re-arms if the files changed again
		}
		ws.observe()
		timer.Reset(at.Sub(now))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Clean(ev.Name)
			if _, watched := ws.dirs[name]; watched && (ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)) {
				// inotify follows a moved directory and drops a
				// deleted one's watch on its own: either way the name
				// is no longer watched, whatever comes there next.
				ws.drop(name)
			}
			if ws.isDir(name) {
				// A watched directory, or one to watch, was created,
				// removed or moved: fix the watches now, so the files
				// written into a new one next are seen.
				if again, _ := ws.rewatch(false); again {
					arm()
				}
			}
			if l.relevant(name, ws.target) {
				arm()
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			l.logger.Warn("policy watcher error", "err", err)
		case <-poll.C:
			again, _ := ws.rewatch(false)
			// A reload already on its way reads the change; resetting its
			// timer would only put it off.
			if (again || l.changedOnDisk()) && !pending {
				arm()
			}
		case <-timer.C:
			if wait := l.settle - time.Since(ws.observe()); wait > 0 {
				settleAt = time.Now().Add(wait)
				timer.Reset(wait)
				continue
			}
			pending, settleAt, ws.observed = false, time.Time{}, nil
			_ = l.Reload() // logged and reported through OnReload
			// What the reload read is current, and a change since is
			// caught by the next poll: a directory this adds needs no
			// reload of its own.
			_, _ = ws.rewatch(false)
		}
	}
}

// watchSet is the directories Watch watches, kept in step with what the
// policy reads. Only Watch's goroutine uses it.
type watchSet struct {
	l      *Live
	w      *fsnotify.Watcher
	target string                 // the file the config resolves to, as of the last rewatch that resolved it
	want   map[string]bool        // the directories to watch, as of the last rewatch
	dirs   map[string]os.FileInfo // watched directory -> what it was when added
	lost   map[string]bool        // directories to watch that went away or were replaced, until watched again
	failed map[string]bool        // directories whose watch could not be added, to warn once

	observed   stamps    // the files as last seen while a reload waits; nil when none waits
	observedAt time.Time // when they were first seen so
}

// observe stats the policy file and the hints files in use and returns
// since when they have looked so: a reload reads them once that is settle
// ago. It tells a stalled writer from a finished one only by the size and
// mtime it leaves, so a writer that stalls longer than settle is still read
// half-written; writing a temp file and renaming it over the old one is
// atomic and never is.
func (ws *watchSet) observe() time.Time {
	if st := ws.l.stampFiles(ws.l.Current()); ws.observed == nil || !st.same(ws.observed) {
		ws.observed, ws.observedAt = st, time.Now()
	}
	return ws.observedAt
}

// isDir reports whether name is a directory Watch watches or wants to.
func (ws *watchSet) isDir(name string) bool {
	_, watched := ws.dirs[name]
	return watched || ws.want[name]
}

// rewatch brings the watches in line with the directories the policy
// reads: it drops a watch whose directory is gone, was replaced under its
// name, or that inotify dropped itself (a deleted directory's inode number
// may be reused by the next one, so the identity check alone could miss
// it), and adds each wanted directory that exists. again reports a
// directory watched after the start, whose files may have changed while
// unwatched. Only the initial call fails, when the config directory cannot
// be watched; later failures are logged once each.
func (ws *watchSet) rewatch(initial bool) (again bool, err error) {
	l := ws.l
	if t := resolveFile(l.path); t != "" {
		ws.target = t
	} // else a dangling link or a missing file: keep watching where it was, where it may come back
	ws.want = l.watchDirs(ws.target)
	configDir := filepath.Dir(l.path)
	listed := map[string]bool{}
	for _, d := range ws.w.WatchList() {
		listed[filepath.Clean(d)] = true
	}
	for dir, was := range ws.dirs {
		now, err := os.Stat(dir)
		if ws.want[dir] && err == nil && os.SameFile(was, now) && listed[dir] {
			continue
		}
		ws.drop(dir)
	}
	for dir := range ws.want {
		if _, ok := ws.dirs[dir]; ok {
			continue
		}
		// Stat before Add: if the directory is replaced in between, the
		// next rewatch sees a different one and watches again.
		fi, err := os.Stat(dir)
		if err == nil {
			err = ws.w.Add(dir)
		}
		if err != nil {
			if initial && dir == configDir {
				return false, fmt.Errorf("watching %s: %w", dir, err)
			}
			if !errors.Is(err, os.ErrNotExist) && !ws.failed[dir] {
				ws.failed[dir] = true
				l.logger.Warn("not watching a policy directory; the periodic check still sees its changes", "dir", dir, "err", err)
			}
			continue // not there (yet): the next poll looks again
		}
		delete(ws.failed, dir)
		ws.dirs[dir] = fi
		if ws.lost[dir] {
			delete(ws.lost, dir)
			l.logger.Info("watching a policy directory again", "dir", dir)
		}
		again = again || !initial
	}
	for dir := range ws.lost {
		if !ws.want[dir] {
			delete(ws.lost, dir)
		}
	}
	return again, nil
}

// drop stops watching dir. A directory still wanted is lost until a
// rewatch finds it again; one that is not there now is logged, once for
// each time it goes away.
func (ws *watchSet) drop(dir string) {
	_ = ws.w.Remove(dir) // mostly gone already; nothing to undo
	delete(ws.dirs, dir)
	if !ws.want[dir] {
		return
	}
	ws.lost[dir] = true
	if _, err := os.Stat(dir); err != nil {
		ws.l.logger.Warn("a watched policy directory disappeared; its edits apply once it is back", "dir", dir, "err", errNoPath(err))
	}
}

// changedOnDisk reports whether the policy file or a hints file differs
// from what the last reload read: the check that needs no event.
func (l *Live) changedOnDisk() bool {
	l.mu.Lock()
	read := l.read
	l.mu.Unlock()
	if l.stampFiles(l.Current()).same(read) {
		return false
	}
	l.logger.Debug("policy files changed on disk", "file", l.path)
	return true
}

// fileStamp is what a stat says about one file a load reads: the file its
// name resolves to, and that file's size, mtime and identity (inode).
type fileStamp struct {
	resolved string
	fi       os.FileInfo // nil when it cannot be stat'ed
}

func (a fileStamp) same(b fileStamp) bool {
	if a.resolved != b.resolved || (a.fi == nil) != (b.fi == nil) {
		return false
	}
	return a.fi == nil || a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime()) && os.SameFile(a.fi, b.fi)
}

func stampFile(name string) fileStamp {
	st := fileStamp{resolved: resolveFile(name)}
	if fi, err := os.Stat(name); err == nil {
		st.fi = fi
	}
	return st
}

// stamps holds a fileStamp for each file a load reads, by the name it is
// read under.
type stamps map[string]fileStamp

func (a stamps) same(b stamps) bool {
	if len(a) != len(b) {
		return false
	}
	for name, st := range a {
		if other, ok := b[name]; !ok || !st.same(other) {
			return false
		}
	}
	return true
}

// forSnapshot returns the stamps for the files snap read, taking each from
// a (stat'ed before the read) where it has it and stat'ing the hints files
// the read found new now, so the periodic check compares the same files
// the next time instead of reloading once more for the new set.
func (a stamps) forSnapshot(l *Live, snap *Snapshot) stamps {
	out := stamps{l.path: a[l.path]}
	for _, f := range snap.hintFiles() {
		if st, ok := a[f]; ok {
			out[f] = st
		} else {
			out[f] = stampFile(f)
		}
	}
	return out
}

// stampFiles stats the policy file and the hints files snap read (none
// when snap is nil).
func (l *Live) stampFiles(snap *Snapshot) stamps {
	files := []string{l.path}
	if snap != nil {
		files = append(files, snap.hintFiles()...)
	}
	out := make(stamps, len(files))
	for _, f := range files {
		out[f] = stampFile(f)
	}
	return out
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
	if name == hintsDir {
		return true
	}
	for _, f := range l.Current().hintFiles() {
		if f == name {
			return true
		}
	}
	if dir == hintsDir {
		return !editorTemp(filepath.Base(name))
	}
	// Kubernetes mounts swap a "..data" symlink rather than the file.
	if dir == filepath.Dir(filepath.Clean(l.path)) && strings.HasPrefix(filepath.Base(name), "..") {
		return true
	}
	for _, f := range l.Current().hintFiles() {
		if filepath.Dir(f) == dir {
			return !editorTemp(filepath.Base(name))
		}
	}
	return false
}

// editorTemp reports whether a file in a hints directory is an editor's
// or a tool's temporary file (a swap file vim rewrites while a hints file
// is open, a backup, a save's temp file before its rename): none is read,
// and each reset the debounce. A file the policy names is never one, and
// Kubernetes' "..data" links are not dot-files here.
func editorTemp(base string) bool {
	if strings.HasPrefix(base, ".") && !strings.HasPrefix(base, "..") {
		return true
	}
	if strings.HasSuffix(base, "~") {
		return true
	}
	switch filepath.Ext(base) {
	case ".swp", ".swx", ".tmp":
		return true
	}
	return false
}
