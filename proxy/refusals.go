package proxy

import (
	"bytes"
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

// refusedMessageExtras reports whether err is the upstream refusing a
// provider member the gateway echoed in its own rounds' assistant
// messages (Groq: "property 'reasoning' is unsupported" for the reasoning
// it sent itself); if so, req is marked to be built without them and the
// model remembered, so the round can be sent again and later turns go
// without. The rounds' text and calls are the upstream's to read either
// way.
func (g *Gateway) refusedMessageExtras(req *rewrite.Request, rounds []rewrite.Round, err error) bool {
	if req.NoMessageExtras {
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
