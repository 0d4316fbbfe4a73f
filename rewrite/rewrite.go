// Package rewrite holds pure functions over request and response bytes, one
// dialect per API (chat.go and chatrequest.go: OpenAI Chat Completions;
// responses.go and responsesanswer.go: the Responses API; messages.go:
// Anthropic's Messages API), their streams in files of their own. It reads with
// gjson and writes with sjson so unknown fields pass through byte for
// byte. It must not do I/O, hold state beyond one stream's reader (which
// its caller owns), or rank tools.
package rewrite
