package rewrite

import (
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// RetrievedResponse returns body, a Responses API response object the
// upstream stores for a turn's round, as the client knows its turn (GET
// /responses/{id}): under id, the one the client was shown, and without
// the function_call items whose call_id gateway reports as the gateway's
// own (nil: none). It expects valid JSON with an output array; it does
// not validate.
func RetrievedResponse(body []byte, id string, gateway func(callID string) bool) ([]byte, error) {
	body, err := sjson.SetBytes(body, "id", id)
	if err != nil {
		return nil, fmt.Errorf("setting the response's id: %w", err)
	}
	if gateway == nil {
		return body, nil
	}
	out := []byte{'['}
	gjson.GetBytes(body, respOutput).ForEach(func(_, it gjson.Result) bool {
		if it.Get("type").String() != "function_call" || !gateway(it.Get("call_id").String()) {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, it.Raw...)
		}
		return true
	})
	if body, err = sjson.SetRawBytes(body, respOutput, append(out, ']')); err != nil {
		return nil, fmt.Errorf("removing the gateway's calls from the response: %w", err)
	}
	return body, nil
}
