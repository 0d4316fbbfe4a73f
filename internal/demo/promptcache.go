package demo

import "hash/maphash"

// Providers bill the part of a prompt their prompt cache serves at a
// fraction of the input price, and a direct agent's prompt is the most
// cacheable there is: the same tools array, request after request. The
// gateway's arrays change with each turn's picks, so its prompts share
// shorter prefixes. A saving quoted in raw tokens alone would leave that
// out; the demo also reports what a prefix cache would serve and the
// input billed with it.
const (
	// cacheMinTokens is the shortest prefix a cache serves, and
	// cacheStep the granularity above it (OpenAI's rules).
	cacheMinTokens = 1024
	cacheStep      = 128
)

// promptItem is one piece of a prompt in the order a provider lays the
// prompt out: each tool definition, then each message (some providers put
// the system prompt before the tools; either way the tools come before the
// conversation).
type promptItem struct {
	text   string
	tokens int
}

// prefixCache estimates, for each prompt of a run, how many of its tokens
// a provider's prefix cache would serve: those of the longest run of whole
// leading items that some earlier prompt of the run began with (from
// cacheMinTokens on, in steps of cacheStep). It never evicts (a run takes
// seconds; providers keep entries for minutes), and matches whole items
// only (a provider also serves the start of the first item that differs),
// so both runs' hits are slightly undercounted.
type prefixCache struct {
	seed maphash.Seed
	seen map[uint64]struct{} // hashes of every prefix seen, item by item
}

func newPrefixCache() *prefixCache {
	return &prefixCache{seed: maphash.MakeSeed(), seen: map[uint64]struct{}{}}
}

// serve returns how many of items' tokens the cache serves, and remembers
// every prefix of items for the prompts after it.
func (c *prefixCache) serve(items []promptItem) int {
	var h maphash.Hash
	h.SetSeed(c.seed)
	matched, total, hit := 0, 0, true
	for _, it := range items {
		h.WriteString(it.text)
		_ = h.WriteByte(0) // item boundary: "ab"+"c" is not "a"+"bc"
		sum := h.Sum64()
		total += it.tokens
		if _, ok := c.seen[sum]; ok && hit {
			matched = total
		} else {
			hit = false
			c.seen[sum] = struct{}{}
		}
	}
	if matched < cacheMinTokens {
		return 0
	}
	return matched - matched%cacheStep
}
