package selector

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A client that builds its tools array from map iteration sends the same
// tools in a new order every turn. The catalog ranks in name order
// whatever the order (canonical.go), so one compiled core serves them all;
// only the positions the caller speaks in (Names, Position, Query.Skip)
// are the order's own, 4 bytes a tool. InOrder lays them out for another
// order and remembers the last few orders asked for, so a caller that
// asks for the same order every turn pays a lookup, and one with a new
// order every turn a map lookup per tool and no compile.

// maxOrders is how many orders of its tools a catalog remembers besides
// the one it was compiled in: a client that alternates between a few
// orders finds each; one with a new order every turn replaces the oldest,
// so what a catalog holds for orders stays bounded.
const maxOrders = 8

// ErrNotTheCatalog is returned by InOrder when the names are not an
// order of the catalog's tools: one is missing, or named twice.
var ErrNotTheCatalog = errors.New("the names are not an order of the catalog's tools")

// orderViews are the orders a catalog remembers (InOrder). Lookups read
// an immutable list without a lock; adds copy it under one.
type orderViews struct {
	mu   sync.Mutex
	list atomic.Pointer[[]orderView] // newest first
	// bytes is the heap the remembered orders hold (heldBytes): their
	// Catalog structs and positions, none for the compiled order's own.
	bytes atomic.Int64
}

// orderView is one remembered order: its caller's key and the Catalog
// that speaks in it.
type orderView struct {
	key   uint64
	cat   *Catalog
	bytes int64
}

// InOrder returns the catalog speaking in another order of its tools:
// Names, Position and Query.Skip in the positions of names, everything
// else (the index, its memos, the rankings, to the last bit) shared with
// c. names lists the tools in that order; a name the catalog does not
// hold is passed over, as the tools its policy left out are (the
// positions are those of the tools Compile would have been given), and
// a tool of the catalog missing, or named twice, is ErrNotTheCatalog.
//
// key identifies the order: the catalog remembers the last few orders
// asked for by key and returns the same *Catalog for a key it
// remembers, without reading names. It does not check that they are
// the same names: equal keys must mean equal orders. The order the
// catalog was compiled in returns the catalog itself.
func (c *Catalog) InOrder(key uint64, names iter.Seq[string]) (*Catalog, error) {
	if list := c.orders.list.Load(); list != nil {
		for _, v := range *list {
			if v.key == key {
				return v.cat, nil
			}
		}
	}
	pos, err := c.positionsOf(names)
	if err != nil {
		return nil, err
	}
	view, size := c, int64(0)
	if !slices.Equal(pos, c.pos) {
		view = &Catalog{catalogCore: c.catalogCore, pos: pos}
		size = roundAlloc(sizeOf[Catalog]()) + sliceBytes(pos)
	}
	return c.orders.remember(orderView{key: key, cat: view, bytes: size}), nil
}

// positionsOf returns, for each of the catalog's documents, its position
// among names, passing over names the catalog does not hold.
func (c *catalogCore) positionsOf(names iter.Seq[string]) ([]int32, error) {
	pos := make([]int32, len(c.tools))
	for d := range pos {
		pos[d] = -1
	}
	next := int32(0)
	for name := range names {
		d, ok := c.byName[name]
		if !ok {
			continue
		}
		if pos[d] >= 0 {
			return nil, fmt.Errorf("%w: %q is named twice", ErrNotTheCatalog, name)
		}
		pos[d] = next
		next++
	}
	if int(next) != len(pos) {
		return nil, fmt.Errorf("%w: %d of its %d tools are not named", ErrNotTheCatalog, len(pos)-int(next), len(pos))
	}
	return pos, nil
}

// remember adds v as the newest order, letting the oldest go past
// maxOrders, and returns the Catalog remembered under v's key: another
// caller's, when one added the key first.
func (o *orderViews) remember(v orderView) *Catalog {
	o.mu.Lock()
	defer o.mu.Unlock()
	var old []orderView
	if p := o.list.Load(); p != nil {
		old = *p
	}
	for _, w := range old {
		if w.key == v.key {
			return w.cat
		}
	}
	list := make([]orderView, 0, min(len(old)+1, maxOrders))
	list = append(list, v)
	delta := v.bytes
	for _, w := range old {
		if len(list) == maxOrders {
			delta -= w.bytes
			continue
		}
		list = append(list, w)
	}
	o.list.Store(&list)
	o.bytes.Add(delta + listBytes(len(list)) - listBytes(len(old)))
	return v.cat
}

// listBytes is what a list of n remembered orders holds itself.
func listBytes(n int) int64 {
	if n == 0 {
		return 0
	}
	return roundAlloc(int64(n) * int64(unsafe.Sizeof(orderView{})))
}
