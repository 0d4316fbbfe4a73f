package proxy

import (
	"errors"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
)

// refused reports whether err is an upstream's refusal of the request
// member member, a 400 or the 422 of servers that validate with pydantic
// (Mistral, vLLM), in one of the shapes that name the member at fault:
// OpenAI's error.param ("Unknown parameter: 'stream_options'."), a
// pydantic detail's loc (["body","stream_options","include_usage"]), or,
// without either, a message that calls the quoted member unknown or
// unsupported (Groq: "property 'reasoning' is unsupported"). Finding the
// member anywhere in the body is not enough: an error about another
// parameter may quote a value the client sent, and the client chooses
// that value.
func refused(err error, member string) bool {
	var se *statusError
	if !errors.As(err, &se) {
		return false
	}
	if code := se.resp.StatusCode; code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
		return false
	}
	body := gjson.ParseBytes(se.body)
	if p := body.Get("error.param"); p.Type == gjson.String && p.Str != "" {
		return p.Str == member || strings.HasPrefix(p.Str, member+".")
	}
	for _, path := range []string{"detail", "message.detail", "error.message.detail"} {
		hit := false
		body.Get(path).ForEach(func(_, d gjson.Result) bool {
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
	msg := strings.ToLower(body.Get("error.message").String())
	if msg == "" {
		msg = strings.ToLower(body.Get("message").String())
	}
	quoted := strings.Contains(msg, "'"+member+"'") || strings.Contains(msg, `"`+member+`"`)
	return quoted && (strings.Contains(msg, "unknown") || strings.Contains(msg, "unsupported") ||
		strings.Contains(msg, "unrecognized") || strings.Contains(msg, "not permitted"))
}

// refusedUsageRequest reports whether err is the upstream refusing the
// stream_options member that Build added to a stream's req (some
// OpenAI-compatible servers answer 400 "Unknown parameter:
// 'stream_options'", Mistral 422 "Extra inputs are not permitted"); if
// so, req is marked to be built without it, so the turn can be sent
// again (sendRound remembers the model once that resend is answered).
// The client's own stream_options are its to keep: a refusal of those is
// the client's error. The turn's usage then comes from whatever the
// upstream reports unasked.
func (g *Gateway) refusedUsageRequest(req *rewrite.Request, err error) bool {
	if !req.Stream || req.IncludeUsage || req.NoUsageRequest || !refused(err, "stream_options") {
		return false
	}
	req.NoUsageRequest = true
	return true
}

// refusedMessageExtras reports whether err is the upstream refusing a
// provider member the gateway echoed in its own rounds' assistant
// messages (Groq: "property 'reasoning' is unsupported" for the reasoning
// it sent itself); if so, req is marked to be built without them, so the
// round can be sent again (sendRound remembers the model once that
// resend is answered). The rounds' text and calls are the upstream's to
// read either way.
//
// Only Chat Completions rounds hold such members: a Responses or Messages
// round's Extra is its output items or content blocks, the round itself,
// which Build always sends, and whose keys ("type", "id") every error body
// names. Read as members, they would make any refusal of a later round go
// twice and mark the model to lose its reasoning on the Chat route too.
func (g *Gateway) refusedMessageExtras(d rewrite.Dialect, req *rewrite.Request, rounds []rewrite.Round, err error) bool {
	if _, chat := d.(rewrite.Chat); !chat || req.NoMessageExtras {
		return false
	}
	for _, r := range rounds {
		if r.Extra == "" {
			continue
		}
		hit := false
		gjson.Parse("{" + r.Extra + "}").ForEach(func(k, _ gjson.Result) bool {
			hit = refused(err, k.Str)
			return !hit
		})
		if hit {
			req.NoMessageExtras = true
			return true
		}
	}
	return false
}

// knownRefusals marks req to be built without what its model's upstream
// has refused before (refusedUsageRequest, refusedMessageExtras).
func (g *Gateway) knownRefusals(req *rewrite.Request) {
	if !req.IncludeUsage && g.noUsage.Contains(req.Model) {
		req.NoUsageRequest = true
	}
	req.NoMessageExtras = g.noExtras.Contains(req.Model)
}
