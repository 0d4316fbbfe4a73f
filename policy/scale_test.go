package policy

import (
	"fmt"
	"testing"
)

func TestLargerCatalogsGetMoreFollowUpsAndSearchResults(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		yaml                  string
		tools                 int
		followUp, searchLimit int
	}{
		{"a 120-tool catalog keeps the configured values", "", 120, 2, 3},
		{"150 tools: one more follow-up and one more result", "", 150, 3, 4},
		{"210 tools: three more results", "", 210, 3, 6},
		{"a 1,000-tool catalog stops at 8 results", "", 1000, 3, 8},
		{"a small catalog keeps the configured values", "", 20, 2, 3},
		{"the widening adds to configured values", "gateway: {follow_up: 4}\nsearch: {limit: 5}\n", 180, 5, 7},
		{"follow_up: 0 stays off", "gateway: {follow_up: 0}\n", 500, 0, 8},
		{"a configured limit above 8 is kept", "search: {limit: 10}\n", 500, 3, 10},
		{"scale_with_catalog: false keeps the configured values", "gateway: {scale_with_catalog: false}\n", 500, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := parse("tools.yaml", []byte(tc.yaml), newGeneration())
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(snap.FollowUpFor(tc.tools), snap.SearchLimitFor(tc.tools))
			if want := fmt.Sprint(tc.followUp, tc.searchLimit); got != want {
				t.Errorf("follow-ups and search limit for %d tools: %s, want %s", tc.tools, got, want)
			}
		})
	}
}
