package rewrite

import (
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// JSON paths of the members that cap a request's output tokens.
const (
	pathMaxCompletionTokens = "max_completion_tokens" // Chat
	pathMaxTokens           = "max_tokens"            // Chat (the older name) and Messages
	respMaxOutputTokens     = "max_output_tokens"     // Responses
)

// respOutputFloor is the least max_output_tokens the Responses API takes
// ("integer below minimum value").
const respOutputFloor = 16

// OutputRoom returns what is left of OutputCap once the turn's rounds
// wrote used output tokens, and whether another round may be asked for
// with it: not when less is left than the API takes as a cap (the
// Responses API refuses a max_output_tokens under 16, the Messages API a
// max_tokens not above the thinking budget). The API would have stopped
// the client's one response there; the turn ends as that response would
// (Turn.Capped). A floor the client's own cap is under is not the
// upstream's, which took that cap (a compatible server that ignores the
// thinking budget), and is left out. Without a cap, left is 0 and ok
// true.
func (r *Request) OutputRoom(used int64) (left int64, ok bool) {
	if r.OutputCap <= 0 {
		return 0, true
	}
	floor := r.outputFloor
	if floor > r.OutputCap {
		floor = 1
	}
	left = r.OutputCap - used
	return left, left >= max(floor, 1)
}

// capOf reads a cap member's value: a positive integer, or 0 for none
// (what the upstream refuses stays the upstream's to refuse).
func capOf(v gjson.Result) int64 {
	if v.Type != gjson.Number || v.Int() <= 0 {
		return 0
	}
	return v.Int()
}

// lowerCap returns the lower of cap and the cap v sets, either one where
// the other is 0: a Chat request may carry both of its names.
func lowerCap(cap int64, v gjson.Result) int64 {
	if c := capOf(v); c > 0 && (cap == 0 || c < cap) {
		return c
	}
	return cap
}

// setOutputCap returns body with each member of paths that sets a cap
// (capOf) set to req.OutputLeft, when that is above 0; body as it is
// otherwise. A member the client left null stays null: written as a
// number, a max_tokens: null would reach a reasoning model that refuses
// max_tokens.
func setOutputCap(body []byte, req *Request, paths ...string) ([]byte, error) {
	if req.OutputLeft <= 0 {
		return body, nil
	}
	for _, p := range paths {
		if capOf(gjson.GetBytes(body, p)) == 0 {
			continue
		}
		var err error
		if body, err = sjson.SetBytes(body, p, req.OutputLeft); err != nil {
			return nil, fmt.Errorf("setting %s: %w", p, err)
		}
	}
	return body, nil
}
