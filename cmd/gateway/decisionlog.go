package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/proxy"
)

// How long the decision log may hold up the one who asks it to reopen
// (SIGHUP) or to close (shutdown), while a write does not return: a FIFO
// whose reader stopped reading, a hung disk. Requests never wait on it.
const (
	decisionReopenWait = time.Second
	decisionFlushWait  = 2 * time.Second
)

// decisionLog is serve's and demo's decision log: a proxy.DecisionWriter,
// which queues the records and writes them on a goroutine of its own, in
// front of the file (or stderr).
type decisionLog struct {
	w    *proxy.DecisionWriter
	path string // the file's, to reopen; "" for stderr
}

// openDecisionLog returns the decision logger for path ("" none, "-"
// stderr, else a file opened for appending) and its decisionLog, to
// reopen on SIGHUP and close; without one it is nil, and both are
// no-ops. Lost records are counted in metrics and said on logger.
func openDecisionLog(path string, stderr io.Writer, metrics *proxy.Metrics, logger *slog.Logger) (*slog.Logger, *decisionLog, error) {
	o := proxy.DecisionWriterOptions{Metrics: metrics, Logger: logger}
	var d *decisionLog
	switch path {
	case "":
		return nil, nil, nil
	case "-":
		// Only its Write: closing the log must not close stderr.
		d = &decisionLog{w: proxy.NewDecisionWriter(struct{ io.Writer }{stderr}, o)}
	default:
		f, err := openDecisionFile(path)
		if err != nil {
			return nil, nil, err
		}
		d = &decisionLog{w: proxy.NewDecisionWriter(f, o), path: path}
	}
	return slog.New(slog.NewJSONHandler(d.w, nil)), d, nil
}

// Reopen opens the file again by its path, between two records, waiting
// for it until ctx ends (see proxy.DecisionWriter.Reopen).
func (d *decisionLog) Reopen(ctx context.Context) error {
	if d == nil || d.path == "" {
		return nil
	}
	return d.w.Reopen(ctx)
}

// Close writes the records queued and closes the file, giving up when
// ctx ends (see proxy.DecisionWriter.Close).
func (d *decisionLog) Close(ctx context.Context) error {
	if d == nil {
		return nil
	}
	return d.w.Close(ctx)
}

// closeDecisionLog closes d once serve or demo is done, waiting at most
// decisionFlushWait for the queued records: a write that does not return
// must not keep the process from exiting. ctx may have ended already
// (shutdown): the wait does not depend on it.
func closeDecisionLog(ctx context.Context, d *decisionLog, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), decisionFlushWait)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		logger.Warn("closing the decision log", "err", err)
	}
}

// decisionFile is the decision log's file, reopened by path on SIGHUP: a
// logrotate "create" renames the file away and an operator may delete it,
// and a descriptor held for good would write to the rotated or deleted
// file from then on. Its DecisionWriter's goroutine writes and reopens;
// Close may come from another while a write is blocked, to end it. mu
// guards the swap of f only, and is never held across I/O.
type decisionFile struct {
	path   string
	mu     sync.Mutex
	f      *os.File
	closed bool
}

func openDecisionFile(path string) (*decisionFile, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &decisionFile{path: path, f: f}, nil
}

// openAppend opens path for appending without blocking: opening a FIFO
// for writing waits for a reader, and a start-up stuck there neither
// listened nor heeded SIGTERM. A FIFO without a reader now fails at once;
// one with a reader is written through Go's poller, which waits for the
// reader without holding a thread. Linux ignores O_NONBLOCK for regular
// files, and devices such as /dev/stdout keep working.
func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("opening decision log: a FIFO with no reader; start its reader first: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening decision log: %w", err)
	}
	return f, nil
}

func (d *decisionFile) Write(p []byte) (int, error) {
	d.mu.Lock()
	f := d.f
	d.mu.Unlock()
	return f.Write(p)
}

// Reopen opens the path again and writes there from now on. When the
// path cannot be opened the old file stays in use: records in a rotated
// file beat records lost.
func (d *decisionFile) Reopen() error {
	f, err := openAppend(d.path)
	if err != nil {
		return err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		f.Close()
		return os.ErrClosed
	}
	old := d.f
	d.f = f
	d.mu.Unlock()
	if err := old.Close(); err != nil {
		return fmt.Errorf("closing the decision log's previous file: %w", err)
	}
	return nil
}

// Close closes the file; a Write blocked on a pipe returns with an error.
func (d *decisionFile) Close() error {
	d.mu.Lock()
	d.closed = true
	f := d.f
	d.mu.Unlock()
	return f.Close()
}
