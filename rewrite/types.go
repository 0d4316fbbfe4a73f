package rewrite

import "github.com/tidwall/gjson"

// The types of a turn that every dialect shares: the calls the model
// made, the rounds the gateway answered itself, a response as the loop
// reads it, and what the client's response takes from the whole turn.

// Call is one tool call the model made.
type Call struct {
	ID        string
	Name      string
	Arguments string
	// Extra is the call's other members as the upstream sent them (JSON
	// members without braces, e.g. Gemini's thought signature), so the
	// model gets its own call back whole when the gateway answers it.
	Extra string
}

// ToolResult answers one call inside the gateway (tool_search, or a refusal
// of a denied tool).
type ToolResult struct {
	CallID  string
	Content string
}

// Round is one exchange the gateway handled itself: what the model said and
// the answers the gateway gave to its calls.
type Round struct {
	Content string // the assistant's text of that round, if any
	// ContentParts is the round's content when the model wrote it as an
	// array of parts (raw JSON; Magistral's thinking and text parts): it
	// goes back upstream as the array it was, which Content, the text of
	// its text parts, would flatten.
	ContentParts string
	// Extra is the assistant message's other members (JSON members
	// without braces): reasoning a provider requires back with the calls
	// it led to (DeepSeek's reasoning_content, OpenRouter's
	// reasoning_details), a refusal.
	Extra   string
	Calls   []Call
	Results []ToolResult
	// Logprobs is the round's choices.0.logprobs.content array (raw JSON),
	// when the client asked for logprobs: the tokens of Content, which
	// lead the client's answer as Content does (Turn.Logprobs).
	Logprobs string
	// Annotations is the message's annotations array (raw JSON; the
	// url_citations of a web-search model), offsets into Content: they
	// go to the client with the text (Turn.Annotations). The upstream
	// gets them back in Extra, as they came.
	Annotations string
}

// Response is what the gateway reads from a non-streamed upstream
// response, in any dialect (Dialect.ParseResponse); the members that
// name a Chat Completions path are Chat's alone.
type Response struct {
	Body         []byte // the upstream's body, as it came
	ID           string
	Created      int64
	Content      string
	ContentParts string // the content when it is an array of parts, as Round.ContentParts
	Extra        string // the message's other members, as Round.Extra
	Calls        []Call
	FinishReason string
	Usage        gjson.Result
	Logprobs     string // choices.0.logprobs.content, raw; "" when absent or null
	Annotations  string // choices.0.message.annotations, raw; "" when not an array
	// PromptFilter is prompt_filter_results, raw: Azure's verdicts on the
	// round's prompt; "" when absent.
	PromptFilter string
	// Awaits is true when the output holds an item other than a function
	// call that waits for the client's reply (a Responses custom tool's
	// call, a computer or shell action, an MCP approval request): the
	// round is the client's, whatever its function calls are.
	Awaits bool
}

// Turn is what the client's response takes from the whole turn rather
// than from the round that ends it.
type Turn struct {
	// Keep reports whether the client gets a call (its own tools' calls).
	Keep func(Call) bool
	// Usage replaces the round's usage when not nil: the sum over rounds.
	Usage []byte
	// ID and Created, when ID is not empty, replace the round's: the
	// first round's, so the turn reads as one completion.
	ID      string
	Created int64
	// Text is what the rounds the gateway answered itself said before
	// this one ("Let me look that up."); it leads the message's content,
	// as it led the streamed answer.
	Text string
	// Logprobs are the content logprobs of the rounds that said Text (raw
	// JSON arrays, in order): they lead the answer's, as Text leads its
	// content, so the tokens and their logprobs stay one to one.
	Logprobs []string
	// Annotations are the annotations of the rounds that said Text (raw
	// JSON arrays, in order), each already shifted to where its round's
	// text stands in Text (ShiftAnnotations): they lead the answer's,
	// whose own are shifted past Text.
	Annotations []string
	// Rounds are the rounds the gateway answered itself: a dialect whose
	// API requires the reasoning that began a turn back with its calls
	// (Messages) takes it from them when the last round has none.
	Rounds []Round
	// PromptFilter, when not empty, replaces the round's
	// prompt_filter_results: the first round's, whose prompt is the
	// client's (a later round's judges the gateway's search too), as a
	// stream's client gets it.
	PromptFilter string
	// Capped ends the answer as the API ends a response its output cap
	// cut short (Chat's finish_reason length, the Responses API's status
	// incomplete for max_output_tokens, the Messages API's stop_reason
	// max_tokens): the rounds spent the cap the client set before the
	// gateway could ask for its answer (Request.OutputRoom).
	Capped bool
	// Tools is the client's tools array as it sent it (Request.ToolsRaw):
	// an answer that echoes its request's tools (the Responses API's)
	// echoes these, not tool_search and the active set the round was
	// offered. Empty leaves the round's.
	Tools string
}
