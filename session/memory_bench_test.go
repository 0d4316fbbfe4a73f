package session

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// tenantKey returns the key of session id of tenant, as the gateway makes
// it for an X-Session-ID.
func tenantKey(tenant string, id int) string {
	return Key(Tenant(tenant), fmt.Sprintf("s%d", id), "", "", "")
}

// benchMemory returns a full store of 10,000 sessions of 50 tenants (the
// default bound), their keys, and a state of a typical session.
func benchMemory(b *testing.B) (*Memory, []string, State) {
	b.Helper()
	const size, tenants = 10000, 50
	st := State{
		Active:  []string{"repo_get_issue", "repo_list_issues", "chat_post_message", "fs_read_file", "fs_write_file", "repo_search_code", "ci_get_run", "chat_list_channels"},
		Recent:  []string{"repo_get_issue", "fs_read_file"},
		Last:    "fs_read_file",
		Updated: time.Now(),
	}
	m := NewMemory(size, time.Hour)
	keys := make([]string, size)
	for i := range keys {
		keys[i] = tenantKey(fmt.Sprintf("t%d", i%tenants), i)
		if err := m.Put(context.Background(), keys[i], st); err != nil {
			b.Fatal(err)
		}
	}
	return m, keys, st
}

// The budget of each is the old store's: Get and a Put of a held key
// allocate only the state's copy (4 slices, 2 of them empty here), a
// Put of a new key one entry more; PutMerged adds Merge's.
func BenchmarkMemory(b *testing.B) {
	ctx := context.Background()
	b.Run("Get", func(b *testing.B) {
		m, keys, _ := benchMemory(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := m.Get(ctx, keys[i%len(keys)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Put held", func(b *testing.B) {
		m, keys, st := benchMemory(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			_ = m.Put(ctx, keys[i%len(keys)], st)
		}
	})
	b.Run("Put new, evicting", func(b *testing.B) {
		m, _, st := benchMemory(b)
		fresh := make([]string, 1<<16)
		for i := range fresh {
			fresh[i] = tenantKey(fmt.Sprintf("t%d", i%50), 10000+i)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			// Keys come round again after 65,536, long evicted by then.
			_ = m.Put(ctx, fresh[i%len(fresh)], st)
		}
	})
	b.Run("PutMerged held", func(b *testing.B) {
		m, keys, st := benchMemory(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			// base is what is held: the merge is the plain write.
			_ = m.PutMerged(ctx, keys[i%len(keys)], st, st, 4)
		}
	})
	b.Run("Get and Put in parallel", func(b *testing.B) {
		m, keys, st := benchMemory(b)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				k := keys[(i*7919)%len(keys)]
				if i%4 == 0 {
					_ = m.Put(ctx, k, st)
				} else {
					_, _ = m.Get(ctx, k)
				}
				i++
			}
		})
	})
}
