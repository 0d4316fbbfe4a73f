package selector

import (
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// transitionPrior is how many observed calls the seeded P(next | last) of
// the Config is worth: with fewer observations from a tool the seed
// dominates, with many the observed frequencies do.
const transitionPrior = 5.0

// Transitions learns P(next | last) online from the tool calls the gateway
// observes. It is safe for concurrent use and bounded: it remembers at most
// the given number of "last" tools, least recently observed forgotten first.
// It does not persist anything. The zero value is not usable; use
// NewTransitions.
type Transitions struct {
	mu   sync.Mutex
	rows *lru.Cache[string, *transitionRow]
}

type transitionRow struct {
	total float64
	next  map[string]float64
}

// NewTransitions returns a learner remembering up to maxTools source tools
// (<= 0 means 4096).
func NewTransitions(maxTools int) *Transitions {
	if maxTools <= 0 {
		maxTools = 4096
	}
	rows, _ := lru.New[string, *transitionRow](maxTools) // errors only for size <= 0
	return &Transitions{rows: rows}
}

// Observe records that next was called right after last. Empty names are
// ignored.
func (t *Transitions) Observe(last, next string) {
	if t == nil || last == "" || next == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.rows.Get(last)
	if !ok {
		r = &transitionRow{next: map[string]float64{}}
		// Names may alias a request or response body: a kept key holds
		// the whole body for as long as the table keeps it.
		t.rows.Add(strings.Clone(last), r)
	}
	if len(r.next) >= 256 {
		if _, known := r.next[next]; !known {
			return // a source with hundreds of successors tells us little more
		}
	}
	r.total++
	// Cloned even when known: a map assignment stores the key it is
	// given, for strings too.
	r.next[strings.Clone(next)]++
}

// counts returns the observations from last: total and per next tool, as a
// copy the caller may keep.
func (t *Transitions) counts(last string) (float64, map[string]float64) {
	if t == nil || last == "" {
		return 0, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.rows.Peek(last)
	if !ok {
		return 0, nil
	}
	cp := make(map[string]float64, len(r.next))
	for k, v := range r.next {
		cp[k] = v
	}
	return r.total, cp
}

// transitionProbs blends the seeded P(next | last) with the learned counts
// as a Bayesian estimate: (prior*seed + count) / (prior + total).
func transitionProbs(seed map[string]float64, learned *Transitions, last string) map[string]float64 {
	total, cnt := learned.counts(last)
	if len(seed) == 0 && total == 0 {
		return nil
	}
	prior := transitionPrior
	if len(seed) == 0 {
		prior = 0
	}
	out := make(map[string]float64, len(seed)+len(cnt))
	for k, p := range seed {
		out[k] = prior * p / (prior + total)
	}
	for k, n := range cnt {
		out[k] += n / (prior + total)
	}
	return out
}
