package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// Sentinel errors of the proxy; writeError maps them to statuses.
var (
	// ErrUpstreamUnreachable: the upstream could not be connected to.
	ErrUpstreamUnreachable = errors.New("upstream unreachable")
	// ErrUpstreamTimeout: connect, first byte or idle timeout.
	ErrUpstreamTimeout = errors.New("upstream timed out")
	// ErrUpstreamBadResponse: a 2xx the gateway cannot read (not JSON,
	// truncated, or a stream cut mid-way).
	ErrUpstreamBadResponse = errors.New("upstream sent an unreadable response")
	// ErrBodyTooLarge: the request body exceeds the configured limit.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrBodyTimeout: the request body did not arrive in BodyTimeout.
	ErrBodyTimeout = errors.New("request body too slow")
	// ErrUnsupportedEncoding: the request body is in a Content-Encoding
	// the gateway cannot decode.
	ErrUnsupportedEncoding = errors.New("unsupported Content-Encoding")
	// ErrShuttingDown is the cause a server cancels its requests'
	// contexts with when its drain time is up (context.WithCancelCause):
	// a request cut then gets a 503 or an error event, not the silence
	// owed to a client that went away.
	ErrShuttingDown = errors.New("gateway shutting down")
	// ErrOutOfFiles: the gateway ran out of file descriptors for an
	// upstream connection, its own limit and not the upstream's failure.
	ErrOutOfFiles = errors.New("gateway out of file descriptors")
)

// apiError is the OpenAI-shaped error body: its four members, in OpenAI's
// order.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	// Param names the request parameter at fault; "" is null, as OpenAI
	// sends it when no one parameter is.
	Param nullString `json:"param"`
	Code  string     `json:"code"`
}

// nullString encodes "" as null.
type nullString string

func (s nullString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// paramOf is the request parameter err blames, or "".
func paramOf(err error) nullString {
	var pe *rewrite.ParamError
	if errors.As(err, &pe) {
		return nullString(pe.Param)
	}
	return ""
}

// classify maps an error to its status and OpenAI-shaped body.
func classify(err error) (int, apiError) {
	var notFound *notFoundError
	switch {
	case errors.Is(err, ErrShuttingDown): // first: what it cut reads as any failure
		return http.StatusServiceUnavailable, apiError{Message: "the gateway is shutting down and its drain time ran out; send the request again", Type: "gateway_error", Code: "gateway_shutting_down"}
	case errors.Is(err, ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "request_too_large"}
	case errors.Is(err, ErrBodyTimeout):
		return http.StatusRequestTimeout, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "request_timeout"}
	case errors.Is(err, ErrUnsupportedEncoding):
		return http.StatusUnsupportedMediaType, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "unsupported_content_encoding"}
	case errors.As(err, &notFound):
		return http.StatusNotFound, apiError{Message: notFound.Error(), Type: "invalid_request_error", Param: paramOf(err), Code: notFound.code()}
	case errors.Is(err, rewrite.ErrBadRequest):
		return http.StatusBadRequest, apiError{Message: err.Error(), Type: "invalid_request_error", Param: paramOf(err), Code: "invalid_request"}
	case errors.Is(err, ErrUpstreamTimeout), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, apiError{Message: err.Error(), Type: "gateway_error", Code: "upstream_timeout"}
	case errors.Is(err, ErrUpstreamUnreachable):
		return http.StatusBadGateway, apiError{Message: err.Error(), Type: "gateway_error", Code: "upstream_unreachable"}
	case errors.Is(err, ErrUpstreamBadResponse):
		return http.StatusBadGateway, apiError{Message: err.Error(), Type: "gateway_error", Code: "upstream_bad_response"}
	case errors.Is(err, ErrOutOfFiles), errors.Is(err, ErrOverloaded):
		return http.StatusServiceUnavailable, apiError{Message: err.Error(), Type: "gateway_error", Code: "gateway_overloaded"}
	case errors.Is(err, selector.ErrCompileBusy):
		// Not passed through instead: a catalog worth compiling is one the
		// gateway hides from the model, often more tools than the
		// upstream takes (OpenAI refuses over 128 with a 400 no SDK
		// retries), and a 503 is retried after Retry-After.
		return http.StatusServiceUnavailable, apiError{Message: err.Error() + " (--max-compile-mb); retry shortly", Type: "gateway_error", Code: "gateway_overloaded"}
	default:
		return http.StatusInternalServerError, apiError{Message: "internal gateway error", Type: "gateway_error", Code: "internal_error"}
	}
}

// errorBody encodes e as {"error": e}.
func errorBody(e apiError) []byte {
	b, _ := json.Marshal(struct {
		Error apiError `json:"error"`
	}{e})
	return b
}

// writeError is the one place that turns an error into a response. A client
// that went away only gets logged: nobody is listening.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		var cut bool
		if err, cut = shutdownCause(r, err); !cut {
			g.logger().DebugContext(r.Context(), "client went away", "path", r.URL.Path, "err", err)
			return
		}
	}
	status, body := classify(err)
	// A client's mistake is Info: any client can send one, and at Warn
	// they could flood the log an operator watches. 502-504 name another
	// party's failure; a 500 is the gateway's own.
	level := slog.LevelWarn
	switch {
	case status < 500:
		level = slog.LevelInfo
	case status == http.StatusInternalServerError:
		level = slog.LevelError
	}
	g.logger().Log(r.Context(), level, "request failed", "path", r.URL.Path, "status", status, "err", err)
	writeJSONError(w, status, body)
}

// failureLevel is the level of a failure in work done for a request: Debug
// once the request's context has ended (its client left, or the turn's
// deadline passed, which the response reports), Warn otherwise.
func failureLevel(ctx context.Context) slog.Level {
	if ctx.Err() != nil {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// shutdownCause returns err as ErrShuttingDown's, and true, when the
// server's shutdown canceled r; false when its client did, and there is
// no one to answer.
func shutdownCause(r *http.Request, err error) (error, bool) {
	if !errors.Is(context.Cause(r.Context()), ErrShuttingDown) {
		return err, false
	}
	if !errors.Is(err, ErrShuttingDown) {
		err = fmt.Errorf("%w: %w", ErrShuttingDown, err)
	}
	return err, true
}

// writeJSONError writes e with status, and the headers its code asks for,
// in the shape the client at w reads errors in: w's route's, when w is a
// tracker.
func writeJSONError(w http.ResponseWriter, status int, e apiError) {
	route := ""
	if tr, ok := w.(*tracker); ok {
		route = tr.route
	}
	writeRouteError(w, route, status, e)
}

// writeRouteError is writeJSONError for a client of route, whatever w is:
// a panic's recovery writes to the writer under the route's tracker.
func writeRouteError(w http.ResponseWriter, route string, status int, e apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	switch e.Code {
	case "request_timeout":
		// The rest of the body may never come: net/http would wait for it
		// before answering on a connection it means to keep.
		h.Set("Connection", "close")
	case "gateway_overloaded", "gateway_shutting_down":
		// A kept-alive client connection holds a file descriptor until
		// the idle timeout: with clients that keep theirs, a gateway out
		// of descriptors could answer nothing more. An overloaded
		// gateway also leaves the refused body unread.
		h.Set("Connection", "close")
		if e.Code == "gateway_overloaded" {
			// The OpenAI SDKs wait this long before their retry, where
			// their own back-off starts at half a second.
			h.Set("Retry-After", "1")
		}
	case "upstream_bad_response", "upstream_stream_error":
		// Direct, the client would have got the upstream's 2xx and failed
		// to read it, or raised its error event, which the openai SDKs do
		// not retry; through the gateway it is a 502, which they would
		// (every attempt billed). They honour this header over the status.
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(status)
	_, _ = w.Write(errorBodyOn(route, e))
}

// errorBodyOn encodes e as the clients of route read errors: an Anthropic
// SDK, on the Messages route, looks for {"type":"error","error":{"type",
// "message"}}; every other client gets OpenAI's shape.
func errorBodyOn(route string, e apiError) []byte {
	if route == routeMessages {
		return rewrite.AnthropicError(rewrite.AnthropicType(e.Type, e.Code), e.Message)
	}
	return errorBody(e)
}

// statusError is an upstream non-2xx answer, relayed to the client as is.
type statusError struct {
	resp *http.Response
	body []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("upstream answered %d", e.resp.StatusCode)
}

// errorAnswer returns the refusal a 2xx answer holds in place of one, or
// nil: a JSON object whose "error" is an object. OpenRouter answers 200
// once it has started on a request and reports a failure after that in
// the body ({"error":{"code":429,"message",...,"metadata"}}), where a
// dialect's parse finds no answer (no choices). The client gets the
// upstream's body as it came, under the status its code names when that
// is an HTTP error status, else 502: a gateway_error of its own lost the
// provider's message, code and metadata.
func errorAnswer(resp *http.Response, body []byte) *statusError {
	if !gjson.ValidBytes(body) {
		return nil
	}
	e := gjson.GetBytes(body, "error")
	if !e.IsObject() {
		return nil
	}
	status := http.StatusBadGateway
	if c := e.Get("code"); c.Type == gjson.Number && c.Num >= 400 && c.Num < 600 && c.Num == float64(int(c.Num)) {
		status = int(c.Num)
	}
	return &statusError{resp: &http.Response{StatusCode: status, Header: resp.Header}, body: body}
}

// upstreamStatusError is what a stream that already started tells its
// client of an upstream's refusal of a later round: the upstream's own
// type, code, message and param where its body has them (OpenAI's
// {"error":{...}}, Anthropic's {"type":"error","error":{...}}), else an
// upstream_error quoting its status and the start of its body. A refusal
// of a later round is the upstream's (a prompt grown too long, an
// overload), not the gateway's own failure, and its code is what an agent
// acts on (context_length_exceeded: compact and retry).
func upstreamStatusError(se *statusError) apiError {
	e := apiError{Type: "upstream_error", Code: "upstream_status",
		Message: fmt.Sprintf("upstream answered %d: %s", se.resp.StatusCode, truncate(se.body, 500))}
	up := gjson.GetBytes(se.body, "error")
	if m := up.Get("message"); m.Type == gjson.String && m.Str != "" {
		e.Message = m.Str
	}
	if t := up.Get("type"); t.Type == gjson.String && t.Str != "" {
		e.Type = t.Str
	}
	if c := up.Get("code"); c.Type == gjson.String && c.Str != "" {
		e.Code = c.Str
	}
	if p := up.Get("param"); p.Type == gjson.String {
		e.Param = nullString(p.Str)
	}
	return e
}

// fail writes err to the client: an upstream status verbatim, anything else
// through writeError.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	var se *statusError
	if errors.As(err, &se) {
		relayStatus(w, se)
		return
	}
	g.writeError(w, r, err)
}
