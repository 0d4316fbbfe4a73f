package policy

import (
	"fmt"
	"testing"
)

func TestLargerCatalogsGetMoreToolsPerTurnAndSearch(t *testing.T) {
	for _, tc := range []struct {
		name                             string
		yaml                             string
		tools                            int
		preselect, followUp, searchLimit int
	}{
		{"a 120-tool catalog keeps the configured values", "{}\n", 120, 6, 2, 4},
		{"a small catalog keeps them too", "{}\n", 20, 6, 2, 4},
		{"150 tools: one more preselected and one more follow-up", "{}\n", 150, 7, 3, 4},
		{"210 tools: and two more search results", "{}\n", 210, 7, 3, 6},
		{"a 1,000-tool catalog stops at 8 results", "{}\n", 1000, 7, 3, 8},
		{"the widening adds to configured values", "gateway: {preselect: 3, follow_up: 4}\nsearch: {limit: 5}\n", 180, 4, 5, 6},
		{"zero stays off", "gateway: {preselect: 0, follow_up: 0}\n", 500, 0, 0, 8},
		{"a configured limit above 8 is kept", "search: {limit: 10}\n", 500, 7, 3, 10},
		{"scale_with_catalog: false keeps the configured values", "gateway: {scale_with_catalog: false}\n", 500, 6, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := parse("tools.yaml", []byte(tc.yaml), newGeneration())
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(snap.PreselectFor(tc.tools), snap.FollowUpFor(tc.tools), snap.SearchLimitFor(tc.tools))
			if want := fmt.Sprint(tc.preselect, tc.followUp, tc.searchLimit); got != want {
				t.Errorf("preselected, follow-ups and search limit for %d tools: %s, want %s", tc.tools, got, want)
			}
		})
	}
}
