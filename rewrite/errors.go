package rewrite

import "errors"

// ErrBadResponse is wrapped by every reason an upstream response or stream
// event the gateway must read is refused: not valid JSON, or without the
// members its API always sends (ErrBadRequest is the request's
// counterpart). The errors that wrap it say only their reason
// ("upstream response is not valid JSON"): a caller adds its own context.
var ErrBadResponse = errors.New("unreadable upstream response")

// badResponse returns an error that wraps ErrBadResponse and reads reason
// alone, as the errors it replaced read: proxy shows its clients the text.
func badResponse(reason string) error { return &responseError{reason: reason} }

// responseError is the error badResponse returns.
type responseError struct{ reason string }

func (e *responseError) Error() string { return e.reason }

// Unwrap returns ErrBadResponse.
func (e *responseError) Unwrap() error { return ErrBadResponse }
