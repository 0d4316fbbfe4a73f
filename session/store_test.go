package session

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// stores returns every Store implementation, each empty, for the tests
// that all stores must pass.
func stores(t *testing.T) map[string]Store {
	t.Helper()
	return map[string]Store{
		"memory": NewMemory(16, time.Minute),
		"redis":  newTestRedis(t, miniredis.RunT(t), time.Minute),
	}
}

func newTestRedis(t *testing.T, srv *miniredis.Miniredis, ttl time.Duration) *Redis {
	t.Helper()
	r, err := NewRedis("redis://"+srv.Addr(), ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestEveryStoreKeepsSessionState(t *testing.T) {
	ctx := context.Background()
	want := State{
		Active:      []string{"repo_get_issue", "chat_post_message"},
		Recent:      []string{"repo_get_issue"},
		Last:        "repo_get_issue",
		Focus:       "issue",
		Turn:        "3k2x9",
		Preselected: []string{"repo_get_issue", "repo_list_issues"},
		Explored:    "repo_search_code",
		Updated:     time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC),
	}
	for name, s := range stores(t) {
		t.Run(name+" returns what was put, as a copy", func(t *testing.T) {
			if err := s.Put(ctx, "k", want); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if !got.Updated.Equal(want.Updated) {
				t.Fatalf("updated %v, want %v", got.Updated, want.Updated)
			}
			cmp := got
			cmp.Updated = want.Updated // a time read back from JSON has no monotonic reading
			if !reflect.DeepEqual(cmp, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
			got.Active[0] = "changed"
			again, _ := s.Get(ctx, "k")
			if again.Active[0] != want.Active[0] {
				t.Error("changing a returned state changed the stored one")
			}
		})
		t.Run(name+" reports an unknown key as ErrNotFound", func(t *testing.T) {
			if _, err := s.Get(ctx, "never-put"); !errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v, want ErrNotFound", err)
			}
		})
		t.Run(name+" forgets a deleted key", func(t *testing.T) {
			if err := s.Put(ctx, "gone", want); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "gone"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "gone"); !errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestRedisStore(t *testing.T) {
	ctx := context.Background()
	st := State{Active: []string{"fs_read_file"}}

	t.Run("two replicas on one server see each other's sessions", func(t *testing.T) {
		srv := miniredis.RunT(t)
		a, b := newTestRedis(t, srv, time.Minute), newTestRedis(t, srv, time.Minute)
		if err := a.Put(ctx, "conv", st); err != nil {
			t.Fatal(err)
		}
		got, err := b.Get(ctx, "conv")
		if err != nil || !slices.Equal(got.Active, st.Active) {
			t.Fatalf("replica b got %+v, %v", got, err)
		}
	})

	t.Run("a session expires ttl after its last write", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, 30*time.Minute)
		if err := r.Put(ctx, "conv", st); err != nil {
			t.Fatal(err)
		}
		srv.FastForward(29 * time.Minute)
		if _, err := r.Get(ctx, "conv"); err != nil {
			t.Fatalf("expired early: %v", err)
		}
		srv.FastForward(2 * time.Minute)
		if _, err := r.Get(ctx, "conv"); !errors.Is(err, ErrNotFound) {
			t.Errorf("err = %v after the ttl, want ErrNotFound", err)
		}
	})

	t.Run("keys carry the gateway's prefix", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		if err := r.Put(ctx, "tenant:id:s1", st); err != nil {
			t.Fatal(err)
		}
		if keys := srv.Keys(); !slices.Equal(keys, []string{"toolgate:session:tenant:id:s1"}) {
			t.Errorf("keys = %q", keys)
		}
	})

	t.Run("a value that is not a session is an error, not a crash", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		if err := srv.Set("toolgate:session:bad", "{not json"); err != nil {
			t.Fatal(err)
		}
		_, err := r.Get(ctx, "bad")
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "decoding session toolgate:session:bad") {
			t.Errorf("err = %v, want ErrCorrupt naming the key", err)
		}
	})

	t.Run("a value over MaxValueBytes is unreadable, is not read whole, and a Put replaces it", func(t *testing.T) {
		srv := miniredis.RunT(t)
		p := newSlowProxy(t, srv.Addr(), 0)
		r, err := NewRedis("redis://"+p.Addr(), time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		// A state that decodes: only its size is wrong.
		huge := `{"active":["` + strings.Repeat("x", 2<<20) + `"]}`
		if err := srv.Set(redisPrefix+"huge", huge); err != nil {
			t.Fatal(err)
		}
		_, err = r.Get(ctx, "huge")
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "over the 1048576-byte limit") {
			t.Fatalf("err = %v, want ErrCorrupt for its size", err)
		}
		if got := p.got.Load(); got > MaxValueBytes+4<<10 {
			t.Errorf("read %d bytes of a %d-byte value", got, len(huge))
		}
		if err := r.Put(ctx, "huge", st); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Get(ctx, "huge"); err != nil || !slices.Equal(got.Active, st.Active) {
			t.Errorf("after a Put: %v, %v", got, err)
		}
	})

	t.Run("a value of MaxValueBytes is read", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		head, tail := `{"focus":"`, `"}`
		if err := srv.Set(redisPrefix+"big", head+strings.Repeat("x", MaxValueBytes-len(head)-len(tail))+tail); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Get(ctx, "big"); err != nil || len(got.Focus) != MaxValueBytes-len(head)-len(tail) {
			t.Errorf("focus of %d bytes, %v", len(got.Focus), err)
		}
	})

	t.Run("a key holding a list is unreadable, not a store failure", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		if _, err := srv.Lpush(redisPrefix+"list", "x"); err != nil {
			t.Fatal(err)
		}
		for range 2 * breakerThreshold {
			if _, err := r.Get(ctx, "list"); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		}
		if _, err := r.Get(ctx, "missing"); !errors.Is(err, ErrNotFound) {
			t.Errorf("after unreadable values, a missing key: %v (the breaker opened?)", err)
		}
	})

	t.Run("a server that is gone fails fast with an error", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		srv.Close()
		start := time.Now()
		_, err := r.Get(ctx, "conv")
		if err == nil || errors.Is(err, ErrNotFound) {
			t.Fatalf("err = %v, want a connection error", err)
		}
		if err := r.Put(ctx, "conv", st); err == nil {
			t.Error("Put to a dead server succeeded")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v to fail", d)
		}
	})
}

func TestNewRedisRejectsBadURLsWithoutEchoingThem(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"a non-redis scheme", "http://user:hunter2@localhost:6379"},
		{"a database that is not a number", "redis://:hunter2@localhost:6379/zero"},
		{"an unknown option", "redis://:hunter2@localhost:6379?colour=blue"},
		{"a unix socket, which the store does not support", "unix://:hunter2@/tmp/redis.sock"},
		{"a password with an unescaped slash", "redis://:hunt/er2@localhost:6379"},
		{"no read timeout (-1), which would leave operations unbounded", "redis://:hunter2@localhost:6379?read_timeout=-1"},
		{"a read timeout of 0, go-redis's default", "redis://:hunter2@localhost:6379?read_timeout=0"},
	} {
		t.Run(tc.name+" is rejected", func(t *testing.T) {
			_, err := NewRedis(tc.url, time.Minute, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "hunt") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}
