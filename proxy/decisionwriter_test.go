package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/goleak"
)

// stuckSink is a decision log whose Write blocks until release is
// closed, as a FIFO whose reader stopped reading or a hung disk: the
// first Write closes entered. Its Close does not end a blocked Write (a
// write stuck in the kernel); Reopen notes itself among the records.
type stuckSink struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	got     []string
}

func newStuckSink() *stuckSink {
	return &stuckSink{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *stuckSink) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, string(p))
	return len(p), nil
}

func (s *stuckSink) Reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, "reopen")
	return nil
}

func (s *stuckSink) Close() error { return nil }

func (s *stuckSink) records() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// healthySink takes every write at once; Reopen notes itself among the
// records.
type healthySink struct{ stuckSink }

func newHealthySink() *healthySink {
	s := &healthySink{*newStuckSink()}
	close(s.release)
	return s
}

// lostRecords is toolgate_decision_log_errors_total{reason}.
func lostRecords(t *testing.T, m *Metrics, reason string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolgate_decision_log_errors_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no toolgate_decision_log_errors_total{reason=%q}", reason)
	return 0
}

// returnsWithin fails t when f takes longer than d: f blocked on the sink.
func returnsWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s took longer than %v: it waits on the decision log's blocked write", what, d)
	}
}

// TestADecisionWriterNeverWaitsOnItsSink: the decision log was written
// in the request handler under one mutex, so a FIFO whose reader stopped
// held up every request, the SIGHUP handler and the exit after a drain.
func TestADecisionWriterNeverWaitsOnItsSink(t *testing.T) {
	const bound = 100 * time.Millisecond
	for _, tc := range []struct {
		name string
		// act runs while the sink's first write is blocked, and must
		// return within a second.
		act func(t *testing.T, w *DecisionWriter, log *slog.Logger)
	}{
		{"logging records returns while the sink's write is blocked", func(t *testing.T, w *DecisionWriter, log *slog.Logger) {
			for i := range 100 {
				log.Info("decision", "n", i)
			}
		}},
		{"Reopen returns with an error at its deadline while the sink's write is blocked", func(t *testing.T, w *DecisionWriter, log *slog.Logger) {
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := w.Reopen(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Reopen = %v, want an error saying its deadline passed", err)
			}
		}},
		{"Close returns at its deadline while the sink's write is blocked, saying what it left", func(t *testing.T, w *DecisionWriter, log *slog.Logger) {
			log.Info("decision", "n", 1)
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := w.Close(ctx); err == nil || !strings.Contains(err.Error(), "1 records still queued") {
				t.Errorf("Close = %v, want an error saying it gave up on 1 record", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			sink := newStuckSink()
			w := NewDecisionWriter(sink, DecisionWriterOptions{Logger: slog.New(slog.DiscardHandler)})
			log := slog.New(slog.NewJSONHandler(w, nil))
			go log.Info("decision", "n", 0) // the record the sink holds
			<-sink.entered
			returnsWithin(t, time.Second, tc.name, func() { tc.act(t, w, log) })
			// The sink recovers: the goroutine ends, and leaks nothing.
			close(sink.release)
			if err := w.Close(context.Background()); err != nil && !strings.Contains(tc.name, "Close") {
				t.Error(err)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestADecisionWriterWritesEveryRecordInOrder: records handed over while
// the sink takes them all reach it whole, once each and in order, also
// across a reopen, and Close returns once they have.
func TestADecisionWriterWritesEveryRecordInOrder(t *testing.T) {
	const records = DecisionQueueSize // all fit, however slow the writer
	for _, tc := range []struct {
		name     string
		reopenAt int // -1: none
	}{
		{"records from one goroutine arrive in the order they were logged", -1},
		{"records logged before a reopen reach the sink before it, those after it after", records / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			m := NewMetrics()
			sink := newHealthySink()
			w := NewDecisionWriter(sink, DecisionWriterOptions{Metrics: m, Logger: slog.New(slog.DiscardHandler)})
			log := slog.New(slog.NewJSONHandler(w, nil))
			want := make([]string, 0, records+1)
			for i := range records {
				if i == tc.reopenAt {
					if err := w.Reopen(context.Background()); err != nil {
						t.Fatal(err)
					}
					want = append(want, "reopen")
				}
				log.Info("decision", "n", i)
				want = append(want, fmt.Sprint(i))
			}
			if err := w.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := sink.records()
			for i, r := range got {
				if r != "reopen" {
					got[i] = gjson.Get(r, "n").Raw
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d records written, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("record %d is %s, want %s", i, got[i], want[i])
				}
			}
			for _, reason := range []string{lostWrite, lostDropped} {
				if n := lostRecords(t, m, reason); n != 0 {
					t.Errorf("%v records lost as %s, want none", n, reason)
				}
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// failingSink refuses every write, as a full disk does.
type failingSink struct{}

func (failingSink) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestADecisionWriterCountsEveryRecordItLoses: a record that finds the
// queue full is dropped, not waited for; it and one the sink refuses are
// counted under their reason and said once.
func TestADecisionWriterCountsEveryRecordItLoses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		queue   int
		records int // logged after the first, which the sink holds
		stuck   bool
		dropped float64
		failed  float64
		warns   string
	}{
		{"a full queue drops the records past it and counts them", 4, 10, true, 6, 0, "dropped"},
		{"a queue of one drops all but one", 1, 10, true, 9, 0, "dropped"},
		{"a queue with room drops nothing", 16, 10, true, 0, 0, ""},
		{"records a full disk refuses are counted as failed writes", 16, 10, false, 0, 11, "no space left on device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			m := NewMetrics()
			var logs syncBuffer
			stuck := newStuckSink()
			var sink interface {
				Write([]byte) (int, error)
			} = failingSink{}
			if tc.stuck {
				sink = stuck
			}
			w := NewDecisionWriter(sink, DecisionWriterOptions{QueueSize: tc.queue, Metrics: m, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			log := slog.New(slog.NewJSONHandler(w, nil))
			if tc.stuck {
				go log.Info("decision", "n", 0) // the record the sink holds
				<-stuck.entered
			} else {
				log.Info("decision", "n", 0)
			}
			returnsWithin(t, time.Second, "logging into a full queue", func() {
				for i := range tc.records {
					log.Info("decision", "n", i+1)
				}
			})
			if got := lostRecords(t, m, lostDropped); got != tc.dropped {
				t.Errorf("dropped %v, want %v", got, tc.dropped)
			}
			close(stuck.release)
			if err := w.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := lostRecords(t, m, lostWrite); got != tc.failed {
				t.Errorf("failed writes %v, want %v", got, tc.failed)
			}
			if tc.stuck {
				if got, want := len(stuck.records()), 1+tc.records-int(tc.dropped); got != want {
					t.Errorf("%d records written once the sink recovered, want the %d queued", got, want)
				}
			}
			warnings := strings.Count(logs.String(), `"level":"WARN"`)
			switch {
			case tc.warns == "" && warnings != 0:
				t.Errorf("warned of lost records that were not:\n%s", logs.String())
			case tc.warns != "" && (warnings != 1 || !strings.Contains(logs.String(), tc.warns)):
				t.Errorf("want one warning saying %q, got:\n%s", tc.warns, logs.String())
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestARecordAfterCloseIsCounted: a handler that outlived the drain logs
// after the decision log closed; its record is counted, not lost unsaid.
func TestARecordAfterCloseIsCounted(t *testing.T) {
	t.Run("a record logged after Close is counted as dropped", func(t *testing.T) {
		m := NewMetrics()
		var buf bytes.Buffer
		w := NewDecisionWriter(&buf, DecisionWriterOptions{Metrics: m, Logger: slog.New(slog.DiscardHandler)})
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		slog.New(slog.NewJSONHandler(w, nil)).Info("decision")
		if got := lostRecords(t, m, lostDropped); got != 1 {
			t.Errorf("dropped %v, want 1", got)
		}
		if buf.Len() != 0 {
			t.Errorf("written after Close: %q", buf.String())
		}
	})
}
