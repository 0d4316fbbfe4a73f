package rewrite

import (
	"bytes"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// noCallOutput begins the message of the Responses API's 400 for an input
// that lacks the output of a function call it holds or chains from
// ("No tool output found for function call call_abc.").
const noCallOutput = "No tool output found for function call"

// errMessage is the path of an OpenAI-shaped error body's message.
const errMessage = "error.message"

// MissingCallOutput reports whether body, an upstream's error body, is
// the Responses API's refusal of an input without the output of one of
// its function calls. It looks for the message's words anywhere in body,
// as the API documents no code for it; whether the status is a 400 is
// the caller's to judge. It does not validate body.
func MissingCallOutput(body []byte) bool {
	return bytes.Contains(body, []byte(noCallOutput))
}

// NoteErrorMessage returns body, an OpenAI-shaped error body, with note
// appended to its error.message; ok is false, and body nil, when the body
// has no string message to append to or cannot be edited. It does not
// validate body.
func NoteErrorMessage(body []byte, note string) (noted []byte, ok bool) {
	msg := gjson.GetBytes(body, errMessage)
	if msg.Type != gjson.String {
		return nil, false
	}
	noted, err := sjson.SetBytes(body, errMessage, msg.String()+note)
	if err != nil {
		return nil, false
	}
	return noted, true
}
