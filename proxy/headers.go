package proxy

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// hopHeaders are meaningful only for one connection (RFC 9110 7.6.1); they
// are never forwarded in either direction.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// gatewayPrefix starts the headers that are the gateway's own (the admin
// token a client may send it, the X-Toolgate-* it answers with): never
// passed on to the upstream, which is another party.
const gatewayPrefix = "X-Toolgate-"

// dropGatewayHeaders removes the gateway's own headers from h.
func dropGatewayHeaders(h http.Header) {
	for k := range h {
		if strings.HasPrefix(k, gatewayPrefix) {
			delete(h, k)
		}
	}
}

// copyEndToEnd copies src into dst without hop-by-hop headers, the headers
// named by Connection, the gateway's own, or the names in skip (canonical
// form).
func copyEndToEnd(dst, src http.Header, skip ...string) {
	conn := connectionTokens(src)
	for k, vv := range src {
		if isHop(k) || conn[k] || slices.Contains(skip, k) || strings.HasPrefix(k, gatewayPrefix) {
			continue
		}
		dst[k] = append(dst[k][:0:0], vv...)
	}
}

func connectionTokens(h http.Header) map[string]bool {
	var m map[string]bool
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				if m == nil {
					m = map[string]bool{}
				}
				m[http.CanonicalHeaderKey(f)] = true
			}
		}
	}
	return m
}

func isHop(k string) bool { return slices.Contains(hopHeaders, k) }

// requestSkip are client headers the gateway sets itself: the body changes
// (length) and goes upstream unencoded (readBody decodes a compressed one),
// the transport negotiates compression so responses stay readable. The
// forwarding headers go, as the passthrough's reverse proxy drops them: a
// client's claim about where a request came from is not passed on. Expect
// goes too: these bodies are in memory, and the transport waits for an
// upstream's 100 Continue (ExpectContinueTimeout, a second) before it
// sends one, for each round, from an upstream that never sends it.
var requestSkip = []string{"Content-Length", "Content-Encoding", "Accept-Encoding", "Host",
	"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "Expect"}

// responseSkip are upstream headers that stop being true once the gateway
// has read and rewritten the body.
var responseSkip = []string{"Content-Length", "Content-Encoding"}
