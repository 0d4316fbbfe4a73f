package policy

import (
	"errors"
	"fmt"
	"iter"
	"strings"
)

// glob is a compiled tool-name pattern: '*' matches any run of characters
// (including none), '?' one character, '[abc]', '[a-z]' and '[!a-z]' one
// character of a class, and '\' escapes the next character. Matching is
// case-insensitive because tool names mix conventions (deleteFile,
// DeleteRepo, delete_file) and a deny rule must catch all of them. Unlike
// path.Match, '/' and '.' are ordinary characters, so "*" also spans MCP
// namespaces such as "github/create_issue" or "fs.read".
type glob struct {
	src     string // as written, for decision rules and errors
	pattern []rune // lower-cased
	literal bool   // no metacharacters: compare directly
}

var errGlobSyntax = errors.New("bad glob")

// compileGlob checks the pattern once so that matching never fails.
func compileGlob(src string) (glob, error) {
	if src == "" {
		return glob{}, fmt.Errorf("%w: empty pattern", errGlobSyntax)
	}
	p := []rune(strings.ToLower(src))
	literal := true
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '*', '?':
			literal = false
		case '\\':
			literal = false
			if i+1 >= len(p) {
				return glob{}, fmt.Errorf("%w %q: trailing backslash", errGlobSyntax, src)
			}
			i++
		case '[':
			literal = false
			end, err := classEnd(p, i)
			if err == nil {
				err = checkRanges(p[i+1 : end])
			}
			if err != nil {
				return glob{}, fmt.Errorf("%w %q: %v", errGlobSyntax, src, err)
			}
			i = end
		case ']':
			return glob{}, fmt.Errorf("%w %q: ']' without '['", errGlobSyntax, src)
		}
	}
	return glob{src: src, pattern: p, literal: literal}, nil
}

// classEnd returns the index of the ']' closing the class that starts at i.
func classEnd(p []rune, i int) (int, error) {
	j := i + 1
	if j < len(p) && (p[j] == '!' || p[j] == '^') {
		j++
	}
	if j < len(p) && p[j] == ']' { // a leading ']' is a member
		j++
	}
	for ; j < len(p); j++ {
		switch p[j] {
		case '\\':
			j++
		case ']':
			if j == i+1 {
				return 0, errors.New("empty character class")
			}
			return j, nil
		}
	}
	return 0, errors.New("unterminated character class '['")
}

// checkRanges rejects a reversed range such as z-a: it matches nothing, so
// a deny holding it would silently deny nothing and an allow would hide
// every tool.
func checkRanges(class []rune) error {
	for lo, hi := range classRanges(class) {
		if lo > hi {
			return fmt.Errorf("reversed range %c-%c matches nothing; write %c-%c", lo, hi, hi, lo)
		}
	}
	return nil
}

// classRanges yields each member of a class body (between the brackets) as
// a lo..hi range, a single character as lo == hi, after the negation mark
// and with escapes resolved. compileGlob and classMatch read a class the
// same way through it.
func classRanges(class []rune) iter.Seq2[rune, rune] {
	return func(yield func(lo, hi rune) bool) {
		if len(class) > 0 && (class[0] == '!' || class[0] == '^') {
			class = class[1:]
		}
		for i := 0; i < len(class); i++ {
			lo := class[i]
			if lo == '\\' && i+1 < len(class) {
				i++
				lo = class[i]
			}
			hi := lo
			if i+2 < len(class) && class[i+1] == '-' {
				hi = class[i+2]
				if hi == '\\' && i+3 < len(class) {
					i++
					hi = class[i+2]
				}
				i += 2
			}
			if !yield(lo, hi) {
				return
			}
		}
	}
}

// Match reports whether name matches. It expects name as the client sent
// it; it lower-cases it itself.
func (g glob) Match(name string) bool {
	return g.matchLower([]rune(strings.ToLower(name)))
}

func (g glob) matchLower(s []rune) bool {
	if g.literal {
		return string(s) == string(g.pattern)
	}
	// Iterative wildcard matching with one backtrack point: linear for the
	// patterns people write, never exponential.
	p := g.pattern
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				pi++
				si++
				continue
			case '[':
				end, _ := classEnd(p, pi) // validated at compile time
				if classMatch(p[pi+1:end], s[si]) {
					pi = end + 1
					si++
					continue
				}
			case '\\':
				if p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			default:
				if p[pi] == s[si] {
					pi++
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func classMatch(class []rune, c rune) bool {
	negate := len(class) > 0 && (class[0] == '!' || class[0] == '^')
	for lo, hi := range classRanges(class) {
		if lo <= c && c <= hi {
			return !negate
		}
	}
	return negate
}

// globs is an ordered list of patterns; the first match names the rule.
type globs []glob

// first returns the first pattern that matches name.
func (gs globs) first(name string) (glob, bool) {
	if len(gs) == 0 {
		return glob{}, false
	}
	lower := []rune(strings.ToLower(name))
	for _, g := range gs {
		if g.matchLower(lower) {
			return g, true
		}
	}
	return glob{}, false
}

// isGlob reports whether s uses glob metacharacters; tools.<name> keys
// without them are exact names.
func isGlob(s string) bool {
	return strings.ContainsAny(s, "*?[\\")
}
