package proxy

import (
	"net"
	"net/http"
	"time"
)

// upstreamWriteBuffer is the transport's per-connection write buffer. A
// rewritten request (headers, then a body of a few to a few tens of KB:
// the messages and the tools the model sees) then leaves in one write.
// With net/http's default 4 KB buffer a body past it went out as a second
// write after the headers' flush, which on loopback cost a syscall and a
// wake-up of the upstream's reader for every upstream call (about 30 µs of
// a 200-tool turn's 290 µs in BenchmarkHandler200Tools). The buffer lives
// as long as its connection: 32 KB holds a typical agent turn whole and
// costs 16 MB at the 512 idle connections the transport keeps at most;
// a longer conversation's body simply takes more writes.
const upstreamWriteBuffer = 32 << 10

// NewTransport returns the transport for upstream calls: the default
// transport's settings, the given connect and first-byte timeouts (0: none),
// connections kept for many concurrent clients, and a write buffer that
// holds a rewritten request whole.
func NewTransport(connect, firstByte time.Duration) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.ResponseHeaderTimeout = firstByte
	t.MaxIdleConnsPerHost = 256
	t.MaxIdleConns = 512
	t.WriteBufferSize = upstreamWriteBuffer
	return t
}
