package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
)

// newPassthrough returns the plain streaming reverse proxy for everything
// under /v1 that is not chat completions (models, embeddings, files, ...).
func (g *Gateway) newPassthrough() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rest, _ := g.apiPath(pr.In.URL.Path)
			pr.Out.URL = g.upstreamURL(rest, pr.In.URL.RawQuery)
			pr.Out.Host = ""
			g.setAuth(pr.Out.Header, pr.In)
		},
		Transport:     g.transport(),
		FlushInterval: -1,
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.writeError(w, r, upstreamErr(r.Context(), err))
		},
	}
}

// upstreamErr classifies a transport error: the client leaving, a timeout,
// or an upstream that cannot be reached.
func upstreamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return err
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: %w", ErrUpstreamTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrUpstreamUnreachable, err)
}
