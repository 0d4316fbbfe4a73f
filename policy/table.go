package policy

// Table holds a catalog's decisions, made once per tool for both answers to
// the write-intent question. A request then decides its tools by lookup
// instead of matching every name against the deny, allow, core and risk
// patterns again, which costs a tenth of a new turn's CPU at 200 tools. It
// is immutable and bound to the snapshot that made it: a reloaded policy
// has a new generation, so callers key tables by catalog and generation.
type Table struct {
	byName map[string]int
	names  []string // the names the table was made for, by position
	// decided[0] without write intent, decided[1] with it; by tool position.
	decided [2][]Decision
	core    [2][]string // Core tools, in catalog order
	// hidden lists, for each write intent, the positions whose tool the
	// policy hides (a repeated name at each of its positions, as the
	// client sent it), so a record of what a request hid reads a list
	// instead of deciding every name again.
	hidden [2][]int32
	// gated is true when write intent changes some decision, so a request
	// needs the intent pattern run on its message only then.
	gated bool
	snap  *Snapshot
}

// Table decides every name of a catalog (the client's tools, in order; a
// repeated name keeps its first position). It keeps names: pass strings
// that alias nothing short-lived.
func (s *Snapshot) Table(names []string) *Table {
	t := &Table{byName: make(map[string]int, len(names)), names: names, snap: s}
	for i := range t.decided {
		t.decided[i] = make([]Decision, len(names))
	}
	no, yes := func() bool { return false }, func() bool { return true }
	for i, n := range names {
		first, dup := t.byName[n]
		if !dup {
			first = i
			t.byName[n] = i
			t.decided[0][i], t.decided[1][i] = s.decide(n, no), s.decide(n, yes)
			for k := range t.decided {
				if t.decided[k][i].Core {
					t.core[k] = append(t.core[k], n)
				}
			}
			if t.decided[0][i] != t.decided[1][i] {
				t.gated = true
			}
		}
		for k := range t.decided {
			if !t.decided[k][first].Visible {
				t.hidden[k] = append(t.hidden[k], int32(i))
			}
		}
	}
	return t
}

// InOrder returns the table of the same tools in another order, names
// (a client that builds its tools array by map iteration sends a new
// order every turn): each tool's decisions are the table's, looked up by
// name instead of made again, and what speaks in positions or in the
// catalog's order (Position, At, Hidden, Core) follows names. It keeps
// the table's own copies of the names, none of names'. ok is false when
// names are not the table's tools in some order: then make a Table.
func (t *Table) InOrder(names []string) (*Table, bool) {
	if len(names) != len(t.names) {
		return nil, false
	}
	o := &Table{byName: make(map[string]int, len(t.byName)), names: make([]string, len(names)), gated: t.gated, snap: t.snap}
	for k := range o.decided {
		o.decided[k] = make([]Decision, len(names))
	}
	for i, n := range names {
		j, ok := t.byName[n]
		if !ok {
			return nil, false
		}
		o.names[i] = t.names[j]
		first, dup := o.byName[n]
		if !dup {
			first = i
			o.byName[o.names[i]] = i
			for k := range o.decided {
				o.decided[k][i] = t.decided[k][j]
				if o.decided[k][i].Core {
					o.core[k] = append(o.core[k], o.names[i])
				}
			}
		}
		for k := range o.decided {
			if !o.decided[k][first].Visible {
				o.hidden[k] = append(o.hidden[k], int32(i))
			}
		}
	}
	if len(o.byName) != len(t.byName) {
		return nil, false // a name repeated where the table has another
	}
	return o, true
}

// For binds the table to one user message. Its Decide answers like
// Snapshot.Decide for that message; names outside the catalog are decided
// by the snapshot.
func (t *Table) For(userText string) Bound {
	b := Bound{t: t, text: userText}
	if t.gated && t.snap.WriteIntent(userText) {
		b.k = 1
	}
	return b
}

// Bound is a Table bound to one user message's write intent.
type Bound struct {
	t    *Table
	k    int
	text string
}

// Decide returns name's decision for the bound message.
func (b Bound) Decide(name string) Decision {
	if i, ok := b.t.byName[name]; ok {
		return b.t.decided[b.k][i]
	}
	return b.t.snap.Decide(name, b.text)
}

// Hidden returns the positions of the catalog's tools the bound message
// does not see, in catalog order. It is shared: callers must not modify it.
func (b Bound) Hidden() []int32 { return b.t.hidden[b.k] }

// At returns the name at position i of the catalog and its decision for
// the bound message.
func (b Bound) At(i int32) (string, Decision) {
	n := b.t.names[i]
	return n, b.t.decided[b.k][b.t.byName[n]]
}

// Intent reports which of the table's two decision sets the bound message
// uses: true for the one with write intent (Table.Shown).
func (b Bound) Intent() bool { return b.k == 1 }

// Shown reports whether name is one of the catalog's tools and visible to
// a message with the given write intent, for callers that keep the answer
// for every tool by their own positions.
func (t *Table) Shown(name string, intent bool) bool {
	b := Bound{t: t}
	if intent {
		b.k = 1
	}
	return b.Visible(name)
}

// Visible reports whether name is one of the catalog's tools and shown for
// the bound message: Position and Decide in one lookup.
func (b Bound) Visible(name string) bool {
	_, ok := b.VisibleName(name)
	return ok
}

// Position returns where name stands in the catalog the table was made
// for, so a caller needs no index of its own.
func (b Bound) Position(name string) (int, bool) {
	i, ok := b.t.byName[name]
	return i, ok
}

// VisibleName is Visible that also returns the table's own copy of name
// (see Own), in one lookup.
func (b Bound) VisibleName(name string) (string, bool) {
	i, ok := b.t.byName[name]
	if !ok || !b.t.decided[b.k][i].Visible {
		return "", false
	}
	return b.t.names[i], true
}

// Own returns the table's own copy of name, one of the catalog's tools:
// the caller may keep it where the name it holds may alias a request
// body (the table keeps the strings it was made with).
func (b Bound) Own(name string) (string, bool) {
	i, ok := b.t.byName[name]
	if !ok {
		return "", false
	}
	return b.t.names[i], true
}

// Core lists the catalog's core tools for the bound message, in catalog
// order. It is shared: callers must not modify it.
func (b Bound) Core() []string { return b.t.core[b.k] }
