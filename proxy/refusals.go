package proxy

import (
	"errors"
	"net/http"

	"github.com/toolgate/toolgate/rewrite"
)

// refused reports whether err is an upstream's refusal of the request
// member member: a 400, or the 422 of servers that validate with pydantic
// (Mistral, vLLM), whose body names the member at fault
// (rewrite.RefusedMember).
func refused(err error, member string) bool {
	body, ok := refusalBody(err)
	return ok && rewrite.RefusedMember(body, member)
}

// refusalBody returns the body of err when it is an upstream's answer
// with a status that refuses a request member: 400, or 422.
func refusalBody(err error) ([]byte, bool) {
	var se *statusError
	if !errors.As(err, &se) {
		return nil, false
	}
	if code := se.resp.StatusCode; code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
		return nil, false
	}
	return se.body, true
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
// Only a dialect that echoes provider members in its rounds
// (rewrite.ExtrasEchoer, Chat Completions) can have them refused: the
// other dialects' rounds are sent whole.
func (g *Gateway) refusedMessageExtras(d rewrite.Dialect, req *rewrite.Request, rounds []rewrite.Round, err error) bool {
	e, ok := d.(rewrite.ExtrasEchoer)
	if !ok || req.NoMessageExtras {
		return false
	}
	if body, ok := refusalBody(err); !ok || !e.RefusedExtras(body, rounds) {
		return false
	}
	req.NoMessageExtras = true
	return true
}

// knownRefusals marks req to be built without what its model's upstream
// has refused before (refusedUsageRequest, refusedMessageExtras).
func (g *Gateway) knownRefusals(req *rewrite.Request) {
	if !req.IncludeUsage && g.noUsage.Contains(req.Model) {
		req.NoUsageRequest = true
	}
	req.NoMessageExtras = g.noExtras.Contains(req.Model)
}
