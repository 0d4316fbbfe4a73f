package selector

import (
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Habits learns online which tools the requests of one tenant went on to
// call, by the words of the request: for each word, in how many of the
// turns that had it each tool was called. Preselect then lifts the tools
// that requests with the same words called before. It bridges what the
// ranking cannot: "save it as Markdown to /root/notes.md" never says
// "write file", but a tenant whose agents save files that way teaches
// the gateway to offer the file-writing tool up front instead of after a
// search round. Safe for concurrent use; bounded by its word count, the
// least recently seen words going first. What it saves in upstream calls,
// in every order of the episodes, is in selector/README.md (round 19).
type Habits struct {
	mu    sync.Mutex
	turns int // turns observed
	words *simplelru.LRU[string, *habitWord]
}

// habitTools is how many tools a word remembers; a new tool takes the
// place of the least called one.
const habitTools = 6

// habitMinTurns is how many turns must have called a tool for a word
// before the word lifts it: one turn is an anecdote, and lifting every
// tool a single request happened to call puts the wrong tools in the
// preselection's slots.
const habitMinTurns = 2

// habitMaxRequestWords bounds the distinct words of a request that teach:
// a longer one (a pasted document, a long log) would push the tenant's
// useful words out of the table for words that say little about the tool
// a step called, so it teaches nothing.
const habitMaxRequestWords = 64

// habitWord is one word's record: the turns that had it and the tools
// they called.
type habitWord struct {
	turns int32
	tools [habitTools]habitCount
}

type habitCount struct {
	name  string
	turns int32
}

// NewHabits keeps at most maxWords words (default 512 when <= 0): about
// 120 KB at most.
func NewHabits(maxWords int) *Habits {
	if maxWords <= 0 {
		maxWords = 512
	}
	words, _ := simplelru.NewLRU[string, *habitWord](maxWords, nil) // errors only on size <= 0
	return &Habits{words: words}
}

// observe records that a turn with the given analysed words called the
// tools named in called (each once per turn); newTurn counts the turn
// itself, which the first observation of a turn does.
func (h *Habits) observe(words []string, called []string, newTurn bool) {
	if h == nil || len(words) == 0 || len(words) > habitMaxRequestWords || !newTurn && len(called) == 0 {
		return
	}
	// One copy of each name, shared by every word that records it: names
	// may alias a request body, which the habits outlive.
	names := make([]string, len(called))
	for i, n := range called {
		names[i] = strings.Clone(n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if newTurn {
		h.turns++
	}
	for _, w := range words {
		rec, ok := h.words.Get(w)
		if !ok {
			rec = &habitWord{}
			h.words.Add(strings.Clone(w), rec)
		}
		if newTurn {
			rec.turns++
		}
		for _, name := range names {
			rec.add(name)
		}
	}
}

// add counts a call of name, taking the slot of the least called tool when
// the word's slots are full.
func (r *habitWord) add(name string) {
	least := 0
	for i := range r.tools {
		c := &r.tools[i]
		if c.name == name {
			c.turns++
			return
		}
		if c.turns < r.tools[least].turns {
			least = i
		}
	}
	r.tools[least] = habitCount{name: name, turns: 1}
}

// scores returns, by tool name, how strongly the words point at each tool
// (0..1): the sum over the words of P(tool called | word) weighted by the
// word's rarity among the turns observed (an idf), capped at 1. Only tools
// called in habitMinTurns turns with a word count for it. nil when no word
// points anywhere. words come sorted, so the sums (and so ties) do not
// depend on map order.
func (h *Habits) scores(words []string) map[string]float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out map[string]float64
	for _, w := range words {
		rec, ok := h.words.Peek(w)
		if !ok || rec.turns == 0 {
			continue
		}
		idf := math.Log(1 + float64(h.turns)/float64(rec.turns))
		for _, c := range rec.tools {
			if c.turns < habitMinTurns {
				continue
			}
			if out == nil {
				out = map[string]float64{}
			}
			// Laplace-smoothed: two turns of two are not certainty.
			out[c.name] += idf * float64(c.turns) / float64(rec.turns+1)
		}
	}
	for name, s := range out {
		out[name] = min(s, 1)
	}
	return out
}

// learned reports whether h has observed a turn: until then a
// preselection skips it without sorting its words.
func (h *Habits) learned() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.turns > 0
}

// Len reports how many words the habits hold.
func (h *Habits) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.words.Len()
}

// Observe records what a turn called: text is the user's request, called
// the tools its latest step called that the turn had not called before,
// and newTurn is true for the turn's first step, which counts the turn. The
// words are the catalog's analysis of text, as a preselection reads it. A
// nil h records nothing.
func (c *Catalog) Observe(h *Habits, text string, called []string, newTurn bool) {
	if h == nil || text == "" || !newTurn && len(called) == 0 {
		return
	}
	q, _ := c.analyzeQuery(clip(text), 1)
	// In a set order: once the table is full, the order decides which
	// words push out which, and a map's order would make the same
	// requests teach different habits from run to run.
	h.observe(slices.Sorted(maps.Keys(q.terms)), called, newTurn)
}
