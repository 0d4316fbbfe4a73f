package rewrite

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The Responses dialect's answer side: reading an upstream response's
// output and writing the client's (the request side is responses.go).

// ParseResponse implements Dialect: the text of the output's messages,
// its function calls, whether another item waits for the client
// (Response.Awaits), and the whole output as the round's items
// (Response.Extra, without brackets), which Build sends back as they are.
func (Responses) ParseResponse(body []byte) (*Response, error) {
	if !gjson.ValidBytes(body) {
		return nil, badResponse("upstream response is not valid JSON")
	}
	root := gjson.Parse(view(body))
	out := root.Get(respOutput)
	if !root.IsObject() || !out.IsArray() {
		return nil, badResponse("upstream response has no output array")
	}
	r := &Response{
		Body:         body,
		ID:           root.Get("id").String(),
		Created:      root.Get("created_at").Int(),
		FinishReason: root.Get("status").String(),
		Usage:        root.Get("usage"),
	}
	var items []string
	r.Calls, r.Content, items, r.Awaits = readOutput(out)
	r.Extra = strings.Join(items, ",")
	return r, nil
}

// readOutput reads a response's output: its function calls, the text of
// its messages, its items (raw, by output index), and whether another
// item waits for the client's reply (awaitsClient).
func readOutput(out gjson.Result) (calls []Call, text string, items []string, awaits bool) {
	var b strings.Builder
	answered := map[string]bool{}
	out.ForEach(func(_, it gjson.Result) bool {
		items = append(items, it.Raw)
		switch typ := it.Get("type").String(); typ {
		case "function_call":
			calls = append(calls, outputCall(it))
		case "message":
			it.Get("content").ForEach(func(_, p gjson.Result) bool {
				if p.Get("type").String() == "output_text" {
					b.WriteString(p.Get("text").String())
				}
				return true
			})
		default:
			if strings.HasSuffix(typ, "_output") {
				answered[it.Get("call_id").String()] = true
			}
		}
		return true
	})
	out.ForEach(func(_, it gjson.Result) bool {
		awaits = awaitsClient(it, answered)
		return !awaits
	})
	return calls, b.String(), items, awaits
}

// clientCall reports whether an output item type besides function_call
// waits for the client's reply: the client runs the action (a custom
// tool, the computer, a shell, a patch, a client-executed tool search) and
// sends its output, or approves an MCP call. The upstream refuses a
// request that carries one of them without that reply ("No tool output
// found for custom tool call ..."), so a round with one is the client's.
func clientCall(typ string) bool {
	switch typ {
	case "custom_tool_call", "computer_call", "local_shell_call", "shell_call",
		"apply_patch_call", "mcp_approval_request", "tool_search_call":
		return true
	}
	return false
}

// awaitsClient reports whether output item it waits for the client's
// reply: a clientCall that the upstream did not run itself (a
// tool search it executed, a shell in its container: their outputs follow
// in the same response, answered by call_id).
func awaitsClient(it gjson.Result, answered map[string]bool) bool {
	if !clientCall(it.Get("type").String()) || it.Get("execution").String() == "server" {
		return false
	}
	id := it.Get("call_id")
	return !id.Exists() || !answered[id.String()]
}

// outputCall reads a function_call output item.
func outputCall(it gjson.Result) Call {
	return Call{ID: it.Get("call_id").String(), Name: it.Get("name").String(), Arguments: it.Get("arguments").String()}
}

// ClientResponse implements Dialect: the items of the gateway's rounds a
// stream shows, then the output without the function calls turn.Keep
// rejects (shownItems), and the turn's usage. The rounds' messages go only
// with turn.Text, which is empty for an answer that must be JSON; a
// message of turn.Text stands in where they have none. The id stays the last round's: a client that chains its
// next request with previous_response_id must name a response the
// upstream has, and that one's context holds the whole turn.
func (Responses) ClientResponse(r *Response, turn Turn) ([]byte, error) {
	root := gjson.ParseBytes(r.Body)
	var items []string
	withText := turn.Text != ""
	isMessage := func(it gjson.Result) bool { return it.Get("type").String() == "message" }
	for _, round := range turn.Rounds {
		items = shownItems(items, gjson.Parse("["+round.Extra+"]"), turn.Keep, func(it gjson.Result) bool {
			return withText || !isMessage(it)
		}, false)
	}
	if withText && !slices.ContainsFunc(items, func(raw string) bool { return isMessage(gjson.Parse(raw)) }) {
		items = append([]string{textMessageItem(turn.Text)}, items...)
	}
	rounds := len(items)
	out := root.Get(respOutput)
	items = shownItems(items, out, turn.Keep, nil, true)
	body := append([]byte(nil), r.Body...)
	var err error
	if rounds > 0 || len(items) < len(out.Array()) {
		arr := []byte{'['}
		for i, it := range items {
			if i > 0 {
				arr = append(arr, ',')
			}
			arr = append(arr, it...)
		}
		if body, err = sjson.SetRawBytes(body, respOutput, append(arr, ']')); err != nil {
			return nil, fmt.Errorf("rewriting the output: %w", err)
		}
	}
	if turn.Usage != nil {
		if body, err = sjson.SetRawBytes(body, "usage", turn.Usage); err != nil {
			return nil, fmt.Errorf("setting usage: %w", err)
		}
	}
	if body, err = echoTools(body, "tools", turn.Tools); err != nil {
		return nil, err
	}
	if turn.Capped {
		if body, err = incompleteAtCap(body, ""); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// echoTools returns b with the tools array at path set to tools, the
// client's own as it sent them, where the upstream echoed what the round
// offered: tool_search and the active set are the gateway's, and a
// client sees its own tools echoed direct. b is returned as it is when
// it echoes none, or those already.
func echoTools(b []byte, path, tools string) ([]byte, error) {
	if tools == "" {
		return b, nil
	}
	echoed := gjson.Get(view(b), path)
	if !echoed.IsArray() || echoed.Raw == tools {
		return b, nil
	}
	// The client's array can be hundreds of KB: spliced in where the
	// echo stands (gjson's Index 0 is "not known"), it is copied once,
	// where sjson copies it twice.
	if at := echoed.Index; at > 0 {
		out := make([]byte, 0, len(b)-len(echoed.Raw)+len(tools))
		return append(append(append(out, b[:at]...), tools...), b[at+len(echoed.Raw):]...), nil
	}
	out, err := sjson.SetRawBytes(b, path, []byte(tools))
	if err != nil {
		return nil, fmt.Errorf("echoing the client's tools: %w", err)
	}
	return out, nil
}

// incompleteAtCap returns b with the response at prefix ("" for b itself,
// "response." in a stream event) left as the API leaves one that
// max_output_tokens cut short.
func incompleteAtCap(b []byte, prefix string) ([]byte, error) {
	out, err := sjson.SetBytes(b, prefix+"status", "incomplete")
	if err == nil {
		out, err = sjson.SetRawBytes(out, prefix+"incomplete_details", []byte(`{"reason":"max_output_tokens"}`))
	}
	if err != nil {
		return nil, fmt.Errorf("ending the response incomplete: %w", err)
	}
	return out, nil
}

// shownItems appends to dst the items of one round's output a client sees,
// in order, by the rule the item relay streams them by (ShowOf):
// not the calls keep rejects; a reasoning item with the next item shown
// after it in the round, and at the end of the round that ends the turn
// (last), nowhere in a round of the gateway's; every other item that
// show accepts (nil accepts all).
func shownItems(dst []string, items gjson.Result, keep func(Call) bool, show func(gjson.Result) bool, last bool) []string {
	var held []string
	items.ForEach(func(_, it gjson.Result) bool {
		call, name, reasoning := itemKind(it)
		switch ShowOf(call, name, reasoning, keep) {
		case ShowNever:
		case ShowWithNext:
			held = append(held, it.Raw)
		default:
			if show == nil || show(it) {
				dst = append(append(dst, held...), it.Raw)
				held = held[:0]
			}
		}
		return true
	})
	if last {
		dst = append(dst, held...)
	}
	return dst
}

// textMessageItem is text as a Responses output message item, with an id
// of its own (msg_toolgate_ and a hash of the text): clients require one.
func textMessageItem(text string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	b := []byte(`{"type":"message","id":"msg_toolgate_` + strconv.FormatUint(h.Sum64(), 16) + `","role":"assistant","status":"completed","content":[{"type":"output_text","annotations":[],"text":`)
	b = appendString(b, text)
	return string(append(b, "}]}"...))
}
