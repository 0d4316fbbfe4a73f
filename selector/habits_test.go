package selector

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// preselected returns the names Preselect picks for text, k of them.
func preselected(t *testing.T, c *Catalog, text string, k int, h *Habits) []string {
	t.Helper()
	res, err := c.Preselect(context.Background(), []string{text}, k, Query{Habits: h})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(res.Items))
	for i, it := range res.Items {
		names[i] = it.Name
	}
	return names
}

func TestHabitsLiftWhatEarlierRequestsWithTheSameWordsCalled(t *testing.T) {
	tools := testTools(t)
	const (
		taught  = "Keep the quarterly numbers somewhere safe as notes.md for later."
		similar = "Keep the weekly numbers somewhere safe too."
		other   = "Show me the open pull requests of the team."
		tool    = "fs_write_file"
		k       = 3
	)
	for _, tc := range []struct {
		name   string
		turns  int // turns with the taught words that called the tool
		weight float64
		query  string
		lifted bool
	}{
		{"two turns that called a tool put it in a similar request's preselection", 2, 1, similar, true},
		{"one turn is not enough: it could be an anecdote", 1, 1, similar, false},
		{"a habit weight of 0 switches the signal off", 3, 0, similar, false},
		{"a request without the turns' words is not lifted", 3, 1, other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := DefaultWeights()
			w.Habit = tc.weight
			c := compileTest(t, tools, Config{Weights: w})
			if got := preselected(t, c, tc.query, k, nil); slices.Contains(got, tool) {
				t.Fatalf("without habits %s is already preselected (%v); the test needs a request the ranking misses", tool, got)
			}
			h := NewHabits(0)
			for range tc.turns {
				c.Observe(h, taught, []string{tool}, true)
				// A second step of the turn called another tool; the turn is
				// counted once.
				c.Observe(h, taught, []string{"chat_send_message"}, false)
			}
			got := preselected(t, c, tc.query, k, h)
			if slices.Contains(got, tool) != tc.lifted {
				t.Errorf("after %d turns, preselected %v; %s among them = %v, want %v", tc.turns, got, tool, !tc.lifted, tc.lifted)
			}
		})
	}
	t.Run("the signal is named habit when a query asks for an explanation", func(t *testing.T) {
		c := compileTest(t, tools, Config{Weights: DefaultWeights()})
		h := NewHabits(0)
		for range 2 {
			c.Observe(h, taught, []string{tool}, true)
		}
		res, err := c.Preselect(context.Background(), []string{similar}, k, Query{Habits: h, Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			if it.Name == tool {
				if it.Signals["habit"] <= 0 {
					t.Errorf("%s signals %v; want a habit contribution", tool, it.Signals)
				}
				return
			}
		}
		t.Errorf("%s not preselected: %v", tool, res.Items)
	})
}

func TestHabitsStayWithinTheirBounds(t *testing.T) {
	t.Run("the least recently seen words go first", func(t *testing.T) {
		h := NewHabits(8)
		for i := range 20 {
			h.observe([]string{fmt.Sprintf("word%d", i)}, []string{"a"}, true)
		}
		if h.Len() != 8 {
			t.Fatalf("%d words kept, want 8", h.Len())
		}
		if s := h.scores([]string{"word0"}); s != nil {
			t.Errorf("the first word was not evicted: %v", s)
		}
	})
	t.Run("a full table keeps the same words each time the same requests teach it", func(t *testing.T) {
		c := compileTest(t, testTools(t), Config{})
		const text = "Open an issue about the flaky login test, label it urgent and assign it to the platform team."
		var first []string
		for i := range 20 {
			h := NewHabits(4)
			c.Observe(h, text, []string{"repo_create_issue"}, true)
			kept := slices.Sorted(slices.Values(h.words.Keys()))
			if h.Len() != 4 {
				t.Fatalf("%d words kept, want the table's 4", h.Len())
			}
			if i == 0 {
				first = kept
			} else if !slices.Equal(kept, first) {
				t.Fatalf("run %d kept %v, run 0 kept %v", i, kept, first)
			}
		}
	})
	t.Run("a request of more words than a request may teach teaches nothing", func(t *testing.T) {
		h := NewHabits(0)
		words := make([]string, habitMaxRequestWords+1)
		for i := range words {
			words[i] = fmt.Sprintf("word%d", i)
		}
		h.observe(words, []string{"a"}, true)
		if h.Len() != 0 {
			t.Errorf("%d words kept from a %d-word request, want none", h.Len(), len(words))
		}
		h.observe(words[:habitMaxRequestWords], []string{"a"}, true)
		if h.Len() != habitMaxRequestWords {
			t.Errorf("%d words kept from a %d-word request, want all", h.Len(), habitMaxRequestWords)
		}
	})
	t.Run("a word keeps its most called tools", func(t *testing.T) {
		h := NewHabits(0)
		// Two turns call "steady"; then more tools than a word remembers
		// come once each.
		for range 2 {
			h.observe([]string{"report"}, []string{"steady"}, true)
		}
		for i := range habitTools * 2 {
			h.observe([]string{"report"}, []string{fmt.Sprintf("once%d", i)}, true)
		}
		s := h.scores([]string{"report"})
		if s["steady"] <= 0 {
			t.Errorf("scores %v; the tool two turns called was pushed out by tools called once", s)
		}
		if len(s) != 1 {
			t.Errorf("scores %v; tools called in one turn lift nothing", s)
		}
	})
}

func TestHabitsAreSafeForConcurrentUse(t *testing.T) {
	c := compileTest(t, testTools(t), Config{Weights: DefaultWeights()})
	h := NewHabits(64)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				text := fmt.Sprintf("save report %d of batch %d as a file", i, g)
				c.Observe(h, text, []string{"fs_write_file"}, true)
				if _, err := c.Preselect(context.Background(), []string{text}, 5, Query{Habits: h}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := preselected(t, c, "save report 1 of batch 2 as a file", 5, h); !slices.Contains(got, "fs_write_file") {
		t.Errorf("after 200 turns preselected %v; want fs_write_file", got)
	}
}
