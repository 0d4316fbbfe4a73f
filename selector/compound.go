package selector

import (
	"slices"
	"strings"
)

const (
	// compoundMinLen is the shortest run-together name worth splitting.
	compoundMinLen = 7
	// compoundMinPiece is the shortest piece of a split: 3-letter pieces
	// cut inflections and prefixes off ("trend ing", "the paper").
	compoundMinPiece = 4
)

// splitCompound segments a run-together lower-case word ("fundsdbsearch",
// "blockatlas") into the fewest vocab words of at least compoundMinPiece
// letters that cover it exactly. It returns nil when w is a word itself,
// is shorter than compoundMinLen, or has no such cover.
func splitCompound(w string, vocab map[string]int32) []string {
	if len(w) < compoundMinLen {
		return nil
	}
	if _, ok := vocab[w]; ok {
		return nil
	}
	n := len(w)
	best := make([]int, n+1) // fewest pieces covering w[:i]; -1 = none
	from := make([]int, n+1)
	for i := 1; i <= n; i++ {
		best[i] = -1
		for j := max(0, i-20); j <= i-compoundMinPiece; j++ {
			if j > 0 && best[j] < 0 {
				continue
			}
			if _, ok := vocab[w[j:i]]; !ok {
				continue
			}
			if b := best[j] + 1; best[i] < 0 || b < best[i] {
				best[i], from[i] = b, j
			}
		}
	}
	if best[n] < 2 {
		return nil
	}
	var out []string
	for i := n; i > 0; i = from[i] {
		out = append(out, w[from[i]:i])
	}
	slices.Reverse(out)
	return out
}

// compoundParts returns the words of a tool name that is one run-together
// word ("socialsearch" -> "social search"), split by the word vectors'
// vocabulary, or "". Names with separators or camelCase already carry
// their word boundaries; splitting their parts too ("filesystem") cost mcp
// R@10 0.008.
func compoundParts(name string, an *analyzer, wv *WordVectors) string {
	if wv == nil {
		return ""
	}
	ws := an.words(name)
	if len(ws) != 1 {
		return ""
	}
	return strings.Join(splitCompound(ws[0], wv.index), " ")
}
