package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	// defaultMaxSettle caps the settle wait: a hints file some program
	// touches every half second never settles, and held every reload back
	// for as long as it ran. Past the cap the files are read as they are.
	defaultMaxSettle = 10 * time.Second
)

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
// Without events (no inotify instance left for a watcher, or no watch left
// for a directory) Watch logs a warning once and goes on with the periodic
// check alone, so edits still apply, within the poll interval: a gateway
// whose hot reload is off for good, while its operators edit the file, is
// worse than one that reloads 2 s late.
//
// A failing reload is logged and Watch goes on. It returns nil when ctx
// ends. Do not call it twice at once.
func (l *Live) Watch(ctx context.Context) error {
	if l.path == "" {
		<-ctx.Done()
		return nil
	}
	var events <-chan fsnotify.Event // nil without a watcher: never ready
	var errs <-chan error
	w, err := l.newWatcher()
	if err != nil {
		l.logger.Warn("cannot watch the policy for changes; the periodic check applies edits instead", "file", l.path, "every", l.poll, "err", err)
		w = nil
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	ws := &watchSet{l: l, w: w, dirs: map[string]os.FileInfo{}, lost: map[string]bool{}, failed: map[string]bool{}}
	ws.rewatch(true)

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
		case ev, ok := <-events:
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
				if ws.rewatch(false) {
					arm()
				}
			}
			if l.relevant(name, ws.target) {
				arm()
			}
		case err, ok := <-errs:
			if !ok {
				return nil
			}
			l.logger.Warn("policy watcher error", "err", err)
		case <-poll.C:
			again := ws.rewatch(false)
			// A reload already on its way reads the change; resetting its
			// timer would only put it off.
			if (again || l.changedOnDisk()) && !pending {
				arm()
			}
		case <-timer.C:
			if wait := l.settle - time.Since(ws.observe()); wait > 0 {
				if time.Since(first) < l.maxSettle {
					settleAt = time.Now().Add(wait)
					timer.Reset(wait)
					continue
				}
				l.logger.Warn("policy files kept changing; reading them as they are", "file", l.path, "waited", time.Since(first).Round(time.Millisecond))
			}
			pending, settleAt, ws.observed = false, time.Time{}, nil
			_ = l.Reload() // logged and reported through OnReload
			// What the reload read is current, and a change since is
			// caught by the next poll: a directory this adds needs no
			// reload of its own.
			ws.rewatch(false)
		}
	}
}

// watchSet is the directories Watch watches, kept in step with what the
// policy reads. Only Watch's goroutine uses it.
type watchSet struct {
	l      *Live
	w      *fsnotify.Watcher      // nil when none could be created: the periodic check alone sees changes
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
// unwatched. A directory that cannot be watched, the config's included
// (no inotify watch left), is logged once and tried again at the next
// call: the periodic check sees its changes meanwhile.
func (ws *watchSet) rewatch(initial bool) (again bool) {
	l := ws.l
	if t := resolveFile(l.path); t != "" {
		ws.target = t
	} // else a dangling link or a missing file: keep watching where it was, where it may come back
	ws.want = l.watchDirs(ws.target)
	if ws.w == nil {
		return false
	}
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
	return again
}

// drop stops watching dir. A directory still wanted is lost until a
// rewatch finds it again; one that is not there now is logged, once for
// each time it goes away.
func (ws *watchSet) drop(dir string) {
	_ = ws.w.Remove(dir) // mostly gone already; nothing to undo
	delete(ws.dirs, dir)
	// Wanted as of now, not as of the last rewatch: a Kubernetes update
	// removes the old "..<timestamp>" directory the config resolved to,
	// which nothing reads any more.
	if !ws.want[dir] || !ws.l.watchDirs(resolveFile(ws.l.path))[dir] {
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
