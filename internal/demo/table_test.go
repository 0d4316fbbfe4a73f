package demo

import (
	"math"
	"strings"
	"testing"
)

func TestGroupSeparatesThousands(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int64
		want string
	}{
		{"a number under a thousand has no separator", 999, "999"},
		{"a million has two", 1000000, "1,000,000"},
		{"a negative number keeps its sign before the digits", -1234, "-1,234"},
		{"the smallest int64, what a NaN rounds to, formats instead of recursing", math.MinInt64, "-9,223,372,036,854,775,808"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := group(tc.n); got != tc.want {
				t.Errorf("group(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

func TestTheTableSaysWhenItsCacheEstimateIsNotTheAPIs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		api    API
		caveat bool
	}{
		{"a Messages API run says Anthropic caches only where the client asks", APIMessages, true},
		{"a Chat Completions run says nothing of it", APIChat, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := (&Result{API: tc.api, Tasks: 1, Steps: 1}).Print(&b); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), "cache_control"); got != tc.caveat {
				t.Errorf("caveat printed: %v, want %v:\n%s", got, tc.caveat, b.String())
			}
		})
	}
}
