package rewrite

import (
	"github.com/tidwall/gjson"
)

// ToolCache remembers parsed tools arrays, so a client that resends the same
// catalog every turn has it parsed and validated once. Implementations must
// be safe for concurrent use and must copy raw before keeping it (it aliases
// a body).
type ToolCache interface {
	// Lookup returns the cached array that s begins with, if any: s is the
	// text from the start of a tools value, possibly to the end of its
	// body. It must only return an array whose text is a prefix of s.
	Lookup(s string) (KnownTools, bool)
	// Add keeps raw, a whole tools array, and its parsed tools, and
	// returns what Lookup returns for them. A cache may decline to keep
	// an array; it still returns its Key.
	Add(raw string, tools []Tool) KnownTools
}

// KnownTools is a tools array a ToolCache holds.
type KnownTools struct {
	Raw   string // the array's exact text, owned by the cache
	Tools []Tool // parsed without Params; shared by every request: read-only
	// Key is a hash of Raw: equal arrays have equal keys, and different
	// arrays different keys but for 64-bit hash collisions.
	Key uint64
}

// knownToolsMin is the size from which a cached tools array is worth
// skipping during validation.
const knownToolsMin = 4 << 10

// parseKnownTools handles the common case of a resent catalog: when the
// body's top-level tools value begins with an array the cache holds, that
// array was validated when first seen, so only the rest of the body is
// validated and parsed, from a copy with "[]" standing in for the array.
// The array's end is the cached text's length: the 190 KB catalog is
// compared, never scanned or hashed. The substitution is sound only if the
// stand-in is the top-level tools value of the valid rest, which is
// checked. ok is false when the fast path does not apply; the caller then
// does the full parse. A request it returns is Detached: it holds the
// copy, never body.
// Arrays shorter than minLen are left to the full parse. parse is the
// dialect's own parse of a body without a cache.
func parseKnownTools(body []byte, cache ToolCache, minLen int, parse func([]byte) (*Request, error)) (r *Request, ok bool, err error) {
	start := topLevelValue(body, pathTools)
	if start <= 0 || len(body)-start < max(minLen, 2) || body[start] != '[' {
		return nil, false, nil
	}
	known, hit := cache.Lookup(view(body[start:]))
	end := start + len(known.Raw)
	if !hit || len(known.Raw) < max(minLen, 2) || end > len(body) {
		return nil, false, nil
	}
	rest := make([]byte, 0, len(body)-len(known.Raw)+2)
	rest = append(rest, body[:start]...)
	rest = append(rest, "[]"...)
	rest = append(rest, body[end:]...)
	r, err = parse(rest)
	if err != nil {
		return nil, true, err
	}
	if r.ToolsRaw.Index != start || r.ToolsRaw.Raw != "[]" {
		return nil, false, nil // the stand-in is not where the tools are
	}
	r.Tools, r.ToolsKey, r.ToolsKnown, r.detached = known.Tools, known.Key, true, true
	r.ToolsRaw = gjson.Result{Type: gjson.JSON, Raw: known.Raw, Index: start}
	return r, true, nil
}

// topLevelValue returns where the value of the first top-level member named
// key (its raw text, without escapes) starts in b, or -1. It expects an
// object but does not validate: it is a guess that the caller checks, which
// skips the members before key without parsing them and never reads the
// value itself.
func topLevelValue(b []byte, key string) int {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	for i++; ; i++ {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		end := stringEnd(b, i+1)
		if end >= len(b) {
			return -1
		}
		name := b[i+1 : end]
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		i = skipSpace(b, i+1)
		if string(name) == key {
			return i
		}
		i = skipSpace(b, skipValue(b, i))
		if i >= len(b) || b[i] != ',' {
			return -1
		}
	}
}

// skipValue returns the index just past the JSON value starting at b[i],
// or len(b) when it does not end. Strings are skipped with stringEnd;
// brackets are counted, not matched.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return min(stringEnd(b, i+1)+1, len(b))
	case '{', '[':
		d := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i+1)
			case '{', '[':
				d++
			case '}', ']':
				if d--; d == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
