package selector

import (
	"math/bits"
	"unsafe"
)

// The cache bounds its catalogs by the heap they hold, and what a catalog
// holds grows with its distinct words far more than with its tools
// (BenchmarkCatalogHeld): 2.5 KB a tool for one-line descriptions, 30 KB
// for 300 bytes and five parameters, 120 KB for 4 KB descriptions and 60
// parameters. A catalog counts it: heapBytes estimates, once at
// compile, what compiling left it holding, from the lengths and
// capacities of what it keeps and Go's layout of slices, strings and
// maps (TestCatalogSizeEstimateMatchesTheHeap holds it to the HeapAlloc a
// compile leaves behind), and the memos that searching fills (word rows,
// postings, stems: a few megabytes at most, in as many requests as it
// takes to meet a few thousand distinct words) count their own bytes as
// they fill and let go.

// catalogOverhead is what a catalog holds whatever its tools: its
// analyzer's filters and stop words, the empty memos, the scorch index's
// structures, measured as a one-tool catalog's heap less the parts
// counted below.
const catalogOverhead = 40 << 10

// heldBytes returns the estimated heap c holds now: what compiling left
// and what its memos have filled since, its tools' text included (the
// catalog keeps it alive, whoever else does), the word vectors that all
// catalogs share not.
func (c *Catalog) heldBytes() int64 {
	n := c.compiledBytes + c.memoBytes.Load() + c.orders.bytes.Load() + c.an.stem.heapBytes()
	if c.msWords != nil {
		n += c.msWords.bytes.Load()
	}
	if c.sem != nil {
		if c.sem.rows != nil {
			n += c.sem.rows.rows.bytes.Load()
		}
		if r := c.sem.remote; r != nil {
			if v := r.vecs.Load(); v != nil {
				n += sliceBytes(v.vecs) + int64(len(v.vecs))*roundAlloc(int64(v.dims)*4)
			}
		}
	}
	return n
}

// heapBytes estimates what compiling left c holding, stems aside (they
// are counted as they come).
func (c *Catalog) heapBytes() int64 {
	n := int64(catalogOverhead)
	n += toolsBytes(c.tools)
	n += mapBytes(len(c.byName), sizeOf[string]()+sizeOf[int]())
	n += sliceBytes(c.first)
	for i, s := range c.first {
		if i < len(c.tools) && !inside(s, c.tools[i].Description) {
			n += strBytes(s)
		}
	}
	n += sliceBytes(c.docOf)
	n += c.bleveBytes()
	n += c.fields.heapBytes()
	n += sliceBytes(c.wholes) + mapBytes(len(c.wholeNames), sizeOf[string]()+1)
	for i, s := range c.wholes {
		if i < len(c.tools) && !inside(s, c.tools[i].Name) {
			n += strBytes(s)
		}
	}
	n += mapBytes(len(c.genTerms), sizeOf[string]()+1) + mapBytes(len(c.genWords), sizeOf[string]()+1)
	n += sliceBytes(c.toolRows)
	for _, r := range c.toolRows {
		n += sliceBytes(r)
	}
	if v := c.msVocab; v != nil {
		n += sliceBytes(v.vecs) + sliceBytes(v.rows) + sliceBytes(v.tails) + sliceBytes(v.docs)
		for _, d := range v.docs {
			n += sliceBytes(d)
		}
		n += mapBytes(len(v.ids), 8)
	}
	if f := c.nbr; f != nil {
		n += sliceBytes(f.len) + mapBytes(len(f.post), sizeOf[string]()+sizeOf[[]nbrPosting]())
		for t, p := range f.post {
			n += strBytes(t) + sliceBytes(p)
		}
	}
	if c.sem != nil {
		if vecs := c.sem.vecs.Load(); vecs != nil {
			n += sliceBytes(*vecs)
			for _, v := range *vecs {
				n += sliceBytes(v)
			}
		}
		if r := c.sem.remote; r != nil {
			n += sliceBytes(r.texts)
			for _, s := range r.texts {
				n += strBytes(s)
			}
		}
	}
	return n
}

// bleveBytes is what the catalog's scorch index reports it holds in
// memory: its segment and snapshot.
func (c *Catalog) bleveBytes() int64 {
	if m, ok := c.bleveIdx.(interface{ MemoryUsed() uint64 }); ok {
		return int64(m.MemoryUsed())
	}
	return 0
}

// heapBytes is the postings' share of a catalog: per term its key, entry
// and lists.
func (s *fieldStats) heapBytes() int64 {
	n := mapBytes(len(s.terms), sizeOf[string]()+sizeOf[*termStats]())
	for term, ts := range s.terms {
		n += strBytes(term) + roundAlloc(sizeOf[termStats]()) + sliceBytes(ts.all) + sliceBytes(ts.side)
	}
	return n
}

// heapBytes is the stems remembered now, in the map's slots at their
// peak.
func (s *stemMemo) heapBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return mapBytes(s.peak, sizeOf[string]()+sizeOf[stemEntry]()) + s.text
}

// toolsBytes is tools' structs and text.
func toolsBytes(tools []Tool) int64 {
	n := sliceBytes(tools)
	for i := range tools {
		t := &tools[i]
		n += strBytes(t.Name) + strBytes(t.Description) + sliceBytes(t.Params)
		for _, p := range t.Params {
			n += strBytes(p.Name) + strBytes(p.Description)
		}
		m := &t.Meta
		n += strBytes(m.Title) + strBytes(m.Category) + strBytes(m.Entity) + strBytes(m.Risk) + strBytes(m.Hint)
		for _, l := range [...][]string{m.Keywords, m.Examples, m.Related, m.AvoidWhen} {
			n += sliceBytes(l)
			for _, s := range l {
				n += strBytes(s)
			}
		}
	}
	return n
}

func sizeOf[T any]() int64 {
	var v T
	return int64(unsafe.Sizeof(v))
}

// sliceBytes is the backing array of s, by its capacity.
func sliceBytes[T any](s []T) int64 { return roundAlloc(int64(cap(s)) * sizeOf[T]()) }

// strBytes is a string's bytes as allocated.
func strBytes(s string) int64 { return roundAlloc(int64(len(s))) }

// inside reports whether s was cut from base (or is base): then it holds
// no memory of its own.
func inside(s, base string) bool {
	if len(s) == 0 {
		return true
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(base)))
	return len(base) > 0 && p >= lo && p < lo+uintptr(len(base))
}

// roundAlloc rounds an allocation of n bytes up as Go's allocator does,
// roughly: to 8 bytes below 32, 16 below 256, then to an eighth.
func roundAlloc(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n < 32:
		return (n + 7) &^ 7
	case n < 256:
		return (n + 15) &^ 15
	}
	step := int64(1) << (bits.Len64(uint64(n)) - 3)
	return (n + step - 1) &^ (step - 1)
}

// mapBytes is a map of entries entries of slot bytes each (key and
// value), as Go's swiss tables lay it out: groups of eight slots and a
// control word, at most 7/8 full, the slots doubling as it grows.
func mapBytes(entries int, slot int64) int64 {
	if entries == 0 {
		return 0
	}
	slots := max(int64(8), int64(1)<<bits.Len64(uint64((entries*8+6)/7-1)))
	return slots * (slot + 1)
}
