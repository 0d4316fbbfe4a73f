package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/policy"
)

// maxErrorBody bounds how much of an upstream error body is read to relay.
const maxErrorBody = 1 << 20

// sendOptions says how one upstream call is made.
type sendOptions struct {
	rest    string // API path, e.g. "/chat/completions"
	body    []byte
	retries int // extra attempts on a 5xx or a 429 that says when (retryWait)
	stream  bool
	// round is the turn's round this call makes: from the second on, a
	// client's Idempotency-Key goes with a suffix of the round's (roundKey).
	round int
	// asIs: the body is the client's (a passthrough): its content type
	// goes upstream with it. Compression stays the transport's to
	// negotiate, so a passthrough's usage can be read for the metrics.
	asIs bool
	// key is the upstream key of the policy the request started on
	// (setAuth): every round of a turn goes on the same account, even
	// when a reload rotates the key mid-turn.
	key string
}

// send makes one upstream call for the client request in. A 2xx comes back
// as a response whose body the caller must close; any other status as a
// *statusError holding the upstream's body; transport failures as
// ErrUpstreamTimeout or ErrUpstreamUnreachable.
func (g *Gateway) send(ctx context.Context, in *http.Request, o sendOptions) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := g.sendOnce(ctx, in, o)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return resp, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		if wait, ok := retryWait(resp); ok && attempt < o.retries {
			g.logger().WarnContext(ctx, "upstream refused a round for now, retrying", "status", resp.StatusCode, "after", wait, "attempt", attempt+1)
			g.Metrics.retried()
			if err := sleepCtx(ctx, wait); err != nil {
				return nil, err
			}
			continue
		}
		return nil, &statusError{resp: resp, body: body}
	}
}

func (g *Gateway) sendOnce(ctx context.Context, in *http.Request, o sendOptions) (*http.Response, error) {
	u := g.upstreamURL(o.rest, in.URL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(o.body))
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	copyEndToEnd(req.Header, in.Header, requestSkip)
	if k := req.Header.Get("Idempotency-Key"); k != "" && o.round > 0 {
		req.Header.Set("Idempotency-Key", roundKey(k, o.round))
	}
	setAuth(req.Header, in, o.key)
	if !o.asIs || req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "") // net/http then sends none, not its own
	}
	if o.stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := g.transport().RoundTrip(req)
	if err != nil {
		return nil, upstreamErr(ctx, err)
	}
	return resp, nil
}

// roundKey is the Idempotency-Key of a turn's round after the first. Each
// round is a request of its own with a body of its own: an upstream (or
// an intermediary) that honours the key would answer a later round with
// the first round's stored answer, or refuse the key's reuse. The suffix
// is stable, so a client resending the turn with its key resends every
// round with the same keys, and the gateway's retry of a round keeps its.
func roundKey(key string, round int) string {
	return key + "-toolgate-round-" + strconv.Itoa(round)
}

// setAuth replaces the client's credential with the policy's upstream key,
// when there is one; otherwise the client's passes through. The key goes in
// the header the client's API reads a key from: Azure OpenAI's api-key for
// a client that sent one, Anthropic's x-api-key for a client that sent one
// or speaks that API (its SDKs send anthropic-version; there a bearer token
// is an OAuth token, not a key), Authorization for the rest. The client's
// credential in any of the three goes: the upstream gets the operator's key
// alone, never next to a client's. So do OpenAI-Organization and
// OpenAI-Project, which name the client's account: OpenAI refuses a key
// with another account's (mismatched_organization), and the operator's
// key has its own.
func setAuth(h http.Header, in *http.Request, key string) {
	if key == "" {
		return
	}
	name, value := "Authorization", "Bearer "+key
	switch {
	case in.Header.Get("Api-Key") != "":
		name, value = "Api-Key", key
	case in.Header.Get("X-Api-Key") != "" || in.Header.Get("Anthropic-Version") != "":
		name, value = "X-Api-Key", key
	}
	for _, k := range [...]string{"Authorization", "Api-Key", "X-Api-Key", "Openai-Organization", "Openai-Project"} {
		h.Del(k)
	}
	h.Set(name, value)
}

// maxRateLimitWait is the longest wait a 429 may ask of a round the
// gateway sends again: about what the OpenAI SDKs honour before a retry
// of their own, and short against a request's first_byte.
const maxRateLimitWait = 20 * time.Second

// retryWait says whether a refused round is worth sending again, and after
// how long. A 5xx is, after a short Retry-After or a moment. A 429 is when
// it names a wait within maxRateLimitWait (OpenAI's retry-after-ms,
// Retry-After in seconds, which Anthropic sends): a rate limit that resets
// shortly. One that names none is more likely a spent quota, and one that
// names longer is the client's to wait out.
func retryWait(resp *http.Response) (time.Duration, bool) {
	switch {
	case resp.StatusCode >= 500:
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 && s <= 2 {
			return time.Duration(s) * time.Second, true
		}
		return 100 * time.Millisecond, true
	case resp.StatusCode == http.StatusTooManyRequests:
		var wait time.Duration
		if ms, err := strconv.Atoi(resp.Header.Get("Retry-After-Ms")); err == nil && ms >= 0 {
			wait = time.Duration(ms) * time.Millisecond
		} else if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = time.Duration(s) * time.Second
		} else {
			return 0, false
		}
		return wait, wait <= maxRateLimitWait
	}
	return 0, false
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// relayStatus writes an upstream non-2xx answer to the client unchanged:
// status, headers (Retry-After, rate limits, request id) and body.
func relayStatus(w http.ResponseWriter, e *statusError) {
	copyEndToEnd(w.Header(), e.resp.Header, responseSkip)
	w.Header().Set("Content-Length", strconv.Itoa(len(e.body)))
	w.WriteHeader(e.resp.StatusCode)
	_, _ = w.Write(e.body)
}

// retries is how many times round's call is sent again after a 5xx.
// The first round is sent once, as a reverse proxy sends a request: the
// client's SDK retries a 5xx itself (the openai SDKs twice, with backoff
// and the upstream's Retry-After), and a retry here too would double its
// attempts on an upstream already failing. A later round's failure would
// throw away the rounds before it, which no client retry can keep.
func (g *Gateway) retries(snap *policy.Snapshot, round int) int {
	if round == 0 {
		return 0
	}
	return max(snap.Gateway.Retries, 0)
}

// send is g.send for the turn's upstream calls; it adds the time spent
// waiting on the upstream (the round trip, retries, and every read of the
// response body) to the report, so gateway-added latency can exclude it.
func (t *turn) send(ctx context.Context, in *http.Request, o sendOptions) (*http.Response, error) {
	start := time.Now()
	resp, err := t.g.send(ctx, in, o)
	if err != nil {
		err = t.g.explainLostThread(in, t.req, err)
	}
	if t.rep == nil {
		return resp, err
	}
	t.rep.upstream += time.Since(start)
	if err != nil {
		return resp, err
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, acc: &t.rep.upstream}
	return resp, nil
}

// sendRound makes a round's upstream call with o, and sends it again,
// built anew with tools, without what the gateway added that the upstream
// refuses. Each refusal flips a flag of t.req once: at most two resends.
// The round counts as one call, as a round retried after a 5xx does: the
// upstream answered its refused attempts at once and billed none. What
// the upstream refused is remembered for the model, for every tenant's
// later turns, only once a resend without it is answered: a refusal that
// the resend gets too was about something else.
func (t *turn) sendRound(ctx context.Context, in *http.Request, o sendOptions, tools []string) (*http.Response, error) {
	if t.rep != nil {
		t.rep.calls++
	}
	noUsage, noExtras := t.req.NoUsageRequest, t.req.NoMessageExtras
	resp, err := t.send(ctx, in, o)
	for err != nil && (t.g.refusedUsageRequest(t.req, err) || t.g.refusedMessageExtras(t.d, t.req, t.rounds, err)) {
		if o.body, err = t.d.Build(t.req, tools, t.rounds); err == nil {
			resp, err = t.send(ctx, in, o)
		}
	}
	if err == nil {
		t.accept()
		model := clipMarked(t.req.Model, modelLogged)
		if !noUsage && t.req.NoUsageRequest {
			t.g.noUsage.Add(strings.Clone(t.req.Model), struct{}{}) // req.Model aliases the body
			t.g.logger().WarnContext(ctx, "the upstream refuses stream_options; streaming without usage for this model", "model", model)
		}
		if !noExtras && t.req.NoMessageExtras {
			t.g.noExtras.Add(strings.Clone(t.req.Model), struct{}{})
			t.g.logger().WarnContext(ctx, "the upstream refuses the members its model added to its messages; sending the gateway's rounds without them for this model", "model", model)
		}
	}
	return resp, err
}
