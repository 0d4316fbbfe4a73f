package embeddings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// errResponse is an answer that is not a usable embeddings response
// (undecodable, vectors missing or invalid): asking again does not help.
var errResponse = errors.New("bad embeddings response")

// statusError is an embeddings endpoint's non-200 answer. It keeps the
// status and the OpenAI error's type and code but never the body: a
// server may echo the request's Authorization in its message, and errors
// end up in logs.
type statusError struct {
	status     int
	typ, code  string
	retryAfter time.Duration // 0 when the answer had no usable Retry-After
}

func newStatusError(resp *http.Response, body []byte) *statusError {
	e := &statusError{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
	var parsed struct {
		Error struct {
			Type string          `json:"type"`
			Code json.RawMessage `json:"code"` // a string, a number or null
		} `json:"error"`
	}
	if json.Unmarshal(body, &parsed) == nil {
		e.typ = short(parsed.Error.Type)
		e.code = short(strings.Trim(string(parsed.Error.Code), `"`))
		if e.code == "null" {
			e.code = ""
		}
	}
	return e
}

// short bounds an identifier taken from a response, which may be anything.
func short(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("embeddings endpoint answered %d %s", e.status, http.StatusText(e.status))
	if e.typ != "" || e.code != "" {
		s += fmt.Sprintf(" (type %q, code %q)", e.typ, e.code)
	}
	return s
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if n > 0 {
			return time.Duration(min(n, 86400)) * time.Second
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// retryAfterOf returns the Retry-After of err's answer, if any.
func retryAfterOf(err error) time.Duration {
	var se *statusError
	if errors.As(err, &se) {
		return se.retryAfter
	}
	return 0
}

// retryable reports whether asking the endpoint again may succeed: a
// timeout, a network error, or a status that says "later".
func retryable(err error) bool {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return se.status == http.StatusRequestTimeout || se.status == http.StatusConflict ||
			se.status == http.StatusTooManyRequests || se.status >= 500
	case errors.Is(err, errResponse), errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// outcome names a call's result for selector.EmbedObserver: ok, timeout,
// network_error, rate_limited, unauthorized, status_4xx, status_5xx,
// bad_response or canceled.
func outcome(err error) string {
	var se *statusError
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &se):
		switch {
		case se.status == http.StatusTooManyRequests:
			return "rate_limited"
		case se.status == http.StatusUnauthorized || se.status == http.StatusForbidden:
			return "unauthorized"
		case se.status >= 500:
			return "status_5xx"
		}
		return "status_4xx"
	case errors.Is(err, errResponse):
		return "bad_response"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "network_error"
}
