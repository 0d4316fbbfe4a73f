package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// noContinueUpstream is an HTTP/1.1 server on a bare listener that knows
// nothing of Expect: 100-continue, as some servers and proxies do not: it
// never sends 100, and answers each request with answer's status and
// JSON body. A refusal (a status of 400 or more) goes before the body is
// read, with Connection: close, as a server that checks credentials
// first answers; anything else after the whole body. It records each
// request's Expect header.
type noContinueUpstream struct {
	answer  func(n int) (int, string)
	mu      sync.Mutex
	expects []string
}

func (u *noContinueUpstream) serve(t *testing.T) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go u.conn(c)
		}
	}()
	base, _ := url.Parse("http://" + ln.Addr().String() + "/v1")
	return base
}

func (u *noContinueUpstream) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		u.mu.Lock()
		u.expects = append(u.expects, req.Header.Get("Expect"))
		status, body := u.answer(len(u.expects) - 1)
		u.mu.Unlock()
		if status >= 400 {
			fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, http.StatusText(status), len(body), body)
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body), body)
	}
}

func (u *noContinueUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.expects...)
}

// TestExpectContinueGoesUpstreamOnlyWithABodyStillToCome: a client's
// Expect: 100-continue asks the server to say whether it wants the body
// before it is sent. A body the gateway has read whole (every round of a
// turn, a forwarded chat request, a small passthrough body) needs no such
// question, and an upstream that never answers it cost each call the
// transport's wait for it (ExpectContinueTimeout, 1 s), as it was
// forwarded. A body still streaming from the client keeps the question,
// so an upstream's early refusal spares the upload.
func TestExpectContinueGoesUpstreamOnlyWithABodyStillToCome(t *testing.T) {
	const answer = `{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Filed."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`
	refusal := `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	for _, tc := range []struct {
		name    string
		path    string
		body    []byte
		answers []string // the upstream's bodies, in order; the status is 200
		status  int      // the upstream's, when not 200
		want    []string // the Expect header of each upstream request
	}{
		{"a turn's search rounds go without it", "/chat/completions", bigRequest(t, false),
			[]string{searchReply, answer}, 0, []string{"", ""}},
		{"a chat request that passes through goes without it", "/chat/completions",
			chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, nil, false, nil),
			[]string{answer}, 0, []string{""}},
		{"a small passthrough body goes without it", "/embeddings", []byte(`{"model":"e","input":"hi"}`),
			[]string{`{"object":"list","data":[]}`}, 0, []string{""}},
		{"a large upload keeps it, and the upstream's refusal spares the upload", "/files", bytes.Repeat([]byte("x"), 2*smallBody),
			[]string{refusal}, http.StatusUnauthorized, []string{"100-continue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &noContinueUpstream{answer: func(n int) (int, string) {
				status := http.StatusOK
				if tc.status != 0 {
					status = tc.status
				}
				return status, tc.answers[min(n, len(tc.answers)-1)]
			}}
			u := up.serve(t)
			base := newTestGateway(t, http.NotFoundHandler(), searchOnly(t), func(g *Gateway) { g.Upstream = u })
			body := &countingReader{r: bytes.NewReader(tc.body)}
			req, _ := http.NewRequest(http.MethodPost, base+tc.path, body)
			req.ContentLength = int64(len(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Expect", "100-continue")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			want := http.StatusOK
			if tc.status != 0 {
				want = tc.status
			}
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, b)
			}
			got := up.seen()
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("the upstream's requests had Expect %q, want %q (the turn took %s)", got, tc.want, took)
			}
			if tc.status != 0 && body.n.Load() == int64(len(tc.body)) {
				t.Errorf("the client sent the whole %d bytes the upstream refused", len(tc.body))
			}
			if took >= time.Second {
				t.Errorf("the client waited %s, as long as the transport's wait for a 100", took)
			}
		})
	}
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
