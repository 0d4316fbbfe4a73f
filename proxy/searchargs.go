package proxy

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"

	"github.com/tidwall/gjson"
)

// searchArgs are a tool_search call's arguments.
type searchArgs struct {
	Query string
	Limit int
}

// maxQueryLen bounds the query a search answer repeats back to the model
// (the ranking reads a long one's head and tail: selector.clip).
const maxQueryLen = 200

// parseSearchArgs reads tool_search arguments leniently: models send a
// bare string, a number for the query, a limit as a string or a float,
// unknown fields, text after the object or a second object, the object
// encoded once more as a JSON string, a list of queries. The query is
// what matters; a limit that is not a number is ignored. Arguments that
// are not JSON are the query.
func parseSearchArgs(raw string) searchArgs {
	v, ok := firstJSON(raw)
	if !ok {
		return searchArgs{Query: strings.TrimSpace(raw)}
	}
	a := argsOf(v, 0)
	a.Query = strings.TrimSpace(a.Query)
	return a
}

// firstJSON returns the JSON in s: all of s, or the object s starts with
// when text follows it. Read whole, such arguments would be the query as
// JSON text, and its words ("query", "limit") would match tools named
// after them.
// Only an object is read out of a longer text: "null pointer" or
// "404 page" is a query that starts like JSON.
func firstJSON(s string) (gjson.Result, bool) {
	if gjson.Valid(s) {
		return gjson.Parse(s), true
	}
	var first json.RawMessage
	if err := json.NewDecoder(strings.NewReader(s)).Decode(&first); err != nil {
		return gjson.Result{}, false
	}
	v := gjson.ParseBytes(first)
	return v, v.IsObject()
}

// maxArgsDepth bounds how deep argsOf looks into nested lists and wrapped
// objects: a model's arguments nest one or two levels; a megabyte of
// brackets must not cost a megabyte of stack.
const maxArgsDepth = 4

// querySep joins the parts of a query sent as a list: a seam the
// selector's multi-part ranking (decompose, when on) splits on, so each
// part can bring its own best tools.
const querySep = "; "

// argsOf reads the search arguments in v: an object's query and limit; a
// string's text, or the object it encodes; a list's parts, each read the
// same way, joined into one query; a number's text. A model that sends
// a list asks for all of it in one search: answering with an error would
// cost it a round.
func argsOf(v gjson.Result, depth int) searchArgs {
	var a searchArgs
	if depth > maxArgsDepth {
		return a
	}
	switch {
	case v.IsObject():
		q := v.Get("query")
		if !q.Exists() && depth == 0 {
			// The arguments themselves only: an object in a list of
			// queries is read by its query alone.
			q = onlyText(v)
		}
		// An object for the query is none: which of its fields is the
		// query would be a guess.
		if !q.IsObject() {
			a.Query = argsOf(q, depth+1).Query
		}
		if l := v.Get("limit"); l.Type == gjson.Number {
			a.Limit = int(min(max(l.Float(), 0), maxSearchLimit))
		} else if n, err := strconv.Atoi(strings.TrimSpace(l.String())); err == nil && l.Type == gjson.String {
			a.Limit = min(max(n, 0), maxSearchLimit)
		}
	case v.IsArray():
		var parts []string
		for _, e := range v.Array() {
			if q := strings.TrimSpace(argsOf(e, depth+1).Query); q != "" {
				parts = append(parts, q)
			}
		}
		a.Query = strings.Join(parts, querySep)
	case v.Type == gjson.String:
		if inner, ok := firstJSON(strings.TrimSpace(v.Str)); ok && inner.IsObject() {
			// The same arguments, encoded once more: read at the same
			// depth, as the object they are. Each object's query is read
			// a level deeper, so the bound still holds.
			return argsOf(inner, depth)
		}
		a.Query = v.Str
	case v.Type == gjson.Number:
		a.Query = v.String()
	}
	return a
}

// onlyText returns the one member of the object v, limit aside, that is
// text (a string, or a list of strings), or nothing when there is no such
// member or more than one. Small models rename parameters ({"q": ...},
// {"keywords": ...}, {"search_query": ...}, {"queries": [...]}); an
// error answering them would cost a round, and an object with a single
// text leaves no doubt which is the query.
func onlyText(v gjson.Result) gjson.Result {
	var text gjson.Result
	n := 0
	v.ForEach(func(k, m gjson.Result) bool {
		if k.Str == "limit" || !isText(m) {
			return true
		}
		text, n = m, n+1
		return n < 2
	})
	if n != 1 {
		return gjson.Result{}
	}
	return text
}

// isText reports whether v is a string or a non-empty list of strings.
func isText(v gjson.Result) bool {
	if v.Type == gjson.String {
		return true
	}
	if !v.IsArray() {
		return false
	}
	n, all := 0, true
	v.ForEach(func(_, e gjson.Result) bool {
		n++
		all = e.Type == gjson.String
		return all
	})
	return n > 0 && all
}

// hasWord reports whether a query has a letter or a digit: one of only
// zero-width spaces or punctuation finds nothing, and searched it would
// list arbitrary tools as found.
func hasWord(q string) bool {
	return strings.IndexFunc(q, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}
