package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestMemoryEvictsTheLargestTenantsSessions(t *testing.T) {
	ctx := context.Background()
	st := State{Active: []string{"repo_get_issue"}}
	put := func(t *testing.T, m *Memory, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if err := m.Put(ctx, k, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	keysOf := func(tenant string, from, to int) []string {
		var keys []string
		for i := from; i < to; i++ {
			keys = append(keys, tenantKey(tenant, i))
		}
		return keys
	}
	for _, tc := range []struct {
		name string
		size int
		// fill runs first, then flood; kept must all be held after.
		fill, flood []string
		kept        []string
		gone        []string
	}{
		{
			name:  "a tenant opening 10,000 sessions evicts none of a quiet tenant's 5",
			size:  10000,
			fill:  keysOf("quiet", 0, 5),
			flood: keysOf("noisy", 0, 10000),
			kept:  append(keysOf("quiet", 0, 5), keysOf("noisy", 5, 10000)...),
			gone:  keysOf("noisy", 0, 5),
		},
		{
			name:  "a tenant opening 10,000 sessions evicts none of a quiet tenant's 499",
			size:  1000,
			fill:  keysOf("quiet", 0, 499),
			flood: keysOf("noisy", 0, 10000),
			kept:  append(keysOf("quiet", 0, 499), keysOf("noisy", 9499, 10000)...),
			gone:  keysOf("noisy", 0, 9499),
		},
		{
			name:  "a tenant opening 10,000 sessions beside a quiet one holding half the store evicts only the quiet one's idle longest, once they are level",
			size:  1000,
			fill:  keysOf("quiet", 0, 500),
			flood: keysOf("noisy", 0, 10000),
			kept:  append(keysOf("quiet", 1, 500), keysOf("noisy", 9499, 10000)...),
			gone:  append(keysOf("quiet", 0, 1), keysOf("noisy", 0, 9499)...),
		},
		{
			name:  "a new tenant's session takes the place of the largest tenant's least recently used one",
			size:  10,
			fill:  append(keysOf("b", 0, 4), keysOf("a", 0, 6)...),
			flood: keysOf("c", 0, 1),
			kept:  append(append(keysOf("a", 1, 6), keysOf("b", 0, 4)...), keysOf("c", 0, 1)...),
			gone:  keysOf("a", 0, 1),
		},
		{
			name:  "of tenants holding as many, the one whose session is idle longest gives it up, whoever asks for room",
			size:  4,
			fill:  append(keysOf("a", 0, 2), keysOf("b", 0, 2)...),
			flood: keysOf("b", 2, 3),
			kept:  append(keysOf("a", 1, 2), keysOf("b", 0, 3)...),
			gone:  keysOf("a", 0, 1),
		},
		{
			name:  "a tenant above its share loses sessions to a tenant below it until they are level, then the session idle longest goes",
			size:  6,
			fill:  keysOf("a", 0, 6),
			flood: keysOf("b", 0, 5),
			kept:  append(keysOf("a", 4, 6), keysOf("b", 1, 5)...),
			gone:  append(keysOf("a", 0, 4), keysOf("b", 0, 1)...),
		},
		{
			name:  "keys not of Key's making are one tenant among the others",
			size:  4,
			fill:  []string{tenantKey("a", 0), "x1", "x2", "x3"},
			flood: []string{"x4"},
			kept:  []string{tenantKey("a", 0), "x2", "x3", "x4"},
			gone:  []string{"x1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(tc.size, time.Hour)
			put(t, m, tc.fill...)
			for _, k := range tc.flood {
				put(t, m, k)
				if n := m.Len(); n > tc.size {
					t.Fatalf("%d sessions held, over the bound of %d", n, tc.size)
				}
			}
			var lost []string
			for _, k := range tc.kept {
				if _, err := m.Get(ctx, k); err != nil {
					lost = append(lost, k)
				}
			}
			if len(lost) > 0 {
				t.Errorf("%d of %d sessions that should stay are gone, first %q", len(lost), len(tc.kept), lost[0])
			}
			var held []string
			for _, k := range tc.gone {
				if _, err := m.Get(ctx, k); !errors.Is(err, ErrNotFound) {
					held = append(held, k)
				}
			}
			if len(held) > 0 {
				t.Errorf("%d of %d sessions that should be evicted are held, first %q", len(held), len(tc.gone), held[0])
			}
			if got, want := m.Len(), len(tc.kept); got != want {
				t.Errorf("Len = %d, want %d", got, want)
			}
		})
	}
}

// TestMemoryTenantsOfOneSessionEachArePlainLRU: with per-user keys, most
// tenants hold a session or two, all tied for the most: the session that
// goes must be the one idle longest, as one LRU of them all would pick,
// not whichever tied tenant the heap holds first (which evicted the
// sessions just used and kept the idle ones).
func TestMemoryTenantsOfOneSessionEachArePlainLRU(t *testing.T) {
	ctx := context.Background()
	key := func(i int) string { return tenantKey(fmt.Sprint("user", i), 0) }
	t.Run("a session just used stays while tied tenants' idle ones go", func(t *testing.T) {
		m := NewMemory(3, time.Hour)
		for i := range 3 {
			if err := m.Put(ctx, key(i), State{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.Get(ctx, key(0)); err != nil {
			t.Fatal(err)
		}
		for i := 3; i < 5; i++ {
			if err := m.Put(ctx, key(i), State{}); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := m.Keys(), []string{key(0), key(3), key(4)}; !slices.Equal(got, want) {
			t.Errorf("held %q, want %q: users 1 and 2, idle longest, go", got, want)
		}
	})
	t.Run("a stream of new users, each using its session, keeps the new ones", func(t *testing.T) {
		const size = 1000
		m := NewMemory(size, time.Hour)
		for i := range size {
			if err := m.Put(ctx, key(i), State{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := size; i < 2*size; i++ {
			if err := m.Put(ctx, key(i), State{}); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Get(ctx, key(i)); err != nil {
				t.Fatalf("user %d's session, just put, is gone", i)
			}
		}
		for i := range 2 * size {
			_, err := m.Get(ctx, key(i))
			if held := err == nil; held != (i >= size) {
				t.Fatalf("user %d: held = %v, want %v", i, held, i >= size)
			}
		}
	})
}

func TestMemoryWithOneTenantIsAPlainLRU(t *testing.T) {
	ctx := context.Background()
	for _, keyOf := range []struct {
		name string
		key  func(string) string
	}{
		{"keys of one tenant", func(id string) string { return Key(Tenant("only"), id, "", "", "") }},
		{"keys not of Key's making", func(id string) string { return id }},
	} {
		for _, tc := range []struct {
			name string
			ops  []string // "put x", "get x", "del x"
			want []string // Keys, oldest first
		}{
			{"the oldest put goes first", []string{"put a", "put b", "put c", "put d"}, []string{"b", "c", "d"}},
			{"a get makes a session the most recently used", []string{"put a", "put b", "put c", "get a", "put d"}, []string{"c", "a", "d"}},
			{"a put of a held key makes it the most recently used and evicts nothing", []string{"put a", "put b", "put c", "put a", "put d"}, []string{"c", "a", "d"}},
			{"a get of a missing key changes nothing", []string{"put a", "put b", "get z", "put c", "put d"}, []string{"b", "c", "d"}},
			{"a deleted key makes room without an eviction", []string{"put a", "put b", "put c", "del b", "put d"}, []string{"a", "c", "d"}},
			{"evictions follow each use", []string{"put a", "put b", "put c", "get a", "put d", "get c", "put e", "put f"}, []string{"c", "e", "f"}},
		} {
			t.Run(keyOf.name+": "+tc.name, func(t *testing.T) {
				m := NewMemory(3, time.Hour)
				st := State{Active: []string{"fs_read_file"}}
				for _, op := range tc.ops {
					k := keyOf.key(op[4:])
					switch op[:3] {
					case "put":
						if err := m.Put(ctx, k, st); err != nil {
							t.Fatal(err)
						}
					case "get":
						_, _ = m.Get(ctx, k)
					case "del":
						if err := m.Delete(ctx, k); err != nil {
							t.Fatal(err)
						}
					}
				}
				var want []string
				for _, id := range tc.want {
					want = append(want, keyOf.key(id))
				}
				if got := m.Keys(); !slices.Equal(got, want) {
					t.Errorf("keys %q, want %q", got, want)
				}
				if m.Len() != len(want) {
					t.Errorf("Len = %d, want %d", m.Len(), len(want))
				}
			})
		}
	}
}

func TestMemoryExpiresASessionTTLAfterItsLastWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Real time, with margins of 200 ms or more: the test uses only what
	// Memory exports.
	const ttl = time.Second
	m := NewMemory(10, ttl)
	st := State{Active: []string{"fs_read_file"}}
	a, b := tenantKey("a", 1), tenantKey("b", 1)
	for _, k := range []string{a, b} {
		if err := m.Put(ctx, k, st); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(ttl / 2)
	if err := m.PutMerged(ctx, a, State{}, st, 4); err != nil { // renews a
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, b); err != nil { // does not renew b
		t.Fatal(err)
	}
	time.Sleep(ttl/2 + 300*time.Millisecond)
	t.Run("a session whose ttl has passed since its last write is gone", func(t *testing.T) {
		if _, err := m.Get(ctx, b); !errors.Is(err, ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("a session written again since is held", func(t *testing.T) {
		if _, err := m.Get(ctx, a); err != nil {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("Len and Keys count only the sessions held", func(t *testing.T) {
		if n, keys := m.Len(), m.Keys(); n != 1 || !slices.Equal(keys, []string{a}) {
			t.Errorf("Len %d, Keys %q, want 1 and only %q", n, keys, a)
		}
	})
	time.Sleep(ttl / 2)
	t.Run("the renewed session expires ttl after its renewal", func(t *testing.T) {
		if _, err := m.Get(ctx, a); !errors.Is(err, ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
		if n, keys := m.Len(), m.Keys(); n != 0 || len(keys) != 0 {
			t.Errorf("Len %d, Keys %q, want none", n, keys)
		}
	})
}

func TestMemoryLenAndKeysAgree(t *testing.T) {
	ctx := context.Background()
	st := State{Active: []string{"fs_read_file"}}
	m := NewMemory(5, time.Hour)
	a1, a2, a3, b1, b2 := tenantKey("a", 1), tenantKey("a", 2), tenantKey("a", 3), tenantKey("b", 1), tenantKey("b", 2)
	for _, k := range []string{a1, b1, a2, b2} {
		if err := m.Put(ctx, k, st); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Get(ctx, a1); err != nil {
		t.Fatal(err)
	}
	t.Run("keys are oldest first across tenants", func(t *testing.T) {
		if got, want := m.Keys(), []string{b1, a2, b2, a1}; !slices.Equal(got, want) {
			t.Errorf("keys %q, want %q", got, want)
		}
	})
	for _, k := range []string{a3, tenantKey("c", 1), tenantKey("c", 2)} {
		if err := m.Put(ctx, k, st); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("after evictions, Len counts the keys Keys lists, each held once", func(t *testing.T) {
		keys := m.Keys()
		if m.Len() != len(keys) || len(keys) != 5 {
			t.Fatalf("Len %d, %d keys, want 5 of each", m.Len(), len(keys))
		}
		if len(slices.Compact(slices.Sorted(slices.Values(keys)))) != len(keys) {
			t.Errorf("keys listed twice: %q", keys)
		}
		for _, k := range keys {
			if _, err := m.Get(ctx, k); err != nil {
				t.Errorf("Keys lists %q, which Get does not find: %v", k, err)
			}
		}
	})
	t.Run("the tenant that held the most lost its least recently used", func(t *testing.T) {
		// a held 3 of 5 when c's first came, so a2, a's least recently
		// used (a1 was got since), went; when c's second came a and b
		// held 2 each, and either may give one.
		for _, k := range []string{a3, tenantKey("c", 1), tenantKey("c", 2)} {
			if _, err := m.Get(ctx, k); err != nil {
				t.Errorf("%q, put last, is gone: %v", k, err)
			}
		}
		if _, err := m.Get(ctx, a2); !errors.Is(err, ErrNotFound) {
			t.Errorf("a's least recently used is held: %v", err)
		}
	})
}

func TestMemoryIsSafeUnderConcurrentUseByManyTenants(t *testing.T) {
	ctx := context.Background()
	const size = 50
	// A short ttl, so sessions expire while the others work.
	m := NewMemory(size, 20*time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := tenantKey(fmt.Sprintf("t%d", g%4), i%40)
				switch i % 7 {
				case 0:
					_ = m.Delete(ctx, k)
				case 1:
					_ = m.PutMerged(ctx, k, State{}, State{Active: []string{fmt.Sprint("tool_", i)}}, 4)
				case 2:
					if n := m.Len(); n > size {
						t.Errorf("%d sessions held, over the bound of %d", n, size)
					}
				case 3:
					if keys := m.Keys(); len(keys) > size {
						t.Errorf("%d keys, over the bound of %d", len(keys), size)
					}
				case 4, 5:
					st, err := m.Get(ctx, k)
					if err == nil && len(st.Active) > 0 {
						st.Active[0] = "changed" // a copy: no race with the store
					}
				default:
					_ = m.Put(ctx, k, State{Active: []string{fmt.Sprint("tool_", i)}})
				}
			}
		}()
	}
	wg.Wait()
	if n, keys := m.Len(), m.Keys(); n != len(keys) || n > size {
		t.Errorf("Len %d, %d keys, bound %d", n, len(keys), size)
	}
}

// TestMemoryDeleteWaitsForAMergeInProgress: a delete that landed between
// a merge's read and its write would be undone by the write, so a delete
// waits for the write in progress, as another write does.
func TestMemoryDeleteWaitsForAMergeInProgress(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(10, time.Hour)
	if err := m.Put(ctx, "k", State{Active: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	m.writes.Lock() // a merge between its read and its write
	deleted := make(chan struct{})
	go func() {
		_ = m.Delete(ctx, "k")
		close(deleted)
	}()
	select {
	case <-deleted:
		t.Error("Delete returned while a write was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	m.writes.Unlock()
	<-deleted
	if _, err := m.Get(ctx, "k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after the delete, Get = %v, want ErrNotFound", err)
	}
}
