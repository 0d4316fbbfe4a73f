package session

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// check fails t when l's lists, counts and heap disagree.
func (l *fairLRU) check(t *testing.T) {
	t.Helper()
	if len(l.items) > l.size {
		t.Fatalf("%d items, over the bound of %d", len(l.items), l.size)
	}
	total := 0
	for i, tn := range l.largest {
		if tn.at != i {
			t.Fatalf("tenant %q at %d thinks it is at %d", tn.name, i, tn.at)
		}
		if i > 0 && l.largest.Less(i, (i-1)/2) {
			t.Fatalf("heap out of order at %d", i)
		}
		if l.tenants[tn.name] != tn || tn.n == 0 {
			t.Fatalf("tenant %q in the heap holds %d, map has %p", tn.name, tn.n, l.tenants[tn.name])
		}
		n := 0
		var prev *entry
		for e := tn.used.front; e != nil; e = e.links[byUse].next {
			if e.tenant != tn || l.items[e.key] != e || e.links[byUse].prev != prev || prev != nil && prev.used >= e.used {
				t.Fatalf("tenant %q's chain is broken at %q", tn.name, e.key)
			}
			prev, n = e, n+1
		}
		if n != tn.n || tn.used.back != prev {
			t.Fatalf("tenant %q counts %d, chains %d", tn.name, tn.n, n)
		}
		total += n
	}
	if len(l.tenants) != len(l.largest) || total != len(l.items) {
		t.Fatalf("%d tenants in the map, %d in the heap; %d chained of %d items", len(l.tenants), len(l.largest), total, len(l.items))
	}
	n := 0
	var prev *entry
	for e := l.written.front; e != nil; e = e.links[byWrite].next {
		if e.links[byWrite].prev != prev || prev != nil && e.expires.Before(prev.expires) {
			t.Fatalf("the write chain is out of order at %q", e.key)
		}
		prev, n = e, n+1
	}
	if n != len(l.items) || l.written.back != prev {
		t.Fatalf("%d written, %d items", n, len(l.items))
	}
}

// TestFairLRUEvictsOnlyFromALargestTenant drives random operations of
// tenants of very different appetites, and checks after each one the
// structure's invariants and, on each eviction, that it took the least
// recently used session of a tenant holding the most (of those, the one
// whose least recently used session is the oldest).
func TestFairLRUEvictsOnlyFromALargestTenant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		tenants int
	}{
		{"one tenant", 8, 1},
		{"two tenants in a store of one", 1, 2},
		{"three tenants in a store of ten", 10, 3},
		{"forty tenants in a store of sixty-four", 64, 40},
	} {
		t.Run(tc.name+": every eviction takes a largest tenant's least recently used", func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.size)))
			l := newFairLRU(tc.size, time.Hour)
			now := time.Unix(0, 0)
			for i := range 20000 {
				// Skewed: tenant j asks less often than tenant j-1.
				ten := fmt.Sprintf("t%d", min(rng.IntN(tc.tenants), rng.IntN(tc.tenants)))
				key := tenantKey(ten, rng.IntN(3*tc.size))
				switch rng.IntN(10) {
				case 0:
					l.delete(key, now)
				case 1, 2, 3:
					l.get(key, now)
				default:
					_, held := l.items[key]
					full := len(l.items) == l.size
					counts := map[string]int{}
					oldest := map[string]string{}
					oldestUse := map[string]uint64{}
					most := 0
					for _, tn := range l.largest {
						counts[tn.name], oldest[tn.name], oldestUse[tn.name] = tn.n, tn.used.front.key, tn.used.front.used
						most = max(most, tn.n)
					}
					before := make(map[string]bool, len(l.items))
					for k := range l.items {
						before[k] = true
					}
					l.put(key, State{}, now)
					if held || !full {
						if len(l.items) != len(before)+map[bool]int{true: 0, false: 1}[held] {
							t.Fatalf("op %d: %d items after a put into %d, not full", i, len(l.items), len(before))
						}
						break
					}
					var gone []string
					for k := range before {
						if _, ok := l.items[k]; !ok {
							gone = append(gone, k)
						}
					}
					if len(gone) != 1 {
						t.Fatalf("op %d: a put into a full store evicted %q", i, gone)
					}
					victim := tenantOf(gone[0])
					switch {
					case oldest[victim] != gone[0]:
						t.Fatalf("op %d: evicted %q, not its tenant's least recently used %q", i, gone[0], oldest[victim])
					case counts[victim] != most:
						t.Fatalf("op %d: evicted from a tenant holding %d, where one held %d", i, counts[victim], most)
					}
					for name, n := range counts {
						if n == most && oldestUse[name] < oldestUse[victim] {
							t.Fatalf("op %d: evicted from %q, where %q, holding as many, has a session idle longer", i, victim, name)
						}
					}
				}
				l.check(t)
			}
		})
	}
}

func TestFairLRUExpiresByLastWrite(t *testing.T) {
	const ttl = time.Minute
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		at   time.Duration // when the store is read, after t0
		want []string      // keys held then
	}{
		{"before any ttl has passed everything is held", 59 * time.Second, []string{"a", "b", "c"}},
		{"at exactly the ttl a session is still held", time.Minute, []string{"a", "b", "c"}},
		{"past the ttl of the sessions not written since, they are gone, gets or not", 61 * time.Second, []string{"b"}},
		{"past the ttl of the rewritten one, all are gone", 91 * time.Second, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newFairLRU(10, ttl)
			l.put(tenantKey("x", 1), State{}, t0) // a
			l.put(tenantKey("y", 1), State{}, t0) // b
			l.put(tenantKey("x", 2), State{}, t0) // c
			l.get(tenantKey("x", 1), t0.Add(30*time.Second))
			l.put(tenantKey("y", 1), State{}, t0.Add(30*time.Second))
			var want []string
			for _, k := range tc.want {
				want = append(want, map[string]string{"a": tenantKey("x", 1), "b": tenantKey("y", 1), "c": tenantKey("x", 2)}[k])
			}
			keys := oldestFirst(l.held(t0.Add(tc.at)))
			if !slices.Equal(slices.Sorted(slices.Values(keys)), slices.Sorted(slices.Values(want))) {
				t.Errorf("keys %q, want %q", keys, want)
			}
			l.check(t)
		})
	}
}
