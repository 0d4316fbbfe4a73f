package proxy

import (
	"net/http"
	"net/textproto"
	"strings"
)

// isHop reports whether k (canonical form) is a header meaningful only
// for one connection (RFC 9110 7.6.1): never forwarded in either
// direction.
func isHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
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
// named by Connection, the gateway's own, or those skip reports (nil: none).
func copyEndToEnd(dst, src http.Header, skip func(canonical string) bool) {
	conn := connectionTokens(src)
	for k, vv := range src {
		if isHop(k) || conn[k] || skip != nil && skip(k) || strings.HasPrefix(k, gatewayPrefix) {
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

// requestSkip reports whether a client header is one the gateway sets
// itself: the body changes (length) and goes upstream unencoded (readBody
// decodes a compressed one), the transport negotiates compression so
// responses stay readable. The forwarding headers go, as the
// passthrough's reverse proxy drops them: a client's claim about where a
// request came from is not passed on. Expect goes too: these bodies are
// in memory, and the transport waits for an upstream's 100 Continue
// (ExpectContinueTimeout, a second) before it sends one, for each round,
// from an upstream that never sends it.
func requestSkip(k string) bool {
	switch k {
	case "Content-Length", "Content-Encoding", "Accept-Encoding", "Host",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded", "Expect":
		return true
	}
	return false
}

// responseSkip reports whether an upstream header stops being true once
// the gateway has read and rewritten the body.
func responseSkip(k string) bool { return k == "Content-Length" || k == "Content-Encoding" }
