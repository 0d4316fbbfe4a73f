package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
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
	// first is the snapshot the process started with: what its settings
	// read at start-up (startupChanges) were built from.
	first *Snapshot
	mu    sync.Mutex // serialises reloads so generations and logs stay in order
	// digest identifies the file and hints text the current snapshot was
	// loaded from (contentDigest); guarded by mu.
	digest [sha256.Size]byte
	// read is what the last load found on disk, stat'ed just before it
	// read: the periodic check reloads when the files differ from it.
	// Guarded by mu.
	read stamps

	debounce, poll, settle, maxWait, maxSettle time.Duration // Watch's intervals; NewLive sets the defaults
	// newWatcher is fsnotify.NewWatcher, which tests replace with one that
	// fails as it does when the inotify instances are used up.
	newWatcher func() (*fsnotify.Watcher, error)
}

// NewLive loads path once and returns a Live serving it. An empty path
// serves Default() and never reloads. It fails if the initial file is bad:
// a gateway should not start on a policy it cannot read. It does not start
// watching; call Watch.
func NewLive(path string, logger *slog.Logger) (*Live, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l := &Live{path: path, logger: logger, debounce: defaultDebounce, poll: defaultPoll, settle: defaultSettle, maxWait: defaultMaxWait, maxSettle: defaultMaxSettle,
		newWatcher: fsnotify.NewWatcher}
	read := l.stampFiles(nil)
	snap, src, err := loadSource(path, newGeneration())
	if err != nil {
		return nil, fmt.Errorf("loading policy: %w", err)
	}
	l.digest, l.read = contentDigest(src, snap), read.forSnapshot(l, snap)
	l.cur.Store(snap)
	l.first = snap
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
	if names := startupChanges(l.first, snap); len(names) > 0 {
		// Said on every reload while they differ: each save of the file
		// is a moment the editor expects its edit to apply.
		l.logger.Warn("policy settings read only at start-up differ from the file the gateway started with; they apply at the next start", "file", l.path, "settings", names)
	}
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
