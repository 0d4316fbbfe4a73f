package session

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

func TestMergeKeepsWhatEachRequestChanged(t *testing.T) {
	loaded := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	since := loaded.Add(time.Second) // another request saved after the load
	saved := loaded.Add(2 * time.Second)
	for _, tc := range []struct {
		name         string
		cur, base, s State
		want         State
	}{
		{"with nothing saved since the load the request's state is stored as it is",
			State{Active: []string{"a"}, Last: "a", Updated: loaded},
			State{Active: []string{"a"}, Last: "a", Updated: loaded},
			State{Active: []string{"b"}, Last: "b", Updated: saved},
			State{Active: []string{"b"}, Last: "b", Updated: saved}},
		{"with nothing stored any more (evicted, expired, unreadable) the request's state is stored whole",
			State{},
			State{Active: []string{"a", "b"}, Recent: []string{"b"}, Last: "b", Focus: "repo", Updated: loaded},
			State{Active: []string{"a", "b", "c"}, Recent: []string{"b"}, Last: "b", Focus: "repo", Updated: saved},
			State{Active: []string{"a", "b", "c"}, Recent: []string{"b"}, Last: "b", Focus: "repo", Updated: saved}},
		{"a tool another request found meanwhile stays, before the tools this one found",
			State{Active: []string{"a", "b"}, Updated: since},
			State{Active: []string{"a"}, Updated: loaded},
			State{Active: []string{"a", "c"}, Updated: saved},
			State{Active: []string{"a", "b", "c"}, Updated: saved}},
		{"a guess the request dropped stays dropped, another request's guess stays a guess",
			State{Active: []string{"a", "g", "h"}, Guesses: []string{"g", "h"}, Updated: since},
			State{Active: []string{"a", "g"}, Guesses: []string{"g"}, Updated: loaded},
			State{Active: []string{"a", "x"}, Guesses: []string{"x"}, Updated: saved},
			State{Active: []string{"a", "h", "x"}, Guesses: []string{"h", "x"}, Updated: saved}},
		{"a tool another request evicted stays evicted",
			State{Active: []string{"a"}, Updated: since},
			State{Active: []string{"a", "b"}, Updated: loaded},
			State{Active: []string{"a", "b", "c"}, Updated: saved},
			State{Active: []string{"a", "c"}, Updated: saved}},
		{"a tool another request called is no guess of this one's",
			State{Active: []string{"a"}, Recent: []string{"a"}, Last: "a", Updated: since},
			State{Updated: loaded},
			State{Active: []string{"a"}, Guesses: []string{"a"}, Updated: saved},
			State{Active: []string{"a"}, Recent: []string{"a"}, Last: "a", Updated: saved}},
		{"a request that called nothing leaves the recent tools and the last tool another request called meanwhile",
			State{Active: []string{"a", "b", "c"}, Recent: []string{"a", "b", "c"}, Last: "c", Updated: since},
			State{Active: []string{"a", "b", "c"}, Recent: []string{"a", "b"}, Last: "b", Updated: loaded},
			State{Active: []string{"a", "b", "c"}, Recent: []string{"a", "b"}, Last: "b", Updated: saved},
			State{Active: []string{"a", "b", "c"}, Recent: []string{"a", "b", "c"}, Last: "c", Updated: saved}},
		{"a request's calls follow those another request made meanwhile, the tools neither called keeping their order",
			State{Active: []string{"a", "b", "c", "d"}, Recent: []string{"a", "b", "c", "d"}, Last: "d", Updated: since},
			State{Active: []string{"a", "b", "c"}, Recent: []string{"a", "b", "c"}, Last: "c", Updated: loaded},
			State{Active: []string{"a", "b", "c"}, Recent: []string{"b", "c", "a"}, Last: "a", Updated: saved},
			State{Active: []string{"a", "b", "c", "d"}, Recent: []string{"b", "c", "d", "a"}, Last: "a", Updated: saved}},
		{"at most keep recent tools stay, the oldest going",
			State{Active: []string{"a", "b", "c", "d", "e"}, Recent: []string{"a", "b", "c", "d"}, Last: "d", Updated: since},
			State{Active: []string{"a", "b", "c", "d", "e"}, Recent: []string{"a", "b", "c"}, Last: "c", Updated: loaded},
			State{Active: []string{"a", "b", "c", "d", "e"}, Recent: []string{"a", "b", "c", "e"}, Last: "e", Updated: saved},
			State{Active: []string{"a", "b", "c", "d", "e"}, Recent: []string{"b", "c", "d", "e"}, Last: "e", Updated: saved}},
		{"the fields the request left as it loaded them are the store's",
			State{Active: []string{"a"}, Recent: []string{"a"}, Last: "a", Focus: "ticket", Turn: "t2", Preselected: []string{"a"}, Observed: "o2", Updated: since},
			State{Updated: loaded},
			State{Active: []string{"b"}, Updated: saved},
			State{Active: []string{"a", "b"}, Recent: []string{"a"}, Last: "a", Focus: "ticket", Turn: "t2", Preselected: []string{"a"}, Observed: "o2", Updated: saved}},
		{"the fields the request changed are its own, the newest",
			State{Active: []string{"a"}, Recent: []string{"a"}, Last: "a", Focus: "ticket", Turn: "t2", Preselected: []string{"a"}, Updated: since},
			State{Updated: loaded},
			State{Active: []string{"b"}, Recent: []string{"b"}, Last: "b", Focus: "invoice", Turn: "t3", Preselected: []string{"b"}, Updated: saved},
			State{Active: []string{"a", "b"}, Recent: []string{"a", "b"}, Last: "b", Focus: "invoice", Turn: "t3", Preselected: []string{"b"}, Updated: saved}},
		{"an agent's and its subagent's tools all stay, as they do saved one after the other, whatever max_active",
			State{Active: append(names("a", 30), "a31"), Recent: []string{"a30"}, Updated: since},
			State{Active: names("a", 30), Recent: []string{"a30"}, Updated: loaded},
			State{Active: append(names("a", 30), names("b", 10)...), Recent: []string{"a30"}, Updated: saved},
			State{Active: append(append(names("a", 30), "a31"), names("b", 10)...), Recent: []string{"a30"}, Updated: saved}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Merge(tc.cur, tc.base, tc.s, 4) // each request keeps 4 recent tools
			if !reflect.DeepEqual(norm(got), norm(tc.want)) {
				t.Errorf("Merge = %+v\nwant    %+v", got, tc.want)
			}
		})
	}
}

// names returns prefix01 to prefix<n>.
func names(prefix string, n int) []string {
	out := make([]string, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

// norm makes empty lists nil, for a comparison.
func norm(s State) State {
	for _, l := range []*[]string{&s.Active, &s.Recent, &s.Preselected, &s.Guesses} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return s
}

// TestASaveKeepsWhatAnotherRequestSavedSinceTheLoad: two requests of one
// session at once each loaded the state before either saved, and the
// later Put dropped what the earlier had found.
func TestASaveKeepsWhatAnotherRequestSavedSinceTheLoad(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name+" keeps both requests' tools", func(t *testing.T) {
			start := State{Active: []string{"core"}, Updated: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)}
			if err := s.Put(ctx, "k", start); err != nil {
				t.Fatal(err)
			}
			a, _ := s.Get(ctx, "k")
			b, _ := s.Get(ctx, "k")
			sa, sb := a.Clone(), b.Clone()
			sa.Join("ticket_create", "ticket_update")
			sa.Updated = start.Updated.Add(time.Second)
			sb.Join("dashboard_list")
			sb.Updated = start.Updated.Add(2 * time.Second)
			if err := Save(ctx, s, "k", a, sa, 8); err != nil {
				t.Fatal(err)
			}
			if err := Save(ctx, s, "k", b, sb, 8); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, "k")
			if want := []string{"core", "ticket_create", "ticket_update", "dashboard_list"}; err != nil || !slices.Equal(got.Active, want) {
				t.Errorf("active %v (%v), want %v", got.Active, err, want)
			}
		})
	}

	for name, st := range stores(t) {
		t.Run(name+" stores the request's whole state when the session was evicted since the load", func(t *testing.T) {
			if err := st.Put(ctx, "k", State{Active: []string{"a", "b"}, Last: "b", Focus: "repo", Updated: time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)}); err != nil {
				t.Fatal(err)
			}
			base, err := st.Get(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			s := base.Base()
			s.Join("c")
			s.Updated = base.Updated.Add(time.Second)
			if err := st.Delete(ctx, "k"); err != nil { // evicted, or expired, while the turn ran
				t.Fatal(err)
			}
			if err := Save(ctx, st, "k", base, s, 8); err != nil {
				t.Fatal(err)
			}
			got, err := st.Get(ctx, "k")
			if err != nil || !reflect.DeepEqual(norm(got), norm(s)) {
				t.Errorf("stored %+v (%v)\nwant   %+v", got, err, s)
			}
		})
	}

	t.Run("redis reads again when another replica writes between its read and its write", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r, other := newTestRedis(t, srv, time.Minute), newTestRedis(t, srv, time.Minute)
		calls := 0
		err := r.update(ctx, "k", func(cur State) State {
			calls++
			if calls == 1 {
				if err := other.Put(ctx, "k", State{Active: []string{"found_meanwhile"}}); err != nil {
					t.Fatal(err)
				}
			}
			cur.Active = append(slices.Clone(cur.Active), "mine")
			return cur
		})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := r.Get(ctx, "k")
		if want := []string{"found_meanwhile", "mine"}; calls != 2 || !slices.Equal(got.Active, want) {
			t.Errorf("after %d reads active is %v, want 2 reads and %v", calls, got.Active, want)
		}
		if ttl := srv.TTL(redisPrefix + "k"); ttl != time.Minute {
			t.Errorf("ttl %v, want the store's minute", ttl)
		}
	})

	t.Run("redis reads once more and writes its merge with a plain SET when other writes never stop", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r, other := newTestRedis(t, srv, time.Minute), newTestRedis(t, srv, time.Minute)
		calls := 0
		err := r.update(ctx, "k", func(cur State) State {
			calls++
			if err := other.Put(ctx, "k", State{Active: []string{"busy"}}); err != nil {
				t.Fatal(err)
			}
			cur.Active = append(slices.Clone(cur.Active), "mine")
			return cur
		})
		got, _ := r.Get(ctx, "k")
		if want := []string{"busy", "mine"}; err != nil || calls != updateAttempts+1 || !slices.Equal(got.Active, want) {
			t.Errorf("err %v after %d reads, active %v; want %d reads and %v", err, calls, got.Active, updateAttempts+1, want)
		}
	})

	t.Run("redis replaces a value it cannot read", func(t *testing.T) {
		srv := miniredis.RunT(t)
		r := newTestRedis(t, srv, time.Minute)
		if err := srv.Set(redisPrefix+"k", "not json"); err != nil {
			t.Fatal(err)
		}
		err := Save(ctx, r, "k", State{Active: []string{"z"}, Updated: time.Unix(1, 0)}, State{Active: []string{"z", "a"}, Updated: time.Unix(2, 0)}, 8)
		got, gerr := r.Get(ctx, "k")
		if err != nil || gerr != nil || !slices.Equal(got.Active, []string{"z", "a"}) {
			t.Errorf("save: %v; read back %v, %v; want the request's [z a]", err, got.Active, gerr)
		}
	})
}
