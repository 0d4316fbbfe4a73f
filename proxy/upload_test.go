package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestALargeUploadMayTakeLongButNotStallLongerThanTheBodyTimeout: a
// passed-through body too large to read whole first streams to the
// upstream; a client that stops sending it is answered 408 once it has
// been silent for the body timeout, while one that keeps sending may take
// longer than that in all, and an answer relayed after the upload is not
// cut by the upload's deadline.
func TestALargeUploadMayTakeLongButNotStallLongerThanTheBodyTimeout(t *testing.T) {
	const size = 2 << 20 // over smallBody: streamed
	var got atomic.Int64
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		got.Store(n)
		if err != nil {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 4 { // 600 ms in all, past the body timeout
			fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(150 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	base := newTestGateway(t, upstream, func(g *Gateway) { g.BodyTimeout = 200 * time.Millisecond })
	addr := strings.TrimPrefix(strings.TrimSuffix(base, "/v1"), "http://")
	chunk := strings.Repeat("x", 64<<10)
	for _, tc := range []struct {
		name    string
		header  string
		send    func(w io.Writer) // the body, as the client sends it
		status  int
		code    string
		arrived int64 // bytes the upstream read, when the upload is whole
	}{
		{
			name:   "an upload of known length that stops mid-body is answered 408",
			header: fmt.Sprintf("Content-Length: %d\r\n", size),
			send:   func(w io.Writer) { _, _ = io.WriteString(w, chunk) },
			status: http.StatusRequestTimeout, code: "request_timeout",
		},
		{
			name:   "a chunked upload that stops mid-body is answered 408",
			header: "Transfer-Encoding: chunked\r\n",
			send:   func(w io.Writer) { fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk) },
			status: http.StatusRequestTimeout, code: "request_timeout",
		},
		{
			name:   "an upload that keeps sending arrives whole however long it takes in all",
			header: fmt.Sprintf("Content-Length: %d\r\n", size),
			send: func(w io.Writer) {
				for sent := 0; sent < size; sent += len(chunk) {
					_, _ = io.WriteString(w, chunk)
					time.Sleep(8 * time.Millisecond) // 32 pieces: 256 ms in all
				}
			},
			status: http.StatusOK, arrived: size,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got.Store(-1)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, _ = io.WriteString(conn, "POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"+tc.header+"\r\n")
			tc.send(conn)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer within 5 s: %v", err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("the answer was cut after %d bytes: %v", len(b), err)
			}
			if resp.StatusCode != tc.status || gjson.GetBytes(b, "error.code").String() != tc.code {
				t.Fatalf("status %d %s; want %d %q", resp.StatusCode, b, tc.status, tc.code)
			}
			if tc.arrived > 0 {
				if n := got.Load(); n != tc.arrived {
					t.Errorf("the upstream read %d bytes, want %d", n, tc.arrived)
				}
				if !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
					t.Errorf("the stream after the upload ended without [DONE]: %q", b)
				}
			}
		})
	}
}

// closedAfterEnd is a request body of known length that the server has
// closed after its last byte, as net/http does once the answer's header is
// written: a read after that fails.
type closedAfterEnd struct {
	r      io.Reader
	closed bool
}

func (c *closedAfterEnd) Read(p []byte) (int, error) {
	if c.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := c.r.Read(p)
	if err == io.EOF {
		c.closed = true
	}
	return n, err
}

func (c *closedAfterEnd) Close() error { c.closed = true; return nil }

// TestAnUploadReadToItsEndStaysEndedWhenTheServerClosesIt: the transport
// reads a body of known length once more after its end; that read must
// say io.EOF, not the closed body's error, which would make the transport
// close the upstream connection mid-answer.
func TestAnUploadReadToItsEndStaysEndedWhenTheServerClosesIt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reads int // reads after the body's end
	}{
		{name: "one read after the end says io.EOF", reads: 1},
		{name: "every read after the end says io.EOF", reads: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &uploadBody{
				ReadCloser: &closedAfterEnd{r: strings.NewReader("abc")},
				rc:         http.NewResponseController(httptest.NewRecorder()),
				idle:       time.Second,
			}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != "abc" {
				t.Fatalf("read %q, %v; want abc", got, err)
			}
			for i := range tc.reads {
				if n, err := b.Read(make([]byte, 8)); n != 0 || err != io.EOF {
					t.Fatalf("read %d after the end: %d bytes, %v; want io.EOF", i+1, n, err)
				}
			}
		})
	}
}
