package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// openRound builds and sends a streamed turn's round; the caller reads
// the response under rctx and ends it with closeStream. A round that fails
// with a status sent the client nothing, so it may be sent again even
// after earlier rounds' text went out (retries): a stream's client cannot
// retry an error event.
func (g *Gateway) openRound(ctx context.Context, r *http.Request, rest string, t *turn, round int) (resp *http.Response, rctx context.Context, cancel context.CancelFunc, err error) {
	tools := t.roundTools(round)
	body, err := t.d.Build(t.req, tools, t.rounds)
	if err != nil {
		return nil, nil, nil, err
	}
	rctx, cancel = context.WithCancel(ctx)
	o := sendOptions{rest: rest, body: body, stream: true, retries: g.retries(t.snap, round), round: round, key: t.snap.Gateway.UpstreamKey}
	if resp, err = t.sendRound(rctx, r, o, tools); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	if err := jsonRefusal(resp); err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return resp, rctx, cancel, nil
}

// jsonRefusal returns the refusal a 2xx answer to a streamed request
// holds when it came as JSON, not as a stream: OpenRouter reports a
// failure after it has started on a request as a 200 whose body is
// {"error":{...}}, which would read as a stream ended early and reach the
// client as the gateway's own 502 (see errorAnswer). Any other JSON body
// is left to the relay to refuse; the body is read back in.
func jsonRefusal(resp *http.Response) error {
	// The media type read by hand, case and parameters aside, where
	// mime.ParseMediaType would allocate its parameters' map on every
	// streamed round.
	const jsonType = "application/json"
	ct := strings.TrimSpace(resp.Header.Get("Content-Type"))
	if len(ct) < len(jsonType) || !strings.EqualFold(ct[:len(jsonType)], jsonType) ||
		len(ct) > len(jsonType) && ct[len(jsonType)] != ';' && ct[len(jsonType)] != ' ' {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if se := errorAnswer(resp, body); err == nil && se != nil {
		resp.Body.Close()
		return se
	}
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	return nil
}

// readCloser reads from Reader and closes Closer.
type readCloser struct {
	io.Reader
	io.Closer
}

// closeStream ends a round's upstream response. Reading a body to its end
// returns the connection to the transport's pool; closing it before makes
// an HTTP/1.1 transport discard the connection, so the next upstream call
// opens a new one and the old leaves a socket in TIME_WAIT. A chunked
// stream's last chunk often arrives after [DONE], where the relay stops:
// unless the round read the end already (drained), closeStream waits for
// it, at most drainMax bytes for at most drainWait.
func closeStream(body io.ReadCloser, drained bool, cancel context.CancelFunc) {
	if !drained {
		t := time.AfterFunc(drainWait, cancel)
		_, _ = io.CopyN(io.Discard, body, drainMax)
		t.Stop()
	}
	_ = body.Close()
	cancel()
}

const (
	drainMax  = 64 << 10
	drainWait = 100 * time.Millisecond
)

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// inBandError is an error event the upstream sent inside its stream.
type inBandError struct {
	data []byte
	name string // the event's name, in a stream that names its events
}

func (e *inBandError) Error() string { return "upstream stream error: " + truncate(e.data, 200) }
