package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// DecisionQueueSize is how many decision records a DecisionWriter holds
// for its sink unless told otherwise: at 1 to 2 kB a record (the bundled
// catalog's), under 10 MB, and at a thousand requests a second four
// seconds of a stalled sink.
const DecisionQueueSize = 4096

var (
	errDecisionQueueFull = errors.New("the queue of decision records waiting for the log is full: the log takes no writes (a FIFO whose reader stopped, a hung disk) or is slower than the requests")
	errDecisionLogClosed = errors.New("the decision log is closed")
	errDecisionAbandoned = errors.New("shutdown gave up on the decision log: a write did not return in time")
)

// DecisionWriter is the decision log's io.Writer in front of a file, a
// FIFO or stderr: Write queues a copy of the record and returns at once,
// and one goroutine writes the queue to the sink, in order. A sink that
// stops taking writes (a FIFO whose reader stopped reading, a hung NFS
// mount) stalls that goroutine alone; requests, a SIGHUP's reload and
// shutdown never wait on it. A record that finds the queue full is
// dropped: counted in toolgate_decision_log_errors_total{reason="dropped"}
// and said in the logger at most once a minute. One the sink refuses (a
// full disk) is counted under reason="write", and said the same way.
// Neither is returned to the caller, who would count it again.
//
// Give it to slog.NewJSONHandler, which writes each record with one Write.
// Close it to flush the queue and end its goroutine.
type DecisionWriter struct {
	sink    io.Writer
	metrics *Metrics
	logger  *slog.Logger
	dropped writeFailures // paces the warnings about dropped records
	failed  writeFailures // and those about records the sink refused

	queue   chan []byte
	reopens chan chan error // each answered on the writer's goroutine
	stop    chan struct{}   // closed by Close: write what is queued, then end
	abandon chan struct{}   // closed when Close gives up: write nothing more
	done    chan struct{}   // closed when the goroutine has ended

	// mu orders Write's queueing against Close: no record is queued
	// after the goroutine's last look at the queue, where it would be
	// lost without a count. It is never held across I/O.
	mu     sync.RWMutex
	closed bool

	stopOnce, abandonOnce sync.Once
	closeSink             func() error // closes the sink once, if it is an io.Closer
}

// DecisionWriterOptions configures a DecisionWriter.
type DecisionWriterOptions struct {
	// QueueSize is how many records may wait for the sink; 0 means
	// DecisionQueueSize.
	QueueSize int

	// Metrics counts the records lost; nil means they are not counted.
	Metrics *Metrics

	// Logger says when records are lost, at most once a minute for each
	// reason; nil means slog.Default().
	Logger *slog.Logger
}

// decisionReopener is a sink that can open its file again by its path.
type decisionReopener interface{ Reopen() error }

// NewDecisionWriter returns a DecisionWriter for sink and starts its
// goroutine. When sink has a method Reopen() error, Reopen calls it on
// that goroutine, between two records. When sink is an io.Closer, Close
// closes it, also while a Write is blocked in it (as os.File allows): a
// write blocked on a pipe then returns.
func NewDecisionWriter(sink io.Writer, o DecisionWriterOptions) *DecisionWriter {
	size := o.QueueSize
	if size <= 0 {
		size = DecisionQueueSize
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	w := &DecisionWriter{
		sink:    sink,
		metrics: o.Metrics,
		logger:  logger,
		queue:   make(chan []byte, size),
		reopens: make(chan chan error, 1),
		stop:    make(chan struct{}),
		abandon: make(chan struct{}),
		done:    make(chan struct{}),
		closeSink: sync.OnceValue(func() error {
			if c, ok := sink.(io.Closer); ok {
				return c.Close()
			}
			return nil
		}),
	}
	go w.run()
	return w
}

// Write queues a copy of p, one record, and returns len(p) and no error:
// a record it cannot queue (the queue is full, or the writer closed) is
// counted and said as dropped instead.
func (w *DecisionWriter) Write(p []byte) (int, error) {
	rec := bytes.Clone(p)
	w.mu.RLock()
	err := errDecisionLogClosed
	if !w.closed {
		select {
		case w.queue <- rec:
			err = nil
		default:
			err = errDecisionQueueFull
		}
	}
	w.mu.RUnlock()
	if err != nil {
		recordLost(context.Background(), w.metrics, w.logger, &w.dropped, lostDropped, err, time.Now())
	}
	return len(p), nil
}

// Reopen has the writer's goroutine reopen the sink once the records
// queued before the call are written, and waits for it until ctx ends.
// When a write has not returned by then, the reopen stays handed over and
// happens once the write returns; the error says so. A sink with no
// Reopen method has nothing to reopen.
func (w *DecisionWriter) Reopen(ctx context.Context) error {
	if _, ok := w.sink.(decisionReopener); !ok {
		return nil
	}
	reply := make(chan error, 1)
	select {
	case w.reopens <- reply:
	case <-w.stop:
		return errDecisionLogClosed
	case <-ctx.Done():
		return fmt.Errorf("an earlier reopen still waits for a write of the decision log that has not returned: %w", context.Cause(ctx))
	}
	select {
	case err := <-reply:
		return err
	case <-w.stop:
		return errDecisionLogClosed
	case <-ctx.Done():
		return fmt.Errorf("a write of the decision log has not returned; the file is reopened once it does: %w", context.Cause(ctx))
	}
}

// Close stops taking records, writes those queued and closes the sink,
// waiting until ctx ends. Then it gives up: the records still queued are
// counted as dropped, the sink is closed under a blocked write (which
// ends one blocked on a pipe; one stuck in the kernel on a hung disk
// keeps the goroutine until it returns), and Close returns an error
// saying how many records it left.
func (w *DecisionWriter) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stopOnce.Do(func() { close(w.stop) })
	select {
	case <-w.done:
		return w.closeSink()
	case <-ctx.Done():
		select {
		case <-w.done: // both were ready
			return w.closeSink()
		default:
		}
	}
	queued := len(w.queue)
	w.abandonOnce.Do(func() { close(w.abandon) })
	return errors.Join(
		fmt.Errorf("gave up flushing the decision log, %d records still queued (%w)", queued, context.Cause(ctx)),
		w.closeSink())
}

func (w *DecisionWriter) run() {
	defer close(w.done)
	for {
		select {
		case rec := <-w.queue:
			w.write(rec)
		case reply := <-w.reopens:
			// The records queued before the reopen was asked for
			// belong in the file that was open then.
			for n := len(w.queue); n > 0; n-- {
				w.write(<-w.queue)
			}
			reply <- w.sink.(decisionReopener).Reopen()
		case <-w.stop:
			w.drain()
			return
		}
	}
}

// drain writes the records queued before Close (or counts them, once
// Close has given up), then closes the sink. Close has stopped Write queueing,
// so an empty queue stays empty.
func (w *DecisionWriter) drain() {
	for {
		select {
		case rec := <-w.queue:
			w.write(rec)
		default:
			// Close returns the error, when it is still waiting.
			_ = w.closeSink()
			return
		}
	}
}

// write writes rec to the sink, or counts it as dropped once Close has
// given up.
func (w *DecisionWriter) write(rec []byte) {
	select {
	case <-w.abandon:
		recordLost(context.Background(), w.metrics, w.logger, &w.dropped, lostDropped, errDecisionAbandoned, time.Now())
		return
	default:
	}
	if _, err := w.sink.Write(rec); err != nil {
		recordLost(context.Background(), w.metrics, w.logger, &w.failed, lostWrite, err, time.Now())
	}
}
