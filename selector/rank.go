package selector

import (
	"cmp"
	"context"
	"fmt"
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
	// over the runner-up (1 - second/best): rank fusion alone let a tool
	// that was second lexically and first semantically take rank 1 from a
	// clear lexical winner. Measured on the dev sets: recall@1 +0.06
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
		// DocNeighbours: see docexpand.go for the measurements.
		DocNeighbours: 0.3,
		// Habit: see habits.go for the measurements.
		Habit: 1.0,
	}
}

// Search ranks the catalog's tools for q. It never returns tools q.Skip
// rejects. A query without any matching term still gets the tools the
// session signals (anchors, transitions, recency) point at, with a low
// confidence. The error is non-nil only when ctx is done.
func (c *Catalog) Search(ctx context.Context, q Query) (Results, error) {
	if err := ctx.Err(); err != nil {
		return Results{}, fmt.Errorf("searching catalog: %w", err)
	}
	q.Text = clip(q.Text)
	lq, words := c.analyzeQuery(q.Text, 1)
	lex, err := c.lexicalWithParts(ctx, lq, q.Text)
	if err != nil {
		return Results{}, fmt.Errorf("searching catalog: %w", err)
	}
	if xq := c.expandWeak(lq, words, lex); xq != nil {
		xl, err := c.lexicalWithParts(ctx, xq, q.Text)
		if err != nil {
			return Results{}, fmt.Errorf("searching catalog: %w", err)
		}
		lex, lq = xl, xq
	}
	return c.rank(ctx, q, lex, lq, words), nil
}

// Preselect returns the k tools that best fit a conversation turn, for the
// proxy to add to the active set before the first upstream call. texts are
// the conversation's recent user messages, oldest first; the last one is the
// latest turn and weighs most, earlier ones add context at a lower weight.
// Session signals (focus, last tool, recency) come from q, whose Text and
// Limit are ignored.
func (c *Catalog) Preselect(ctx context.Context, texts []string, k int, q Query) (Results, error) {
	if err := ctx.Err(); err != nil {
		return Results{}, fmt.Errorf("preselecting tools: %w", err)
	}
	if len(texts) == 0 {
		return Results{}, nil
	}
	texts = clipAll(texts)
	latest := texts[len(texts)-1]
	lq, words := c.analyzeQuery(latest, 1)
	c.discountDone(lq, q.Done)
	lq.nbr = true // the document-side neighbour field: Preselect only (docexpand.go)
	lex, err := c.lexicalWithParts(ctx, lq, latest)
	if err != nil {
		return Results{}, fmt.Errorf("preselecting tools: %w", err)
	}
	if len(texts) > 1 {
		// Context: earlier turns, each half as relevant as the next one.
		cq := &lexQuery{terms: map[string]float64{}}
		w := 0.35
		for i := len(texts) - 2; i >= 0 && w > 0.05; i-- {
			cq.add(c.an.terms(texts[i]), w)
			w /= 2
		}
		ctxLex, err := c.lexical(ctx, cq, candidatePool)
		if err != nil {
			return Results{}, fmt.Errorf("preselecting tools: %w", err)
		}
		c.mergeLex(&lex, ctxLex, func(old, v float64) float64 { return old + 0.35*v })
	}
	q.Text = latest
	q.Limit = k
	return c.rank(ctx, q, lex, lq, words), nil
}

// lexicalWithParts returns the candidates' normalised lexical scores for
// the query: the whole query's, or, for a multi-part request, the best of
// the whole and each part's (so the best tool for every part reaches the
// top).
func (c *Catalog) lexicalWithParts(ctx context.Context, lq *lexQuery, text string) (lexScores, error) {
	lex, err := c.lexical(ctx, lq, candidatePool)
	if err != nil || c.w.Decompose <= 0 {
		return lex, err
	}
	for _, part := range decompose(text, decomposeMinWords) {
		pq, _ := c.analyzeQuery(part, 1)
		pl, err := c.lexical(ctx, pq, candidatePool)
		if err != nil {
			return lex, err
		}
		// A part's best tools join the whole query's at a discount, so
		// they surface without letting a stray fragment take over.
		c.mergeLex(&lex, pl, func(old, v float64) float64 { return max(old, c.w.Decompose*v) })
	}
	return lex, nil
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

// scored is one candidate during ranking: 24 bytes, where its signals as
// an array made it 96, and a search's candidate list, written afresh each
// time, was most of rank's cache misses once the catalog had gone cold.
// The signals are derived again (fusion.signals) only for the returned
// tools, and only when the query asks (Query.Explain).
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
	var trans map[int32]float64
	if w.Transition > 0 && q.Last != "" {
		for name, p := range transitionProbs(c.cfg.Transitions[q.Last], q.Learned, q.Last) {
			if d, ok := addCand(name); ok {
				if trans == nil {
					trans = map[int32]float64{}
				}
				trans[d] = p
			}
		}
	}
	var recent map[int32]float64
	if w.Recency > 0 {
		for i := len(q.Recent) - 1; i >= 0; i-- {
			age := len(q.Recent) - 1 - i
			d, ok := addCand(q.Recent[i])
			if !ok {
				continue
			}
			if recent == nil {
				recent = map[int32]float64{}
			}
			if _, dup := recent[d]; !dup {
				recent[d] = math.Pow(0.7, float64(age))
			}
		}
	}
	var anchored map[int32]float64
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
					if anchored == nil {
						anchored = map[int32]float64{}
					}
					anchored[d] += boost
				}
			}
		}
	}
	var habits map[int32]float64
	if w.Habit > 0 && q.Habits.learned() && lq != nil {
		for name, h := range q.Habits.scores(slices.Sorted(maps.Keys(lq.terms))) {
			if d, ok := addCand(name); ok {
				if habits == nil {
					habits = map[int32]float64{}
				}
				habits[d] = h
			}
		}
	}
	var qwords map[string]bool
	if w.Avoid > 0 && c.hasAvoid {
		qwords = map[string]bool{}
		for _, t := range c.an.terms(q.Text) {
			qwords[t] = true
		}
	}
	focus := strings.ToLower(strings.TrimSpace(q.Focus))

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
	f := fusion{c: c, w: w, lexRank: lexRank, semRank: semRank, msRank: msRank,
		focus: focus, trans: trans, recent: recent, anchored: anchored, habits: habits, qwords: qwords}
	f.lexTop, f.margin = lexLead(lex)
	list := sc.list[:0]
	for _, d := range cands {
		if q.Skip != nil && q.Skip(int(d)) {
			continue
		}
		list = append(list, f.score(d))
	}
	topScored(list, limit, c)
	if w.Related > 0 {
		list = c.rideAlong(list, limit, w.Related, q.Skip)
	}
	if len(list) > limit {
		list = list[:limit]
	}
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
		if q.Explain {
			res.Items[i].Signals = f.explain(s)
		}
	}
	var cover float64
	if len(list) > 0 {
		cover = c.coverage(lq, list[0].doc)
	}
	res.Confidence = confidence(list, cover)
	sc.list = list[:0]
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
			if !ok || (skip != nil && skip(i)) {
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
	topScored(list, limit, c)
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

// topDocs returns the n documents with the highest positive scores, best
// first, ties by document order.
func topDocs(scores []float64, n int) []int32 { return topAmong(nil, scores, n) }

// sortScored orders by score, then by name so ties are deterministic. A
// tool is in the list once and names are unique, so the order is total and
// an unstable sort gives the same result as a stable one, with fewer moves
// of the (signal-carrying) entries.
func sortScored(list []scored, c *Catalog) {
	slices.SortFunc(list, func(a, b scored) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		return strings.Compare(c.tools[a.doc].Name, c.tools[b.doc].Name)
	})
}

// topScored moves list's k best entries, in sortScored's order, to its
// front and leaves the rest in no particular order: only the top k are
// returned, and a full sort moved every (signal-carrying) entry several
// times. The front is kept sorted as the list is read once: an entry that
// beats the k-th takes its place and sinks to its own, which for a
// preselection's hundred candidates and seven picks compares about 170
// times where picking the best of the rest k times compared 700. A long
// top is sorted in full.
func topScored(list []scored, k int, c *Catalog) {
	if k >= len(list) || k > 16 {
		sortScored(list, c)
		return
	}
	if k <= 0 {
		return
	}
	for j := 1; j < len(list); j++ {
		i := j
		if j >= k {
			if !scoredBefore(&list[j], &list[k-1], c) {
				continue
			}
			list[j], list[k-1] = list[k-1], list[j]
			i = k - 1
		}
		for ; i > 0 && scoredBefore(&list[i], &list[i-1], c); i-- {
			list[i], list[i-1] = list[i-1], list[i]
		}
	}
}

// scoredBefore reports whether a ranks before b in sortScored's order.
func scoredBefore(a, b *scored, c *Catalog) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return c.tools[a.doc].Name < c.tools[b.doc].Name
}

// lexLead returns the lexical winner and its margin over the runner-up
// (0 on a tie or without candidates; -1 as the winner when there is none).
func lexLead(lex lexScores) (int32, float64) {
	top, best, second := int32(-1), 0.0, 0.0
	for i, d := range lex.order {
		switch v := lex.score[i]; {
		case v > best:
			second = best
			top, best = d, v
		case v == best:
			second = v
			if d < top {
				top = d
			}
		case v > second:
			second = v
		}
	}
	if best <= 0 {
		return -1, 0
	}
	return top, 1 - second/best
}

// docScore is a document and its score in one signal.
type docScore struct {
	doc   int32
	score float64
}

// rankScored writes each document's 1-based rank by descending score (ties
// by document) into ranks, one slot per tool, and returns the documents in
// rank order: the caller zeroes their slots after use. scores[i] is
// docs[i]'s; docs are distinct.
func rankScored(docs []int32, scores []float64, ranks []int32) []int32 {
	var buf [keyedStack]docScore
	list := buf[:0]
	if len(docs) > keyedStack {
		list = make([]docScore, 0, len(docs))
	}
	// A single search's hits come ranked already: checked as they are
	// copied, they skip the sort.
	sorted := true
	for i, d := range docs {
		e := docScore{d, scores[i]}
		if i > 0 && sorted && byRank(list[i-1], e) > 0 {
			sorted = false
		}
		list = append(list, e)
	}
	if !sorted {
		sortByRank(list)
	}
	return writeRanks(list, ranks)
}

// writeRanks returns list's documents in order and writes their 1-based
// ranks into ranks.
func writeRanks(list []docScore, ranks []int32) []int32 {
	docs := make([]int32, len(list))
	for i, e := range list {
		docs[i] = e.doc
		ranks[e.doc] = int32(i + 1)
	}
	return docs
}
