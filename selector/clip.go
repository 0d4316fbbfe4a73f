package selector

import "unicode/utf8"

// maxTextBytes bounds how much of one text (a search query, a user
// message) the ranking reads. A request is a few sentences; the rest of a
// long message is pasted material (logs, code, a document), and analysing
// a megabyte of CJK text, bigram by bigram, took a third of a second and
// 190 MB per request. The head and the tail are kept, for the ask sits
// before the pasted material or after it.
const maxTextBytes = 4 << 10

// clip returns s, or its first and last maxTextBytes/2 bytes (cut at rune
// boundaries, a space between them) when it is longer.
func clip(s string) string {
	if len(s) <= maxTextBytes {
		return s
	}
	head, tail := maxTextBytes/2, len(s)-maxTextBytes/2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + " " + s[tail:]
}

// clipAll returns texts with each clipped, the slice itself when none is
// long.
func clipAll(texts []string) []string {
	for _, s := range texts {
		if len(s) > maxTextBytes {
			out := make([]string, len(texts))
			for i, t := range texts {
				out[i] = clip(t)
			}
			return out
		}
	}
	return texts
}
