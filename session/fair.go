package session

import (
	"cmp"
	"container/heap"
	"slices"
	"strings"
	"time"
)

// fairLRU holds at most size sessions, each until ttl after its last
// write. When it is full, the session a new one replaces is the least
// recently used of the tenant holding the most (of tenants holding as
// many, the one whose least recently used session is the oldest): a
// tenant that opens thousands of sessions pushes out its own, never those
// of a tenant holding fewer. With one tenant, or tenants of one session
// each (per-user keys), it is a plain LRU. It is not safe for concurrent use;
// Memory locks around it.
//
// It is built here rather than on golang-lru: expirable.LRU is one list
// for every tenant and starts a goroutine that never exits, so one per
// tenant is out; simplelru keeps no expiry, and pairing it with an expiry
// list would cost a second allocation per session; golang-lru's list that
// carries an expiry is internal. An entry here sits on two lists at once
// (its tenant's, by use; everyone's, by write), and costs one allocation.
type fairLRU struct {
	size int
	ttl  time.Duration

	items   map[string]*entry
	tenants map[string]*tenant
	// largest orders the tenants by the sessions they hold, the most
	// first: eviction's pick, in O(log tenants).
	largest tenantHeap
	// written lists every entry, least recently written first. The ttl
	// is one for all, so that is also the order they expire in, and
	// expire drops the expired ones from its front without a scan, or
	// a goroutine.
	written chain
	// clock counts uses (gets and writes); an entry's used is the count
	// at its last use, so Keys can order every tenant's entries as one
	// LRU would.
	clock uint64
}

// entry is one session.
type entry struct {
	key     string
	state   State // the store's copy, never changed in place: a put replaces it
	expires time.Time
	used    uint64
	tenant  *tenant
	// links holds the entry's place on its tenant's chain (byUse) and
	// on the store's (byWrite).
	links [2]link
}

type link struct{ prev, next *entry }

// tenant is one tenant's share of the store.
type tenant struct {
	name string
	used chain // its entries, least recently used first
	n    int   // len of used
	at   int   // index in fairLRU.largest
}

func newFairLRU(size int, ttl time.Duration) fairLRU {
	return fairLRU{
		size:    size,
		ttl:     ttl,
		items:   make(map[string]*entry),
		tenants: make(map[string]*tenant),
		written: chain{by: byWrite},
	}
}

// tenantOf returns the tenant of a store key: the label Key puts before
// the key's kind. Keys not of Key's making (a test's, a caller's own)
// are all one tenant, "", so among them eviction is plain LRU.
func tenantOf(key string) string {
	if IsKey(key) {
		return key[:tenantLen]
	}
	return ""
}

// expire drops the entries expired at now.
func (l *fairLRU) expire(now time.Time) {
	for e := l.written.front; e != nil && now.After(e.expires); e = l.written.front {
		l.remove(e)
	}
}

// get returns the state under key and marks it used; it does not renew
// its expiry.
func (l *fairLRU) get(key string, now time.Time) (State, bool) {
	l.expire(now)
	e, ok := l.items[key]
	if !ok {
		return State{}, false
	}
	l.clock++
	e.used = l.clock
	l.touch(e)
	return e.state, true
}

// touch moves e, just used, to the back of its tenant's chain; when it
// was the front, the tenant's oldest use changed, which orders ties in
// the heap.
func (l *fairLRU) touch(e *entry) {
	t := e.tenant
	front := t.used.front == e
	t.used.moveToBack(e)
	if front {
		heap.Fix(&l.largest, t.at)
	}
}

// peek returns the state under key without marking it used.
func (l *fairLRU) peek(key string, now time.Time) (State, bool) {
	l.expire(now)
	e, ok := l.items[key]
	if !ok {
		return State{}, false
	}
	return e.state, true
}

// put stores s under key, used and written now, evicting a session first
// when the store is full and key is new. s becomes the store's: the
// caller must not change it.
func (l *fairLRU) put(key string, s State, now time.Time) {
	l.expire(now)
	l.clock++
	if e, ok := l.items[key]; ok {
		e.state, e.expires, e.used = s, now.Add(l.ttl), l.clock
		l.touch(e)
		l.written.moveToBack(e)
		return
	}
	name := tenantOf(key)
	if len(l.items) >= l.size {
		l.evict()
	}
	t, ok := l.tenants[name]
	if !ok {
		// The label is a slice of key: a copy does not keep the key alive
		// for as long as the tenant holds sessions.
		t = &tenant{name: strings.Clone(name), used: chain{by: byUse}, at: len(l.largest)}
		l.tenants[t.name] = t
		// Holding none, it is in its place as the heap's last leaf.
		l.largest = append(l.largest, t)
	}
	e := &entry{key: key, state: s, expires: now.Add(l.ttl), used: l.clock, tenant: t}
	l.items[key] = e
	t.used.pushBack(e)
	l.written.pushBack(e)
	t.n++
	heap.Fix(&l.largest, t.at)
}

// evict drops the least recently used session of the tenant holding the
// most, the heap's first: of tenants holding as many, the one whose
// least recently used session is the oldest, so that tenants of one
// session each (per-user keys) lose the session idle longest, as one LRU
// of them all would. (Where the tenant asking for room gave up its own
// when tied, a stream of new tenants evicted each other's sessions just
// used and kept the idle ones.)
func (l *fairLRU) evict() {
	if len(l.largest) == 0 {
		return
	}
	l.remove(l.largest[0].used.front)
}

// delete drops key, if held.
func (l *fairLRU) delete(key string, now time.Time) {
	l.expire(now)
	if e, ok := l.items[key]; ok {
		l.remove(e)
	}
}

func (l *fairLRU) remove(e *entry) {
	delete(l.items, e.key)
	l.written.remove(e)
	t := e.tenant
	t.used.remove(e)
	t.n--
	if t.n == 0 {
		heap.Remove(&l.largest, t.at)
		delete(l.tenants, t.name)
		return
	}
	heap.Fix(&l.largest, t.at)
}

// use is a key held and the clock at its last use.
type use struct {
	used uint64
	key  string
}

// held returns the keys held, with their last use, in no order: Keys
// sorts them, outside Memory's lock.
func (l *fairLRU) held(now time.Time) []use {
	l.expire(now)
	us := make([]use, 0, len(l.items))
	for _, e := range l.items {
		us = append(us, use{e.used, e.key})
	}
	return us
}

// oldestFirst returns the keys of us, least recently used first, whatever
// their tenant, as one LRU of them all would list them. It sorts: O(n log
// n), for tests and debugging, not requests.
func oldestFirst(us []use) []string {
	slices.SortFunc(us, func(a, b use) int { return cmp.Compare(a.used, b.used) })
	keys := make([]string, len(us))
	for i, u := range us {
		keys[i] = u.key
	}
	return keys
}

// The chains an entry sits on: an index into entry.links.
const (
	byUse   = 0 // its tenant's, least recently used first
	byWrite = 1 // the store's, least recently written first
)

// chain is a doubly linked list threaded through entries' links[by], so
// an entry joins two chains without an allocation of its own.
type chain struct {
	front, back *entry
	by          int
}

func (c *chain) pushBack(e *entry) {
	e.links[c.by] = link{prev: c.back}
	if c.back != nil {
		c.back.links[c.by].next = e
	} else {
		c.front = e
	}
	c.back = e
}

func (c *chain) remove(e *entry) {
	l := &e.links[c.by]
	if l.prev != nil {
		l.prev.links[c.by].next = l.next
	} else {
		c.front = l.next
	}
	if l.next != nil {
		l.next.links[c.by].prev = l.prev
	} else {
		c.back = l.prev
	}
	*l = link{}
}

func (c *chain) moveToBack(e *entry) {
	if c.back != e {
		c.remove(e)
		c.pushBack(e)
	}
}

// tenantHeap is a max-heap of tenants by the sessions they hold, ties
// going to the tenant whose least recently used session is the oldest,
// for container/heap; each tenant knows its index.
type tenantHeap []*tenant

func (h tenantHeap) Len() int { return len(h) }
func (h tenantHeap) Less(i, j int) bool {
	if h[i].n != h[j].n {
		return h[i].n > h[j].n
	}
	return h[i].used.front.used < h[j].used.front.used
}
func (h tenantHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}

// Push is heap.Interface's; fairLRU appends a new tenant itself.
func (h *tenantHeap) Push(x any) {
	if t, ok := x.(*tenant); ok {
		t.at = len(*h)
		*h = append(*h, t)
	}
}

func (h *tenantHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}
