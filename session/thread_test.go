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

func TestRedisKeepsThreads(t *testing.T) {
	ctx := context.Background()

	t.Run("a thread put by one replica is read by another", func(t *testing.T) {
		srv := miniredis.RunT(t)
		a, b := newTestRedis(t, srv, time.Minute), newTestRedis(t, srv, time.Minute)
		want := Thread{Session: "tenant:conv", Upstream: "resp_last", Hidden: []string{"resp_search", "resp_last"},
			Pending: []Output{{CallID: "call_search", Output: "Found 2 tool(s)."}}, HiddenTokens: 57,
			Tools: []string{"repo_create_issue", "repo_list_issues"}}
		if err := a.PutThread(ctx, "tenant:resp_first", want); err != nil {
			t.Fatal(err)
		}
		got, err := b.GetThread(ctx, "tenant:resp_first")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("replica b got %+v, %v; want %+v", got, err, want)
		}
		if keys := srv.Keys(); !slices.Equal(keys, []string{"toolgate:thread:tenant:resp_first"}) {
			t.Errorf("keys = %q, want the thread prefix", keys)
		}
	})

	t.Run("an id never noted is not found", func(t *testing.T) {
		r := newTestRedis(t, miniredis.RunT(t), time.Minute)
		if _, err := r.GetThread(ctx, "tenant:resp_other"); !errors.Is(err, ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("a thread naming only its session expires with the sessions", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Hour)
		if err := r.PutThread(ctx, "k", Thread{Session: "s"}); err != nil {
			t.Fatal(err)
		}
		srv.FastForward(59 * time.Minute)
		if _, err := r.GetThread(ctx, "k"); err != nil {
			t.Fatalf("expired early: %v", err)
		}
		srv.FastForward(2 * time.Minute)
		if _, err := r.GetThread(ctx, "k"); !errors.Is(err, ErrNotFound) {
			t.Errorf("err = %v after the sessions' ttl, want ErrNotFound", err)
		}
	})

	for _, tc := range []struct {
		name string
		th   Thread
	}{
		{"a thread naming the upstream id to continue from", Thread{Session: "s", Upstream: "resp_last", Hidden: []string{"resp_last"}}},
		{"a thread naming only hidden rounds", Thread{Session: "s", Hidden: []string{"resp_search"}}},
	} {
		t.Run(tc.name+" outlives the sessions for as long as the upstream keeps responses", func(t *testing.T) {
			srv := miniredis.RunT(t)
			r := newTestRedis(t, srv, time.Hour)
			if err := r.PutThread(ctx, "k", tc.th); err != nil {
				t.Fatal(err)
			}
			srv.FastForward(UpstreamThreadTTL - time.Minute)
			if _, err := r.GetThread(ctx, "k"); err != nil {
				t.Fatalf("expired early: %v", err)
			}
			srv.FastForward(2 * time.Minute)
			if _, err := r.GetThread(ctx, "k"); !errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v after UpstreamThreadTTL, want ErrNotFound", err)
			}
		})
	}

	for _, tc := range []struct{ name, value, says string }{
		{"a value that is not JSON", "{not json", "decoding thread toolgate:thread:bad"},
		{"a value that names no session", `{"upstream":"resp_x"}`, "no session"},
		{"a value over the size bound", `{"session":"` + strings.Repeat("x", maxThreadBytes) + `"}`, "over the 65536-byte limit"},
	} {
		t.Run(tc.name+" is unreadable, not a store failure", func(t *testing.T) {
			srv := miniredis.RunT(t)
			r := newTestRedis(t, srv, time.Minute)
			if err := srv.Set(redisThreadPrefix+"bad", tc.value); err != nil {
				t.Fatal(err)
			}
			_, err := r.GetThread(ctx, "bad")
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("err = %v, want ErrCorrupt saying %q", err, tc.says)
			}
		})
	}

	t.Run("a server that is gone is an unavailable store", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		srv.Close()
		if _, err := r.GetThread(ctx, "k"); !errors.Is(err, ErrUnavailable) {
			t.Errorf("GetThread: %v, want ErrUnavailable", err)
		}
		if err := r.PutThread(ctx, "k", Thread{Session: "s"}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("PutThread: %v, want ErrUnavailable", err)
		}
	})
}
