package proxy

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
)

// refused reports whether err is an upstream's refusal of a request
// member named in its error body: a 400, or the 422 of servers that
// validate with pydantic (Mistral, vLLM).
func refused(err error, member string) bool {
	var se *statusError
	if !errors.As(err, &se) {
		return false
	}
	code := se.resp.StatusCode
	return (code == http.StatusBadRequest || code == http.StatusUnprocessableEntity) &&
		bytes.Contains(se.body, []byte(member))
}

// refusedUsageRequest reports whether err is the upstream refusing the
// stream_options member that Build added to a stream's req (some
// OpenAI-compatible servers answer 400 "Unknown parameter:
// 'stream_options'", Mistral 422 "Extra inputs are not permitted"); if
// so, req is marked to be built without it and the model remembered, so
// the turn can be sent again and later turns go without. The client's own
// stream_options are its to keep: a refusal of those is the client's
// error. The turn's usage then comes from whatever the upstream reports
// unasked.
func (g *Gateway) refusedUsageRequest(req *rewrite.Request, err error) bool {
	if !req.Stream || req.IncludeUsage || req.NoUsageRequest || !refused(err, "stream_options") {
		return false
	}
	req.NoUsageRequest = true
	g.noUsage.Add(strings.Clone(req.Model), struct{}{}) // req.Model aliases the body
	g.logger().Warn("the upstream refuses stream_options; streaming without usage for this model", "model", req.Model)
	return true
}

// refusedMessageExtras reports whether err is the upstream refusing a
// provider member the gateway echoed in its own rounds' assistant
// messages (Groq: "property 'reasoning' is unsupported" for the reasoning
// it sent itself); if so, req is marked to be built without them and the
// model remembered, so the round can be sent again and later turns go
// without. The rounds' text and calls are the upstream's to read either
// way.
//
// Only Chat Completions rounds hold such members: a Responses or Messages
// round's Extra is its output items or content blocks, the round itself,
// which Build always sends, and whose keys ("type", "id") every error body
// names. Read as members, they made any refusal of a later round go twice
// and marked the model to lose its reasoning on the Chat route too.
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
			g.noExtras.Add(strings.Clone(req.Model), struct{}{}) // req.Model aliases the body
			g.logger().Warn("the upstream refuses the members its model added to its messages; sending the gateway's rounds without them for this model", "model", req.Model)
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

// sendRound makes a round's upstream call with o, and sends it again,
// built anew with tools, without what the gateway added that the upstream
// refuses. Each refusal flips a flag of t.req once: at most two resends.
// The round counts as one call, as a round retried after a 5xx does: the
// upstream answered its refused attempts at once and billed none.
func (t *turn) sendRound(ctx context.Context, in *http.Request, o sendOptions, tools []string) (*http.Response, error) {
	if t.rep != nil {
		t.rep.calls++
	}
	resp, err := t.send(ctx, in, o)
	for err != nil && (t.g.refusedUsageRequest(t.req, err) || t.g.refusedMessageExtras(t.d, t.req, t.rounds, err)) {
		if o.body, err = t.d.Build(t.req, tools, t.rounds); err == nil {
			resp, err = t.send(ctx, in, o)
		}
	}
	if err == nil {
		t.accept()
	}
	return resp, err
}
