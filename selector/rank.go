package selector

import (
	"context"
	"maps"
	"math"
	"path"
	"slices"
	"strings"
)

// Default cuts of a search.
const (
	defaultLimit = 5
	// candidatePool is how many lexical candidates reach the ensemble: the
	// other signals re-rank, they do not retrieve (except the tools they
	// name themselves: anchors, transitions, recent tools).
	candidatePool = 60
	// rrfK is reciprocal rank fusion's k for lexical and semantic ranks:
	// measured on the dev sets, rank fusion at k=10 beats adding the
	// normalised scores (+0.005 recall@10 on average) and k=30 is too flat.
	rrfK = 10
	// lexLeadWeight scales the bonus of the lexical winner by its margin
	// over the runner-up (1 - second/best): rank fusion alone lets a tool
	// second lexically and first semantically take rank 1 from a clear
	// lexical winner. Measured on the dev sets: recall@1 +0.06
	// (bfcl), +0.07 (metatool, mcp), recall@5 and @10 unchanged; a bonus
	// for every candidate by its normalised score (score fusion on top of
	// rank fusion) gained a little recall@5 but lost mcp recall@10.
	lexLeadWeight = 1.0
	// decomposeMinWords is the shortest fragment that counts as a task of
	// its own in a multi-part request.
	decomposeMinWords = 3
)

// DefaultWeights are the ensemble weights a Config without weights gets.
// The lexical score and the semantic similarity are normalised to 0..1 per
// query, so the other weights read as "worth this share of a perfect match".
func DefaultWeights() Weights {
	return Weights{
		Lexical:    1.0,
		Semantic:   0.5,
		Focus:      0.15,
		Transition: 0.6,
		Recency:    0.1,
		Anchor:     1.0,
		Avoid:      1.0,
		Related:    0.5,
		Done:       0.5,
		// DocNeighbours and Habit: selector/README.md has the
		// measurements (rounds 9 and 19).
		DocNeighbours: 0.3,
		Habit:         1.0,
	}
}

// signal names one contribution to a candidate's score.
type signal int

const (
	sigLexical signal = iota
	sigSemantic
	sigMaxSim
	sigLead
	sigFocus
	sigTransition
	sigRecency
	sigAnchor
	sigAvoid
	sigRelated
	sigHabit
	nSignals
)

// String is the signal's name in Result.Signals.
func (s signal) String() string {
	switch s {
	case sigLexical:
		return "lexical"
	case sigSemantic:
		return "semantic"
	case sigMaxSim:
		return "maxsim"
	case sigLead:
		return "lead"
	case sigFocus:
		return "focus"
	case sigTransition:
		return "transition"
	case sigRecency:
		return "recency"
	case sigAnchor:
		return "anchor"
	case sigAvoid:
		return "avoid"
	case sigRelated:
		return "related"
	case sigHabit:
		return "habit"
	}
	return "unknown"
}

// scored is one candidate during ranking, in 24 bytes: a search writes its
// candidate list afresh each time, and with the signals in it as an array
// (96 bytes) that list makes most of rank's cache misses once the catalog
// has gone cold. The signals are derived again (fusion.signals) only for
// the returned tools, and only when the query asks (Query.Explain).
type scored struct {
	doc      int32
	anchored bool // the anchor signal counted: confidence trusts an anchored top
	extra    bool // joined by rideAlong, not ranked: related is its only signal
	score    float64
	related  float64 // rideAlong's lift of the score
}

// fusion is one query's inputs to the score of every candidate.
type fusion struct {
	c                        *Catalog
	w                        Weights
	lexRank, semRank, msRank []int32
	lexTop                   int32
	margin                   float64
	focus                    string
	trans, recent, anchored  map[int32]float64
	habits                   map[int32]float64
	qwords                   map[string]bool
}

// sum adds up a candidate's signals in signal order, skipping absent
// ones, and keeps each one in v when v is set (to explain a result).
type sum struct {
	score    float64
	anchored bool
	v        *[nSignals]float64
}

func (s *sum) put(sig signal, x float64) {
	if x == 0 {
		return
	}
	s.score += x
	s.anchored = s.anchored || sig == sigAnchor
	if s.v != nil {
		s.v[sig] = x
	}
}

// signals adds candidate d's contribution from each signal to s. The
// order is part of the result, as in bleve's sums of clauses.
func (f *fusion) signals(d int32, s *sum) {
	w := f.w
	// Weighted reciprocal rank fusion, scaled so rank 1 is worth the
	// signal's weight (the other signals read as shares of that).
	if r := f.lexRank[d]; r > 0 {
		s.put(sigLexical, w.Lexical*(rrfK+1)/(rrfK+float64(r)))
	}
	if r := f.semRank[d]; r > 0 {
		s.put(sigSemantic, w.Semantic*(rrfK+1)/(rrfK+float64(r)))
	}
	if r := f.msRank[d]; r > 0 {
		// Max-sim rides on the semantic weight (off with it), scaled
		// so the default semantic weight gives maxSimWeight.
		s.put(sigMaxSim, w.Semantic/DefaultWeights().Semantic*maxSimWeight*(rrfK+1)/(rrfK+float64(r)))
	}
	if d == f.lexTop {
		s.put(sigLead, w.Lexical*lexLeadWeight*f.margin)
	}
	if f.focus != "" && w.Focus > 0 && f.c.matchesFocus(&f.c.tools[d], f.focus) {
		s.put(sigFocus, w.Focus)
	}
	if p := f.trans[d]; p > 0 {
		s.put(sigTransition, w.Transition*p)
	}
	if r := f.recent[d]; r > 0 {
		s.put(sigRecency, w.Recency*r)
	}
	if a := f.anchored[d]; a > 0 {
		s.put(sigAnchor, w.Anchor*a)
	}
	if h := f.habits[d]; h > 0 {
		s.put(sigHabit, w.Habit*h)
	}
	if f.qwords != nil && f.c.avoids(&f.c.tools[d], f.qwords) {
		s.put(sigAvoid, -w.Avoid)
	}
}

// score returns candidate d, scored.
func (f *fusion) score(d int32) scored {
	var s sum
	f.signals(d, &s)
	return scored{doc: d, score: s.score, anchored: s.anchored}
}

// explain returns s's non-zero contributions by name.
func (f *fusion) explain(s *scored) map[string]float64 {
	var v [nSignals]float64
	if !s.extra {
		f.signals(s.doc, &sum{v: &v})
	}
	v[sigRelated] = s.related
	m := make(map[string]float64, 4)
	for i, x := range v {
		if x != 0 {
			m[signal(i).String()] = x
		}
	}
	return m
}

// rank runs the ensemble over the lexical candidates plus the tools the
// session signals name, then cuts, adds related tools and computes the
// confidence. words are q.Text's content words (contentWords), analysed
// once per search for the semantic query and max-sim.
func (c *Catalog) rank(ctx context.Context, q Query, lex lexScores, lq *lexQuery, words []string) Results {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	w := c.w
	sc := c.scratch()
	defer c.scratchPool.Put(sc)
	cands := append([]int32(nil), lex.order...)
	seen := sc.seen
	defer func() {
		for _, d := range cands {
			seen[d] = false
		}
	}()
	for _, d := range cands {
		seen[d] = true
	}
	// The session signals name their tools; they are looked up once here
	// and kept by position, so scoring a candidate reads no tool's name.
	addCand := func(name string) (int32, bool) {
		i, ok := c.byName[name]
		if ok && !seen[int32(i)] {
			seen[int32(i)] = true
			cands = append(cands, int32(i))
		}
		return int32(i), ok
	}

	var rows []int32 // words' rows in the word vectors, for both signals that read them
	if wv := c.wordVectors(); wv != nil && w.Semantic > 0 {
		var buf [32]int32
		rows = c.wordRows(wv, words, buf[:0])
	}
	var semDocs []int32
	if w.Semantic > 0 && c.sem != nil {
		semDocs = c.sem.ranked(ctx, q.Text, q.EmbedBudget, words, rows, candidatePool, sc.sims)
		for _, d := range semDocs {
			if !seen[d] {
				seen[d] = true
				cands = append(cands, d)
			}
		}
	}
	f := fusion{c: c, w: w, focus: strings.ToLower(strings.TrimSpace(q.Focus))}
	f.gatherSignals(&q, lq, addCand)
	// The query's terms for avoid_when are set here, not in gatherSignals:
	// a map made in rank's frame stays on its stack, one made behind f's
	// pointer escapes to the heap.
	if w.Avoid > 0 && c.hasAvoid {
		f.qwords = map[string]bool{}
		for _, t := range c.an.terms(q.Text) {
			f.qwords[t] = true
		}
	}

	lexRank, semRank, msRank := sc.lexRank, sc.semRank, sc.msRank
	lexDocs := rankScored(lex.order, lex.score, lexRank)
	for i, d := range semDocs {
		semRank[d] = int32(i + 1)
	}
	msDocs := c.maxSimRanks(rows, lexDocs, semDocs, lexRank, msRank)
	defer func() {
		for _, ds := range [...]struct {
			docs  []int32
			ranks []int32
		}{{lexDocs, lexRank}, {semDocs, semRank}, {msDocs, msRank}} {
			for _, d := range ds.docs {
				ds.ranks[d] = 0
			}
		}
	}()
	f.lexRank, f.semRank, f.msRank = lexRank, semRank, msRank
	f.lexTop, f.margin = lexLead(lex)
	list := sc.list[:0]
	for _, d := range cands {
		if q.Skip != nil && q.Skip(int(c.pos[d])) {
			continue
		}
		list = append(list, f.score(d))
	}
	topScored(list, limit)
	if w.Related > 0 {
		list = c.rideAlong(list, limit, w.Related, q.Skip)
	}
	if len(list) > limit {
		list = list[:limit]
	}
	res := c.toResults(list, &f, q.Explain)
	var cover float64
	if len(list) > 0 {
		cover = c.coverage(lq, list[0].doc)
	}
	res.Confidence = confidence(list, cover)
	sc.list = list[:0]
	return res
}

// gatherSignals sets f's signals that name their tools (transitions from
// q's last tool, recency, anchors, habits) and adds those tools to the
// candidates through addCand.
func (f *fusion) gatherSignals(q *Query, lq *lexQuery, addCand func(name string) (int32, bool)) {
	c, w := f.c, f.w
	if w.Transition > 0 && q.Last != "" {
		for name, p := range transitionProbs(c.cfg.Transitions[q.Last], q.Learned, q.Last) {
			if d, ok := addCand(name); ok {
				addTo(&f.trans, d, p)
			}
		}
	}
	if w.Recency > 0 {
		for i := len(q.Recent) - 1; i >= 0; i-- {
			age := len(q.Recent) - 1 - i
			d, ok := addCand(q.Recent[i])
			if !ok {
				continue
			}
			if _, dup := f.recent[d]; !dup {
				addTo(&f.recent, d, math.Pow(0.7, float64(age)))
			}
		}
	}
	if w.Anchor > 0 {
		for _, a := range c.cfg.Anchors {
			if a.Pattern == nil || !a.Pattern.MatchString(q.Text) {
				continue
			}
			boost := a.Boost
			if boost == 0 {
				boost = 1
			}
			for _, name := range c.expand(a.Tools) {
				if d, ok := addCand(name); ok {
					addTo(&f.anchored, d, boost)
				}
			}
		}
	}
	if w.Habit > 0 && q.Habits.learned() && lq != nil {
		for name, h := range q.Habits.scores(slices.Sorted(maps.Keys(lq.terms))) {
			if d, ok := addCand(name); ok {
				addTo(&f.habits, d, h)
			}
		}
	}
}

// addTo adds v to (*m)[d], making the map on first use: most searches get
// no value from a given signal, and a nil map reads as zero for free.
func addTo(m *map[int32]float64, d int32, v float64) {
	if *m == nil {
		*m = map[int32]float64{}
	}
	(*m)[d] += v
}

// toResults returns list's tools as Results, each with its signals by name
// when explain is set.
func (c *Catalog) toResults(list []scored, f *fusion, explain bool) Results {
	res := Results{Items: make([]Result, len(list))}
	for i := range list {
		s := &list[i]
		t := &c.tools[s.doc]
		res.Items[i] = Result{
			Name:        t.Name,
			Description: c.first[s.doc],
			Hint:        t.Meta.Hint,
			Category:    t.Meta.Category,
			Score:       s.score,
		}
		if explain {
			res.Items[i].Signals = f.explain(s)
		}
	}
	return res
}

// rideAlong inserts the related tools of the top results right after their
// parent, at a share of the parent's score, unless already present.
func (c *Catalog) rideAlong(list []scored, limit int, share float64, skip func(int) bool) []scored {
	top := min(limit, len(list))
	related := false
	for i := range list[:top] {
		related = related || len(c.tools[list[i].doc].Meta.Related) > 0
	}
	if !related {
		return list // nothing rides along: the top is in order already
	}
	present := make(map[int32]bool, len(list))
	for _, s := range list {
		present[s.doc] = true
	}
	var extra []scored
	for _, s := range list[:top] {
		for _, name := range c.tools[s.doc].Meta.Related {
			i, ok := c.byName[name]
			if !ok || (skip != nil && skip(int(c.pos[i]))) {
				continue
			}
			d := int32(i)
			v := share * s.score
			if present[d] {
				// Already a candidate: lift it if riding along scores more.
				for j := range list {
					if list[j].doc == d && list[j].score < v {
						list[j].related = v - list[j].score
						list[j].score = v
					}
				}
				continue
			}
			present[d] = true
			extra = append(extra, scored{doc: d, extra: true, score: v, related: v})
		}
	}
	list = append(list, extra...)
	topScored(list, limit)
	return list
}

// matchesFocus reports whether a tool works on the session's entity: its
// policy entity, or its name or category mentioning it.
func (c *Catalog) matchesFocus(t *Tool, focus string) bool {
	if strings.EqualFold(t.Meta.Entity, focus) {
		return true
	}
	for _, w := range c.an.terms(t.Name) {
		for _, f := range c.an.terms(focus) {
			if w == f {
				return true
			}
		}
	}
	return false
}

// avoids reports whether the query contains every term of one of the
// tool's avoid_when phrases.
func (c *Catalog) avoids(t *Tool, qwords map[string]bool) bool {
	for _, phrase := range t.Meta.AvoidWhen {
		terms := c.an.terms(phrase)
		if len(terms) == 0 {
			continue
		}
		all := true
		for _, term := range terms {
			if !qwords[term] {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// expand resolves exact names and path.Match globs against the catalog.
func (c *Catalog) expand(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		if !strings.ContainsAny(p, "*?[") {
			if _, ok := c.byName[p]; ok {
				out = append(out, p)
			}
			continue
		}
		for _, t := range c.tools {
			if ok, _ := path.Match(p, t.Name); ok {
				out = append(out, t.Name)
			}
		}
	}
	return out
}

// confidence is high when the best tool covers most of the query's terms
// and stands clear of the runner-up.
func confidence(list []scored, cov float64) float64 {
	if len(list) == 0 || list[0].score <= 0 {
		return 0
	}
	if list[0].anchored {
		cov = max(cov, 0.8)
	}
	margin := 1.0
	if len(list) > 1 {
		margin = 1 - list[1].score/list[0].score
	}
	return math.Round((0.7*cov+0.3*margin)*100) / 100
}
