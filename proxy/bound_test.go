package proxy

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/session"
)

// bound keeps the active set within max_active: earlier turns' tools not
// used recently go first, oldest first; then the least recently used; then
// this turn's own picks, what the turn's searches returned after the rest;
// pinned tools (core, tool_choice, this turn's calls) never.
func TestBoundEvictsUnusedToolsFirstThenTheLeastRecentlyUsed(t *testing.T) {
	snap := loadPolicy(t, "gateway:\n  max_active: 3\n")
	tests := []struct {
		name     string
		active   []string // session order: oldest first
		recent   []string // least recently used first
		pinned   []string
		fresh    []string // joined this turn (preselected)
		searched []string // of them, returned by an earlier search of the turn
		want     []string
	}{
		{"a set within the bound is left alone",
			[]string{"a", "b", "c"}, nil, nil, nil, nil, []string{"a", "b", "c"}},
		{"the oldest unused tools go first",
			[]string{"a", "b", "c", "d", "e"}, nil, nil, nil, nil, []string{"c", "d", "e"}},
		{"used tools stay while unused ones can go",
			[]string{"a", "b", "c", "d", "e"}, []string{"a", "b"}, nil, nil, nil, []string{"a", "b", "e"}},
		{"then the least recently used go",
			[]string{"a", "b", "c", "d"}, []string{"c", "a", "b", "d"}, nil, nil, nil, []string{"a", "b", "d"}},
		{"pinned tools stay even when they are the oldest",
			[]string{"a", "b", "c", "d", "e"}, nil, []string{"a", "b"}, nil, nil, []string{"a", "b", "e"}},
		{"a set of pinned tools may exceed the bound",
			[]string{"a", "b", "c", "d"}, nil, []string{"a", "b", "c", "d"}, nil, nil, []string{"a", "b", "c", "d"}},
		{"this turn's picks outlast earlier turns' tools, used or not",
			[]string{"a", "b", "c", "d", "e"}, []string{"a", "b"}, nil, []string{"d", "e"}, nil, []string{"b", "d", "e"}},
		{"this turn's picks go last, oldest first, when they alone exceed the bound",
			[]string{"a", "b", "c", "d", "e"}, nil, []string{"a"}, []string{"b", "c", "d", "e"}, nil, []string{"a", "d", "e"}},
		{"what an earlier search returned outlasts the turn's other picks",
			[]string{"a", "b", "c", "d"}, nil, nil, []string{"a", "b", "c", "d"}, []string{"a"}, []string{"a", "c", "d"}},
		{"an earlier search's finds go oldest first when they alone exceed the bound",
			[]string{"a", "b", "c", "d"}, nil, nil, []string{"a", "b", "c", "d"}, []string{"a", "b", "c", "d"}, []string{"b", "c", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &turn{snap: snap, reasons: map[string]string{}, pinned: map[string]bool{},
				st: session.State{Active: slices.Clone(tt.active), Recent: tt.recent}}
			for _, n := range tt.active {
				tr.reasons[n] = reasonSession
			}
			for _, n := range tt.pinned {
				tr.pinned[n] = true
			}
			for _, n := range tt.fresh {
				tr.reasons[n] = reasonPreselect
			}
			tr.searched = map[string]bool{}
			for _, n := range tt.searched {
				tr.searched[n] = true
			}
			tr.bound()
			if !slices.Equal(tr.st.Active, tt.want) {
				t.Errorf("active after bound = %q, want %q", tr.st.Active, tt.want)
			}
			for _, n := range tt.active {
				if kept := slices.Contains(tt.want, n); tr.isActive(n) != kept {
					t.Errorf("%s: active %v, want %v", n, tr.isActive(n), kept)
				}
				if tr.searched[n] && !tr.isActive(n) {
					t.Errorf("%s was evicted and still counts as returned by a search, so no search could find it again", n)
				}
			}
		})
	}
}
