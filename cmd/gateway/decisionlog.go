package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// decisionFile is the decision log's file, reopened by path on SIGHUP: a
// logrotate "create" renames the file away and an operator may delete it,
// and a descriptor held for good would write to the rotated or deleted
// file from then on. Records are written from request goroutines while a
// reopen swaps the file, so both hold mu; a write never reaches a closed
// file, and none is split across two.
type decisionFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
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
	defer d.mu.Unlock()
	return d.f.Write(p)
}

// Reopen opens the path again and writes there from now on. When the
// path cannot be opened the old file stays in use: records in a rotated
// file beat records lost.
func (d *decisionFile) Reopen() error {
	if d == nil {
		return nil
	}
	f, err := openAppend(d.path)
	if err != nil {
		return err
	}
	d.mu.Lock()
	old := d.f
	d.f = f
	d.mu.Unlock()
	if err := old.Close(); err != nil {
		return fmt.Errorf("closing the decision log's previous file: %w", err)
	}
	return nil
}

// Close closes the file; a nil *decisionFile (no log, or stderr) has none.
func (d *decisionFile) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.f.Close()
}
