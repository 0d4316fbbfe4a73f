package rewrite

import (
	"strings"

	"github.com/tidwall/gjson"
)

// Members assembles the members of an object that a stream sends in pieces
// (a delta's reasoning text, a tool call's provider fields) the way the
// OpenAI SDKs assemble a streamed message, so that the gateway can hand a
// model its own message back as a client would:
//
//   - a string continues the same member's earlier text;
//   - an object is merged member by member;
//   - an array of objects that carry an "index" merges each into the
//     element of that index; any other array is appended to;
//   - any other value, and "index", "type" and "id", replace the last;
//   - null never replaces anything.
//
// It keeps copies of what it is given, so the pieces may alias a reused
// buffer. The zero value is empty and ready.
type Members struct{ m []field }

type field struct {
	key string // the key's JSON text, quotes included
	v   piece
}

type pieceKind uint8

const (
	pieceRaw    pieceKind = iota // a value kept as its JSON text
	pieceString                  // a string, its escaped text between the quotes
	pieceObject
	pieceArray
)

type piece struct {
	kind  pieceKind
	text  []byte   // pieceRaw: the JSON; pieceString: the escaped text
	obj   *Members // pieceObject
	elems []*piece // pieceArray
	index int64    // an array element's "index" member, or -1
}

// Add merges the members of obj, skipping those skip reports (nil: none).
// A value that is not an object adds nothing.
func (ms *Members) Add(obj gjson.Result, skip func(key string) bool) {
	if !obj.IsObject() {
		return
	}
	obj.ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.Null || (skip != nil && skip(k.Str)) {
			return true
		}
		for i := range ms.m {
			if ms.m[i].key == k.Raw {
				ms.m[i].v.merge(v, replaces(k.Str))
				return true
			}
		}
		ms.m = append(ms.m, field{key: strings.Clone(k.Raw), v: newPiece(v)})
		return true
	})
}

// Empty reports whether nothing has been added.
func (ms *Members) Empty() bool { return len(ms.m) == 0 }

// String returns the members as JSON object members, comma-separated and
// without braces ("" when empty), for splicing into an object.
func (ms *Members) String() string {
	if ms.Empty() {
		return ""
	}
	return string(ms.appendTo(nil))
}

func (ms *Members) appendTo(b []byte) []byte {
	for i, m := range ms.m {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(b, m.key...), ':')
		b = m.v.appendTo(b)
	}
	return b
}

// replaces reports the keys whose later values stand for the whole: the
// SDKs never concatenate an index or a type, some servers repeat a call's
// id in every fragment, and OpenRouter repeats a reasoning detail's format
// ("anthropic-claude-v1") in every chunk.
func replaces(key string) bool {
	return key == "index" || key == "type" || key == "id" || key == "format"
}

func newPiece(v gjson.Result) piece {
	switch {
	case v.Type == gjson.String:
		return piece{kind: pieceString, text: []byte(v.Raw[1 : len(v.Raw)-1])}
	case v.IsObject():
		p := piece{kind: pieceObject, obj: &Members{}}
		p.obj.Add(v, nil)
		return p
	case v.IsArray():
		p := piece{kind: pieceArray}
		p.appendElems(v)
		return p
	}
	return piece{kind: pieceRaw, text: []byte(v.Raw)}
}

func (p *piece) merge(v gjson.Result, replace bool) {
	switch {
	case replace:
	case p.kind == pieceString && v.Type == gjson.String:
		// JSON escapes never span a string's quotes, so two strings'
		// escaped texts join into the escaped text of their concatenation.
		p.text = append(p.text, v.Raw[1:len(v.Raw)-1]...)
		return
	case p.kind == pieceObject && v.IsObject():
		p.obj.Add(v, nil)
		return
	case p.kind == pieceArray && v.IsArray():
		p.appendElems(v)
		return
	}
	*p = newPiece(v)
}

// appendElems merges each element of the array v: an object with an
// "index" into the element of that index, anything else at the end.
func (p *piece) appendElems(v gjson.Result) {
	v.ForEach(func(_, e gjson.Result) bool {
		idx := int64(-1)
		if i := e.Get("index"); e.IsObject() && i.Type == gjson.Number {
			idx = i.Int()
			for _, old := range p.elems {
				if old.index == idx && old.kind == pieceObject {
					old.obj.Add(e, nil)
					return true
				}
			}
		}
		np := newPiece(e)
		np.index = idx
		p.elems = append(p.elems, &np)
		return true
	})
}

func (p *piece) appendTo(b []byte) []byte {
	switch p.kind {
	case pieceString:
		return append(append(append(b, '"'), p.text...), '"')
	case pieceObject:
		return append(p.obj.appendTo(append(b, '{')), '}')
	case pieceArray:
		b = append(b, '[')
		for i, e := range p.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.appendTo(b)
		}
		return append(b, ']')
	}
	return append(b, p.text...)
}

// withMembers returns the JSON object raw with members (JSON members
// without braces, as Members.String writes them) added at its end; raw
// when members is empty or raw is not an object.
func withMembers(raw, members string) string {
	raw = strings.TrimSpace(raw)
	if members == "" || len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return raw
	}
	body := strings.TrimSpace(raw[1 : len(raw)-1])
	if body == "" {
		return "{" + members + "}"
	}
	return "{" + body + "," + members + "}"
}
