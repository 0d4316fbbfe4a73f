package demo

import "testing"

func TestPrefixCacheServesTheLongestPrefixAnEarlierPromptBeganWith(t *testing.T) {
	item := func(text string, tokens int) promptItem { return promptItem{text: text, tokens: tokens} }
	tools := []promptItem{item("tool_a", 600), item("tool_b", 600)}
	for _, tc := range []struct {
		name    string
		earlier [][]promptItem
		prompt  []promptItem
		want    int
	}{
		{"a first prompt is served nothing",
			nil, append(tools, item("user: hi", 30)), 0},
		{"the same tools and a longer conversation: tools and the earlier messages, in steps of 128",
			[][]promptItem{append(tools, item("user: hi", 30))},
			append(tools, item("user: hi", 30), item("assistant: hello", 20)), 1152},
		{"a tool added before the messages ends the match there",
			[][]promptItem{append(tools, item("user: hi", 30))},
			append(append(tools, item("tool_c", 600)), item("user: hi", 30)), 1152},
		{"a different first tool matches nothing, however much follows",
			[][]promptItem{append(tools, item("user: hi", 30))},
			[]promptItem{item("tool_x", 600), item("tool_b", 600), item("user: hi", 30)}, 0},
		{"a shared prefix under 1,024 tokens is not served",
			[][]promptItem{{item("tool_a", 600), item("tool_b", 300)}},
			[]promptItem{item("tool_a", 600), item("tool_b", 300), item("user: hi", 30)}, 0},
		{"items match whole: the same bytes cut elsewhere are another prompt",
			[][]promptItem{{item("ab", 700), item("c", 700)}},
			[]promptItem{item("a", 700), item("bc", 700)}, 0},
		{"the longest of several earlier prompts counts",
			[][]promptItem{tools[:1], append(tools, item("user: hi", 30))},
			append(tools, item("user: hi", 30)), 1152},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newPrefixCache()
			for _, p := range tc.earlier {
				c.serve(p)
			}
			if got := c.serve(tc.prompt); got != tc.want {
				t.Errorf("served %d tokens, want %d", got, tc.want)
			}
		})
	}
}

func TestBilledInputChargesCacheHitsAtTheRate(t *testing.T) {
	u := usage{InputTokens: 10_000, CachedTokens: 8_000}
	for _, tc := range []struct {
		rate float64
		want float64
	}{{1, 10_000}, {0.5, 6_000}, {0.1, 2_800}} {
		if got := u.billed(tc.rate); got != tc.want {
			t.Errorf("billed at %v: %v, want %v", tc.rate, got, tc.want)
		}
	}
}
