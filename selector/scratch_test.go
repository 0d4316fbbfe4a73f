package selector

import (
	"context"
	"reflect"
	"testing"
)

// Searches share pooled per-tool scratch; what one search leaves behind
// must not change the next one's results.
func TestSearchesDoNotLeakScratchIntoEachOther(t *testing.T) {
	c := compileTest(t, syntheticTools(300), Config{})
	ctx := context.Background()
	first := func() (Results, Results) {
		s, err := c.Search(ctx, Query{Text: "upload an image to the cms page", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Preselect(ctx, []string{"a draft in the drive folder", "publish the draft and share the link on slack"}, 7, Query{})
		if err != nil {
			t.Fatal(err)
		}
		return s, p
	}
	s1, p1 := first()
	for _, text := range []string{"delete every ticket in jira", "merge the github branch with history", "list calendar events with filters", "archive mail"} {
		if _, err := c.Search(ctx, Query{Text: text, Limit: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Preselect(ctx, []string{text, "send the report"}, 7, Query{}); err != nil {
			t.Fatal(err)
		}
	}
	s2, p2 := first()
	if !reflect.DeepEqual(s1, s2) {
		t.Errorf("search changed after other searches:\n%+v\n%+v", s1.Items, s2.Items)
	}
	if !reflect.DeepEqual(p1, p2) {
		t.Errorf("preselection changed after other searches:\n%+v\n%+v", p1.Items, p2.Items)
	}
}
