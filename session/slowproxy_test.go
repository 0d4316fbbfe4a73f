package session

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// slowProxy is a TCP proxy in front of a Redis that holds back every reply
// for delay, to play a Redis that answers slowly. It counts the
// connections it accepts and the bytes clients send, so a test can tell a
// store that answers without touching the network.
type slowProxy struct {
	ln      net.Listener
	target  string
	delay   atomic.Int64 // nanoseconds
	conns   atomic.Int64
	sent    atomic.Int64 // bytes from clients
	got     atomic.Int64 // bytes to clients
	mu      sync.Mutex
	open    []net.Conn
	stopped bool
}

func newSlowProxy(t *testing.T, target string, delay time.Duration) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target}
	p.delay.Store(int64(delay))
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *slowProxy) Addr() string { return p.ln.Addr().String() }

func (p *slowProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

// traffic is what clients have done so far: connections and bytes sent.
func (p *slowProxy) traffic() (conns, bytes int64) { return p.conns.Load(), p.sent.Load() }

func (p *slowProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		_ = c.Close()
		return false
	}
	p.open = append(p.open, c)
	return true
}

func (p *slowProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	for _, c := range p.open {
		_ = c.Close()
	}
}

func (p *slowProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.conns.Add(1)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = server.Close()
			continue
		}
		go func() {
			_, _ = io.Copy(countingWriter{server, &p.sent}, client)
			_ = server.Close()
		}()
		go p.replies(server, client)
	}
}

// replies relays what the server says, each chunk delay after it came.
func (p *slowProxy) replies(server, client net.Conn) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := server.Read(buf)
			if n > 0 {
				q <- chunk{time.Now(), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at.Add(time.Duration(p.delay.Load()))))
		n, err := client.Write(c.b)
		p.got.Add(int64(n))
		if err != nil {
			break
		}
	}
	_ = client.Close()
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}
