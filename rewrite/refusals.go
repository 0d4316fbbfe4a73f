package rewrite

import (
	"strings"

	"github.com/tidwall/gjson"
)

// RefusedMember reports whether body, an upstream's error body, refuses
// the request member member, in one of the shapes that name the member at
// fault: OpenAI's error.param ("Unknown parameter: 'stream_options'."), a
// pydantic detail's loc (["body","stream_options","include_usage"]; Mistral,
// vLLM), or, without either, a message that calls the quoted member
// unknown or unsupported (Groq: "property 'reasoning' is unsupported").
// Finding the member anywhere in the body is not enough: an error about
// another parameter may quote a value the client sent, and the client
// chooses that value. It reads the body only: whether the answer's status
// is a refusal's is the caller's to judge. It does not validate body.
func RefusedMember(body []byte, member string) bool {
	root := gjson.ParseBytes(body)
	if p := root.Get("error.param"); p.Type == gjson.String && p.Str != "" {
		return p.Str == member || strings.HasPrefix(p.Str, member+".")
	}
	for _, path := range []string{"detail", "message.detail", "error.message.detail"} {
		hit := false
		root.Get(path).ForEach(func(_, d gjson.Result) bool {
			d.Get("loc").ForEach(func(_, l gjson.Result) bool {
				hit = l.Type == gjson.String && l.Str == member
				return !hit
			})
			return !hit
		})
		if hit {
			return true
		}
	}
	msg := strings.ToLower(root.Get("error.message").String())
	if msg == "" {
		msg = strings.ToLower(root.Get("message").String())
	}
	quoted := strings.Contains(msg, "'"+member+"'") || strings.Contains(msg, `"`+member+`"`)
	return quoted && (strings.Contains(msg, "unknown") || strings.Contains(msg, "unsupported") ||
		strings.Contains(msg, "unrecognized") || strings.Contains(msg, "not permitted"))
}

// ExtrasEchoer is the capability of a dialect whose gateway rounds send a
// provider's members back in their assistant messages (Round.Extra read as
// members), which an upstream may refuse (Groq: "property 'reasoning' is
// unsupported" for the reasoning it sent itself). The proxy finds it by
// type assertion. Only Chat has it: a Responses or Messages round's Extra
// is its output items or content blocks, the round itself, which Build
// always sends, and whose keys ("type", "id") every error body names.
// Read as members, they would make any refusal of a later round go twice.
type ExtrasEchoer interface {
	// RefusedExtras reports whether body, an upstream's error body,
	// refuses one of the members the rounds' Extra echoed
	// (RefusedMember).
	RefusedExtras(body []byte, rounds []Round) bool
}
