package session

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestKeysAreNamespacedByTenant(t *testing.T) {
	a, b := Tenant("Bearer sk-alpha-123"), Tenant("Bearer sk-beta-456")
	for _, tc := range []struct {
		name   string
		ka, kb string
	}{
		{"the same explicit session id under two credentials gives two keys", Key(a, "s1", "", "", ""), Key(b, "s1", "", "", "")},
		{"the same conversation opening under two credentials gives two keys", Key(a, "", "", "sys", "hi"), Key(b, "", "", "sys", "hi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ka == tc.kb {
				t.Errorf("both tenants map to %q", tc.ka)
			}
		})
	}
	t.Run("a tenant label never contains the credential", func(t *testing.T) {
		if strings.Contains(a, "alpha") || strings.Contains(Key(a, "s1", "", "", ""), "sk-") {
			t.Errorf("tenant %q carries the credential", a)
		}
	})
}

// TestAConversationIDTellsApartConversationsThatOpenAlike: without an
// X-Session-ID, conversations that open with the same system prompt and
// first user message (an agent's fixed preamble) shared one session; the
// id the client keeps for each conversation (prompt_cache_key) parts
// them.
func TestAConversationIDTellsApartConversationsThatOpenAlike(t *testing.T) {
	tenant := Tenant("Bearer sk-test")
	const sys, preamble = "You are a coding agent.", "<environment_context><cwd>/repo</cwd></environment_context>"
	for _, tc := range []struct {
		name   string
		ka, kb string
		same   bool
	}{
		{"two conversations that open alike with their own ids have two keys",
			Key(tenant, "", "conv-a", sys, preamble), Key(tenant, "", "conv-b", sys, preamble), false},
		{"one conversation's turns have one key", Key(tenant, "", "conv-a", sys, preamble), Key(tenant, "", "conv-a", sys, preamble), true},
		{"two conversations that open alike without ids share a key", Key(tenant, "", "", sys, preamble), Key(tenant, "", "", sys, preamble), true},
		{"an id does not reach the session of the opening without one", Key(tenant, "", "conv-a", sys, preamble), Key(tenant, "", "", sys, preamble), false},
		{"an id's bytes moved into the opening do not reach its session", Key(tenant, "", "ab", "c", "d"), Key(tenant, "", "a", "bc", "d"), false},
		{"an explicit session id wins over the conversation's", Key(tenant, "s1", "conv-a", sys, preamble), Key(tenant, "s1", "conv-b", sys, "other"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.ka == tc.kb) != tc.same {
				t.Errorf("keys %q and %q, want them the same: %v", tc.ka, tc.kb, tc.same)
			}
		})
	}
}

func TestMemoryIsSafeUnderConcurrentUse(t *testing.T) {
	m := NewMemory(64, 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", i%16)
			st, _ := m.Get(ctx, key)
			st.Join(fmt.Sprintf("tool_%d", i))
			st.Touch(fmt.Sprintf("tool_%d", i), 4)
			_ = m.Put(ctx, key, st)
		}()
	}
	wg.Wait()
	st, err := m.Get(ctx, "k0")
	if err != nil {
		t.Fatal(err)
	}
	// A copy: changing it must not change what the store holds.
	st.Active[0] = "changed"
	again, _ := m.Get(ctx, "k0")
	if again.Active[0] == "changed" {
		t.Error("Get returned the stored slice, not a copy")
	}
}

func TestGuessesNeverCalledAreDropped(t *testing.T) {
	for _, tc := range []struct {
		name        string
		active      []string
		guesses     []string
		called      []string
		wantActive  []string
		wantDropped []string
	}{
		{"guesses go and the other tools keep their order",
			[]string{"core", "g1", "found", "g2"}, []string{"g1", "g2"}, nil,
			[]string{"core", "found"}, []string{"g1", "g2"}},
		{"a guess that was called stays",
			[]string{"g1", "g2"}, []string{"g1", "g2"}, []string{"g2"},
			[]string{"g2"}, []string{"g1"}},
		{"a session without guesses keeps everything",
			[]string{"a", "b"}, nil, []string{"a"},
			[]string{"a", "b"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := State{Active: slices.Clone(tc.active)}
			for _, g := range tc.guesses {
				s.Guess(g)
				s.Guess(g) // marking twice is marking once
			}
			for _, c := range tc.called {
				s.Touch(c, 8)
			}
			dropped := s.DropGuesses()
			if !slices.Equal(s.Active, tc.wantActive) || !slices.Equal(dropped, tc.wantDropped) {
				t.Errorf("active %v, dropped %v; want %v, %v", s.Active, dropped, tc.wantActive, tc.wantDropped)
			}
			if len(s.Guesses) != 0 {
				t.Errorf("guesses left after dropping: %v", s.Guesses)
			}
			if again := s.DropGuesses(); len(again) != 0 {
				t.Errorf("a second drop removed %v", again)
			}
		})
	}
}

func TestRemoveTakesToolsOutOfActiveAndGuesses(t *testing.T) {
	s := State{Active: []string{"a", "g1", "b", "g2"}}
	s.Guess("g1")
	s.Guess("g2")
	s.Remove([]string{"g1", "b"})
	if !slices.Equal(s.Active, []string{"a", "g2"}) || !slices.Equal(s.Guesses, []string{"g2"}) {
		t.Errorf("active %v, guesses %v; want [a g2], [g2]", s.Active, s.Guesses)
	}
}

func TestKeysStayShortWhateverTheSessionID(t *testing.T) {
	tenant := Tenant("Bearer sk-alpha-123")
	huge := strings.Repeat("x", 900_000)
	for _, tc := range []struct {
		name     string
		explicit string
		want     func(key string) bool
	}{
		{"a short id stays readable in the key", "conv-42", func(k string) bool { return k == tenant+":id:conv-42" }},
		{"an id of the longest readable length stays readable", strings.Repeat("a", MaxReadableID), func(k string) bool {
			return k == tenant+":id:"+strings.Repeat("a", MaxReadableID)
		}},
		{"an id one byte longer is hashed into a key of bounded length", strings.Repeat("a", MaxReadableID+1), func(k string) bool {
			return len(k) <= maxKeyLen && !strings.Contains(k, "aaaa")
		}},
		{"a 900 KB id gives a key of bounded length", huge, func(k string) bool { return len(k) <= maxKeyLen }},
		{"two long ids that differ in their last byte give two keys", huge[1:] + "y", func(k string) bool { return k != Key(tenant, huge, "", "", "") }},
		{"the same long id under another credential gives another key", huge, func(k string) bool {
			return k != Key(Tenant("Bearer sk-beta-456"), huge, "", "", "")
		}},
		{"a short id spelling a long id's key does not reach its session", strings.SplitN(Key(tenant, huge, "", "", ""), ":", 3)[2], func(k string) bool {
			return k != Key(tenant, huge, "", "", "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Key(tenant, tc.explicit, "", "", "")
			if !tc.want(k) {
				t.Errorf("key %.200q (%d bytes)", k, len(k))
			}
		})
	}
}

// TestIsKeyKnowsEveryKindOfKey: the debug route reads an id as a store
// key when IsKey says so, and an id it misreads is looked up as an
// X-Session-ID and not found.
func TestIsKeyKnowsEveryKindOfKey(t *testing.T) {
	tenant := Tenant("Bearer sk-test")
	for _, tc := range []struct {
		name string
		id   string
		want bool
	}{
		{"a key of an X-Session-ID is a key", Key(tenant, "conv-42", "", "", ""), true},
		{"a key of a hashed long X-Session-ID is a key", Key(tenant, strings.Repeat("x", MaxReadableID+1), "", "", ""), true},
		{"a key of a conversation's opening is a key", Key(tenant, "", "", "sys", "hi"), true},
		{"a key of an opening with a prompt_cache_key is a key", Key(tenant, "", "conv-a", "sys", "hi"), true},
		{"a bare X-Session-ID is not a key", "conv-42", false},
		{"a tenant of the wrong length is not a key", tenant[1:] + ":id:conv-42", false},
		{"a tenant in upper-case hex is not a key", strings.ToUpper(tenant) + ":id:conv-42", false},
		{"a kind Key never makes is not a key", tenant + ":xx:conv-42", false},
		{"a tenant alone is not a key", tenant + ":", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsKey(tc.id); got != tc.want {
				t.Errorf("IsKey(%q) = %v, want %v", tc.id, got, tc.want)
			}
		})
	}
}

// maxKeyLen bounds every key Key returns: a tenant label, a kind and an
// id of at most MaxReadableID bytes.
const maxKeyLen = 16 + len(":id:") + MaxReadableID

func TestBoundKeepsAStoredStateSmall(t *testing.T) {
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%03d", prefix, i)
		}
		return out
	}
	current := func(n string) bool { return strings.HasPrefix(n, "cur") }
	for _, tc := range []struct {
		name    string
		in      State
		current func(string) bool
		check   func(t *testing.T, s State)
	}{
		{"a state within the cap is unchanged", State{Active: names("old", 10), Recent: names("old", 3)}, current,
			func(t *testing.T, s State) {
				if !slices.Equal(s.Active, names("old", 10)) || len(s.Recent) != 3 {
					t.Errorf("changed: %v", s)
				}
			}},
		{"names the request did not carry go first, oldest first, and the rest keep their order",
			State{Active: slices.Concat(names("old", 200), names("cur", 100), names("new", 100))}, current,
			func(t *testing.T, s State) {
				// 400 names, 144 over: the oldest 144 of the 300 the
				// request did not carry.
				if want := slices.Concat(names("old", 200)[144:], names("cur", 100), names("new", 100)); !slices.Equal(s.Active, want) {
					t.Errorf("active %v", s.Active)
				}
			}},
		{"when the request's own tools exceed the cap, the oldest of them go", State{Active: names("cur", 300)}, current,
			func(t *testing.T, s State) {
				if !slices.Equal(s.Active, names("cur", 300)[44:]) {
					t.Errorf("active %v", s.Active)
				}
			}},
		{"without a current request the oldest go", State{Active: slices.Concat(names("cur", 200), names("old", 100))}, nil,
			func(t *testing.T, s State) {
				if !slices.Equal(s.Active, slices.Concat(names("cur", 200)[44:], names("old", 100))) {
					t.Errorf("active %v", s.Active)
				}
			}},
		{"the guesses of dropped names go with them",
			State{Active: slices.Concat(names("old", 100), names("cur", 200)), Guesses: []string{"old000", "cur000"}}, current,
			func(t *testing.T, s State) {
				if !slices.Equal(s.Guesses, []string{"cur000"}) {
					t.Errorf("guesses %v", s.Guesses)
				}
			}},
		{"recent keeps the most recent, preselected its best ranked, guesses the latest",
			State{Recent: names("r", 300), Preselected: names("p", 300), Guesses: names("g", 300)}, current,
			func(t *testing.T, s State) {
				if !slices.Equal(s.Recent, names("r", 300)[44:]) || !slices.Equal(s.Preselected, names("p", 256)) ||
					!slices.Equal(s.Guesses, names("g", 300)[44:]) {
					t.Errorf("recent %d from %s, preselected %d to %s, guesses %d", len(s.Recent), s.Recent[0],
						len(s.Preselected), s.Preselected[len(s.Preselected)-1], len(s.Guesses))
				}
			}},
		{"a hostile state of repeated names is cut to the cap", State{Active: slices.Repeat([]string{"a", "b"}, 5000)}, nil,
			func(t *testing.T, s State) {
				if len(s.Active) != MaxStoredNames {
					t.Errorf("%d names", len(s.Active))
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in.Clone()
			s.Bound(tc.current)
			for _, l := range [][]string{s.Active, s.Recent, s.Preselected, s.Guesses} {
				if len(l) > MaxStoredNames {
					t.Fatalf("a list of %d names, over %d", len(l), MaxStoredNames)
				}
			}
			tc.check(t, s)
		})
	}
}
