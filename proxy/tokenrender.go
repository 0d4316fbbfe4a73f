package proxy

import (
	"strings"

	"github.com/tidwall/gjson"
)

// OpenAI does not bill a function tool as the JSON a client sends: the
// model reads it rendered as a TypeScript-like declaration (a comment with
// the description, then the parameters as a type), which drops the JSON's
// keys, quotes and schema words. On the bundled 183-tool catalog, sent
// compact, the JSON counts 22,177 o200k tokens and this rendering 17,112
// (OpenAI's cookbook formula for counting tools gives 16,642). The direct
// estimate adds the tools the gateway held back to a prompt the upstream
// counted, so it must count them as the upstream does (renderedTool), or
// it overstates what a direct request would have cost.

// renderedTool returns an OpenAI function tool (Chat Completions' nested
// or the Responses API's flat shape) as the model reads it, and false for
// any other tool (Anthropic's, with an input_schema, is read as JSON).
func renderedTool(raw string) (string, bool) {
	t := gjson.Parse(raw)
	if fn := t.Get("function"); fn.IsObject() {
		t = fn
	}
	name := t.Get("name")
	if name.Type != gjson.String || t.Get("input_schema").Exists() {
		return "", false
	}
	var b strings.Builder
	comment(&b, "", t.Get("description").String())
	b.WriteString("type ")
	b.WriteString(name.Str)
	b.WriteString(" = (")
	if params := t.Get("parameters"); params.Get("properties").IsObject() {
		b.WriteString("_: ")
		renderType(&b, params, "", 0)
	}
	b.WriteString(") => any;\n\n")
	return b.String(), true
}

// maxRenderDepth bounds how deep renderType follows nested schemas: a
// client's deeply nested (or hostile) schema costs no more than this.
const maxRenderDepth = 8

// renderType writes schema s as a TypeScript type: an object's properties
// one a line with their descriptions, an enum as a union of its values,
// an array as its items' type.
func renderType(b *strings.Builder, s gjson.Result, indent string, depth int) {
	if depth > maxRenderDepth {
		b.WriteString("any")
		return
	}
	if enum := s.Get("enum"); enum.IsArray() {
		for i, v := range enum.Array() {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(v.Raw)
		}
		return
	}
	typ := s.Get("type")
	if typ.IsArray() && len(typ.Array()) > 0 {
		typ = typ.Array()[0] // ["string","null"]: the first reads for all
	}
	switch typ.String() {
	case "string":
		b.WriteString("string")
	case "number", "integer":
		b.WriteString("number")
	case "boolean":
		b.WriteString("boolean")
	case "array":
		renderType(b, s.Get("items"), indent, depth+1)
		b.WriteString("[]")
	case "object", "":
		props := s.Get("properties")
		if !props.IsObject() {
			b.WriteString("object")
			return
		}
		required := map[string]bool{}
		for _, r := range s.Get("required").Array() {
			required[r.String()] = true
		}
		inner := indent + "  "
		b.WriteString("{\n")
		props.ForEach(func(k, v gjson.Result) bool {
			comment(b, inner, v.Get("description").String())
			b.WriteString(inner)
			b.WriteString(k.String())
			if !required[k.String()] {
				b.WriteByte('?')
			}
			b.WriteString(": ")
			renderType(b, v, inner, depth+1)
			b.WriteString(",\n")
			return true
		})
		b.WriteString(indent)
		b.WriteByte('}')
	default:
		b.WriteString("any")
	}
}

// comment writes text as // lines at indent, nothing when it is empty.
func comment(b *strings.Builder, indent, text string) {
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		b.WriteString(indent)
		b.WriteString("// ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
}
