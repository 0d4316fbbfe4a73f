package rewrite

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// chatDone is the data of the event that ends a Chat Completions stream.
const chatDone = "[DONE]"

// Event is one chat.completion.chunk of a stream. Its strings alias Data.
type Event struct {
	Data []byte
	// End is true for the event that ends the stream ([DONE]); nothing
	// else is set then.
	End     bool
	ID      string
	Model   string
	Created int64
	// SystemFingerprint and ServiceTier are the chunk's, when it has them:
	// the gateway's own chunks repeat the upstream's (ChunkHead).
	SystemFingerprint string
	ServiceTier       string
	// Choice is the choice index the delta belongs to; -1 when the chunk
	// carries no choice (the usage chunk).
	Choice int64
	// Role is true when the delta has a role (a string; a null is none).
	Role bool
	// Text is true when the delta carries anything for the client besides
	// the role and tool calls: content, a refusal, reasoning text.
	Text bool
	// Thought is true when all the delta's Text is reasoning
	// (reasoningKey): a relay holds it until the round shows what it led
	// to.
	Thought bool
	// Details is one more than the highest index of the delta's
	// reasoning_details (OpenRouter's), 0 when it has none.
	Details int64
	// Content is the delta's text content, if any: when the content is an
	// array of parts (Mistral's Magistral: thinking and text parts), the
	// text of its text parts, and ContentParts the array itself.
	Content      string
	ContentParts string
	// Delta is the choice's delta object; Extra is true when it has a
	// member other than role, content and tool_calls that is not null
	// (reasoning text, a refusal), which a relay keeps with Members.
	Delta  gjson.Result
	Extra  bool
	Calls  []CallDelta
	Finish string
	Usage  gjson.Result
	// Error is the chunk's error member when it reports one: an object
	// (OpenAI's, OpenRouter's mid-stream error) or a non-empty string.
	// A null is none: servers that write every member of their chunk
	// type send "error": null on chunks that are fine, and reading it as
	// an error would end their streams after the first chunk.
	Error gjson.Result

	choice gjson.Result // the first choice, for Annotation
}

// CallDelta is one streamed fragment of a tool call. Name and ID usually
// arrive in the first fragment of a call, Args in the following ones.
type CallDelta struct {
	Index int64 // -1 when the fragment has none (Gemini sends none)
	ID    string
	Name  string
	Args  string
	Raw   string
	// Extra is true when the fragment has a member other than index, id,
	// type and function that is not null (Gemini's thought signature).
	Extra bool
}

// chunkKeys are the top-level members ParseEvent reads, in the order of
// its values.
var chunkKeys = []string{"id", "model", "created", "usage", "error", "choices", "system_fingerprint", "service_tier"}

// ParseEvent implements EventWriter: it reads one chunk into ev, which it
// resets first: a relay parses every event of a stream into one Event,
// whose Calls keep their capacity, so parsing an event allocates no
// Event. It returns an error for data that is not a JSON object; the
// caller decides whether that ends the stream.
func (Chat) ParseEvent(data []byte, ev *Event) error {
	*ev = Event{Data: data, Choice: -1, Calls: ev.Calls[:0]}
	if string(data) == chatDone {
		ev.End, ev.Choice = true, 0
		return nil
	}
	if !gjson.ValidBytes(data) {
		return badResponse("stream chunk is not valid JSON")
	}
	root := gjson.Parse(view(data))
	if !root.IsObject() {
		return badResponse("stream chunk is not a JSON object")
	}
	var top [8]gjson.Result
	firstValues(root, chunkKeys, top[:])
	ev.ID, ev.Model, ev.Created, ev.Usage = top[0].String(), top[1].String(), top[2].Int(), top[3]
	if e := top[4]; e.IsObject() || e.Type == gjson.String && e.Str != "" {
		ev.Error = e
	}
	ev.SystemFingerprint, ev.ServiceTier = top[6].String(), top[7].String()
	var ch gjson.Result
	if choices := top[5]; choices.IsArray() {
		choices.ForEach(func(_, c gjson.Result) bool { ch = c; return false })
	} else {
		ch = choices.Get("0")
	}
	if !ch.Exists() && top[5].Exists() {
		// A first "choices" without a first element: Get reads on to a
		// later "choices" key (duplicate keys) that has one, and so must
		// this, or the chunk would be read as having no choice.
		ch = root.Get("choices.0")
	}
	if !ch.Exists() {
		return nil
	}
	ev.choice = ch
	var cf [3]gjson.Result
	firstValues(ch, []string{"index", "finish_reason", "delta"}, cf[:])
	ev.Choice, ev.Finish = cf[0].Int(), cf[1].String()
	delta := cf[2]
	ev.Delta = delta
	var said, thought bool // the delta has text for the client; reasoning
	delta.ForEach(func(k, v gjson.Result) bool {
		switch k.String() {
		case "role":
			// A role is a string: SGLang writes "role": null in every
			// delta after the first, which, read as a role of its own,
			// would keep the client from getting the held "assistant" one.
			ev.Role = v.Type == gjson.String
		case "content":
			ev.Content, ev.ContentParts = contentOf(v)
			said = said || ev.Content != "" || ev.ContentParts != ""
		case "tool_calls":
			// Only an array holds calls: gjson's ForEach calls back once
			// over a null, and SGLang writes "tool_calls": null in every
			// delta, which, read as a nameless call, the relay would take
			// for the client's and end the turn on.
			if v.IsArray() {
				v.ForEach(func(_, c gjson.Result) bool {
					ev.Calls = append(ev.Calls, parseCallDelta(c))
					return true
				})
			}
		default:
			if v.Type != gjson.Null {
				ev.Extra = true
				// Text is what a client reads (reasoning, a refusal); a
				// number is a provider's bookkeeping (Together's token_id
				// on every chunk), which alone must not send a search
				// round's chunks to the client.
				if v.Type == gjson.String && v.Str != "" || (v.IsObject() || v.IsArray()) && len(v.Raw) > 2 {
					if reasoningKey(k.Str) {
						thought = true
						if k.Str == "reasoning_details" {
							ev.Details = detailsEnd(v)
						}
					} else {
						said = true
					}
				}
			}
		}
		return true
	})
	ev.Text, ev.Thought = said || thought, thought && !said
	return nil
}

// detailsEnd is one more than the highest "index" of the reasoning
// details in arr.
func detailsEnd(arr gjson.Result) int64 {
	var end int64
	if arr.IsArray() {
		arr.ForEach(func(_, d gjson.Result) bool {
			if i := d.Get("index"); i.Type == gjson.Number && i.Int() >= end {
				end = i.Int() + 1
			}
			return true
		})
	}
	return end
}

// ShiftDetails returns details, a raw JSON array of a delta's
// reasoning_details, with every numeric "index" moved on by n: a later
// round's, past the indexes the client has from earlier rounds, which an
// accumulator merging details by index would otherwise join to them.
// details is returned as it is when n is 0 or nothing moves.
func shiftDetails(details string, n int64) string {
	return shiftItems(details, n, gjson.Result.IsObject, "index")
}

// reasoningKey reports the delta members that carry a model's reasoning:
// DeepSeek's, vLLM's and SGLang's reasoning_content, OpenRouter's
// reasoning and reasoning_details.
func reasoningKey(k string) bool {
	return k == "reasoning_content" || k == "reasoning" || k == "reasoning_details"
}

// Annotation reports whether the chunk's choice carries a provider's
// annotation: a member other than index, delta, finish_reason and
// logprobs with a value, such as Azure's content_filter_results and
// content_filter_offsets. Azure's asynchronous filter sends these in
// chunks of their own, with an empty delta or none, after the text they
// judge; a relay that sends on only what has text would drop the
// verdicts a client must act on. It scans the choice again, so a relay
// asks only of a chunk it would otherwise drop.
func (ev *Event) Annotation() bool {
	found := false
	ev.choice.ForEach(func(k, v gjson.Result) bool {
		switch k.String() {
		case "index", "delta", "finish_reason", "logprobs":
			return true
		}
		found = hasValue(v)
		return !found
	})
	return found
}

// hasValue reports whether v is something: not null, not an empty
// object, array or string (Azure sends "content_filter_results": {} on
// chunks it has not judged).
func hasValue(v gjson.Result) bool {
	switch {
	case v.Type == gjson.Null || !v.Exists():
		return false
	case v.Type == gjson.String:
		return v.Str != ""
	case v.IsObject() || v.IsArray():
		some := false
		v.ForEach(func(_, _ gjson.Result) bool { some = true; return false })
		return some
	}
	return true
}

// AddExtra adds the delta's members other than role, content and
// tool_calls to ms.
func (ev *Event) AddExtra(ms *Members) { ms.Add(ev.Delta, messageKey) }

// AddExtra adds the fragment's members other than index, id, type and
// function to ms.
func (cd *CallDelta) AddExtra(ms *Members) { ms.Add(gjson.Parse(cd.Raw), callKey) }

// parseCallDelta reads one tool-call fragment in one pass over its members.
func parseCallDelta(c gjson.Result) CallDelta {
	cd := CallDelta{Index: -1, Raw: c.Raw}
	var seen uint8 // the first of a repeated key counts, as with Get
	c.ForEach(func(k, v gjson.Result) bool {
		var bit uint8
		switch k.String() {
		case "index":
			bit = 1
			if seen&bit == 0 {
				cd.Index = v.Int()
			}
		case "id":
			bit = 2
			if seen&bit == 0 {
				cd.ID = v.String()
			}
		case "function":
			bit = 4
			if seen&bit == 0 {
				cd.Name, cd.Args = v.Get("name").String(), v.Get("arguments").String()
			}
		case "type":
		default:
			cd.Extra = cd.Extra || v.Type != gjson.Null
		}
		seen |= bit
		return true
	})
	return cd
}

// firstValues sets vals[i] to the value of keys[i] in the object r, the
// first occurrence counting as with Get, in one pass over r's keys: a Get
// per key rescans r from its start each time, which measured as most of a
// relayed event's cost. A key r lacks leaves its value empty.
func firstValues(r gjson.Result, keys []string, vals []gjson.Result) {
	var got uint64 // bit i: keys[i] seen
	r.ForEach(func(k, v gjson.Result) bool {
		name := k.String()
		for i, key := range keys {
			if name == key {
				if got&(1<<i) == 0 {
					got |= 1 << i
					vals[i] = v
				}
				break // keys are distinct
			}
		}
		return true
	})
}

// EventEdit says how to change a chunk before the client sees it.
type EventEdit struct {
	// ID and Created replace the chunk's when ID is not empty.
	ID      string
	Created int64
	// Calls replaces the delta's tool_calls (raw JSON objects) when
	// SetCalls is true; an empty Calls removes the key.
	Calls    []string
	SetCalls bool
	// DropUsage removes a usage object riding on a content chunk; the
	// gateway sends one summed usage chunk of its own.
	DropUsage bool
	// DropRole removes the delta's role: a later round's, once the
	// client has had the turn's.
	DropRole bool
	// Finish replaces the choice's finish_reason when not empty; "null"
	// clears it, for a round the gateway continues.
	Finish string
	// ShiftAnnotations moves the delta's url_citation offsets on by this
	// many characters (ShiftAnnotations): a later round's, past the text
	// the earlier rounds relayed.
	ShiftAnnotations int
	// ShiftDetails moves the indexes of the delta's reasoning_details on
	// by this many (shiftDetails).
	ShiftDetails int64
}

// EditEvent implements EventWriter: it applies e to a chunk, and returns
// data itself when there is nothing to change.
func (Chat) EditEvent(data []byte, e EventEdit) ([]byte, error) {
	out := data
	var err error
	cloned := false
	clone := func() {
		if !cloned {
			out = append([]byte(nil), out...)
			cloned = true
		}
	}
	// gjson.Get on a view of out, not GetBytes, which copies the string
	// it finds: an allocation per relayed event, for a comparison.
	if e.ID != "" && gjson.Get(view(out), "id").String() != e.ID {
		clone()
		if out, err = sjson.SetBytes(out, "id", e.ID); err != nil {
			return nil, fmt.Errorf("setting chunk id: %w", err)
		}
		if out, err = sjson.SetBytes(out, "created", e.Created); err != nil {
			return nil, fmt.Errorf("setting chunk created: %w", err)
		}
	}
	if e.SetCalls {
		clone()
		const p = "choices.0.delta.tool_calls"
		if len(e.Calls) == 0 {
			out, err = sjson.DeleteBytes(out, p)
		} else {
			out, err = sjson.SetRawBytes(out, p, joinArray(e.Calls))
		}
		if err != nil {
			return nil, fmt.Errorf("rewriting chunk tool calls: %w", err)
		}
	}
	if e.Finish != "" {
		clone()
		const p = "choices.0.finish_reason"
		if e.Finish == "null" {
			out, err = sjson.SetRawBytes(out, p, []byte("null"))
		} else {
			out, err = sjson.SetBytes(out, p, e.Finish)
		}
		if err != nil {
			return nil, fmt.Errorf("rewriting chunk finish: %w", err)
		}
	}
	if e.DropRole {
		clone()
		if out, err = sjson.DeleteBytes(out, "choices.0.delta.role"); err != nil {
			return nil, fmt.Errorf("removing chunk role: %w", err)
		}
	}
	if e.ShiftAnnotations != 0 {
		const p = "choices.0.delta.annotations"
		if an := gjson.Get(view(out), p); an.IsArray() {
			if shifted := ShiftAnnotations(an.Raw, e.ShiftAnnotations); shifted != an.Raw {
				clone()
				if out, err = sjson.SetRawBytes(out, p, []byte(shifted)); err != nil {
					return nil, fmt.Errorf("shifting chunk annotations: %w", err)
				}
			}
		}
	}
	if e.ShiftDetails != 0 {
		const p = "choices.0.delta.reasoning_details"
		if ds := gjson.Get(view(out), p); ds.IsArray() {
			if shifted := shiftDetails(ds.Raw, e.ShiftDetails); shifted != ds.Raw {
				clone()
				if out, err = sjson.SetRawBytes(out, p, []byte(shifted)); err != nil {
					return nil, fmt.Errorf("shifting chunk reasoning details: %w", err)
				}
			}
		}
	}
	if e.DropUsage && gjson.Get(view(out), "usage").Exists() {
		clone()
		if out, err = sjson.DeleteBytes(out, "usage"); err != nil {
			return nil, fmt.Errorf("removing chunk usage: %w", err)
		}
	}
	return out, nil
}

// reindex returns a tool-call delta with its index set to i.
func reindex(raw string, i int) string {
	out, err := sjson.Set(raw, "index", i)
	if err != nil {
		return raw
	}
	return out
}

// callDeltaJSON builds a complete tool-call delta, for a call whose
// fragments were held back and must be sent as one.
func callDeltaJSON(index int, id, name, args string) string {
	w := struct {
		Index int `json:"index"`
		wireCall
	}{Index: index}
	w.ID, w.Type = id, "function"
	w.Function.Name, w.Function.Arguments = name, args
	b, _ := json.Marshal(w)
	return string(b)
}

// ChunkHead is the identity a turn's chunks share. The gateway's own
// chunks (a finish, the summed usage) carry the upstream's: the SDKs'
// stream accumulators take these fields from the last chunk they read,
// which is the gateway's usage chunk, so a missing fingerprint or service
// tier there would erase the upstream's.
type ChunkHead struct {
	ID                string
	Created           int64
	Model             string
	SystemFingerprint string // omitted when empty, as providers without one do
	ServiceTier       string // omitted when empty
}

// appendChunkHead starts a chat.completion.chunk object with h's fields;
// the caller appends the rest and the closing brace.
func appendChunkHead(b []byte, h ChunkHead) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendQuote(b, h.ID)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, h.Created, 10)
	b = append(b, `,"model":`...)
	b = strconv.AppendQuote(b, h.Model)
	if h.ServiceTier != "" {
		b = append(b, `,"service_tier":`...)
		b = strconv.AppendQuote(b, h.ServiceTier)
	}
	if h.SystemFingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = strconv.AppendQuote(b, h.SystemFingerprint)
	}
	return b
}

// usageEvent builds the one usage chunk the client gets when it asked for
// stream usage: no choices, the summed usage.
func usageEvent(h ChunkHead, usage []byte) []byte {
	b := appendChunkHead(nil, h)
	b = append(b, `,"choices":[],"usage":`...)
	if len(usage) == 0 {
		usage = []byte("null")
	}
	b = append(b, usage...)
	return append(b, '}')
}

// finishEvent builds a finish chunk for choice 0, used when the gateway must
// end a turn itself (for example after swallowing the upstream's finish).
func finishEvent(h ChunkHead, reason string) []byte {
	b := appendChunkHead(nil, h)
	b = append(b, `,"choices":[{"index":0,"delta":{},"finish_reason":`...)
	b = strconv.AppendQuote(b, reason)
	return append(b, `}]}`...)
}

func joinArray(items []string) []byte {
	n := 2
	for _, it := range items {
		n += len(it) + 1
	}
	return appendArray(make([]byte, 0, n), items)
}

// appendArray appends the JSON array of items (raw JSON values) to b.
func appendArray(b []byte, items []string) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}
