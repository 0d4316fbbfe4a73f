package proxy

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zlibbed(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func flated(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := flate.NewWriter(&buf, flate.DefaultCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// seenRequest is what an upstream got: the body and the headers that
// describe it.
type seenRequest struct {
	body           []byte
	encoding       string
	length         string
	declaredLength int64
}

// encodingRecorder answers plainAnswer and keeps each request it got.
type encodingRecorder struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (rc *encodingRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.seen = append(rc.seen, seenRequest{body: b, encoding: r.Header.Get("Content-Encoding"), length: r.Header.Get("Content-Length"), declaredLength: r.ContentLength})
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, plainAnswer)
}

func (rc *encodingRecorder) requests() []seenRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seenRequest(nil), rc.seen...)
}

// TestCompressedRequestBodiesAreDecoded: a chat request whose body is
// gzip or deflate encoded is read like a plain one and forwarded decoded;
// the body limit applies to what it decodes to, and an encoding the
// gateway cannot read is a 415, never a "not valid JSON".
func TestCompressedRequestBodiesAreDecoded(t *testing.T) {
	msgs := []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}
	plain := chatRequest(t, msgs, nil, false, nil)
	withTools := chatRequest(t, msgs, testCatalog(30), false, nil)
	// 2 MiB of one letter in a valid request: a few KB gzipped.
	bomb := gzipped(t, chatRequest(t, []map[string]any{{"role": "user", "content": strings.Repeat("a", 2<<20)}}, nil, false, nil))
	for _, tc := range []struct {
		name     string
		encoding string
		body     []byte
		status   int
		code     string // the error's, when status is not 200
		upstream func(seenRequest) bool
	}{
		{"a gzip body without tools reaches the upstream decoded, byte for byte", "gzip", gzipped(t, plain), http.StatusOK, "", func(s seenRequest) bool {
			return bytes.Equal(s.body, plain) && s.encoding == "" && s.length == strconv.Itoa(len(plain))
		}},
		{"a gzip body with many tools is rewritten like a plain one", "gzip", gzipped(t, withTools), http.StatusOK, "", func(s seenRequest) bool {
			names := toolNames(s.body)
			return s.encoding == "" && len(names) > 0 && len(names) < 30 && names[0] == SearchToolName && s.declaredLength == int64(len(s.body))
		}},
		{"an x-gzip body is read as gzip", "x-gzip", gzipped(t, plain), http.StatusOK, "", func(s seenRequest) bool {
			return bytes.Equal(s.body, plain) && s.encoding == ""
		}},
		{"a deflate body is decoded too", "deflate", zlibbed(t, plain), http.StatusOK, "", func(s seenRequest) bool {
			return bytes.Equal(s.body, plain) && s.encoding == ""
		}},
		{"a bare deflate body, without zlib's header, is decoded too", "deflate", flated(t, plain), http.StatusOK, "", func(s seenRequest) bool {
			return bytes.Equal(s.body, plain) && s.encoding == ""
		}},
		{"a body gzipped twice is decoded twice", "gzip, gzip", gzipped(t, gzipped(t, plain)), http.StatusOK, "", func(s seenRequest) bool {
			return bytes.Equal(s.body, plain) && s.encoding == ""
		}},
		{"an identity body is read as it is", "identity", plain, http.StatusOK, "", func(s seenRequest) bool {
			return bytes.Equal(s.body, plain) && s.encoding == ""
		}},
		{"a gzip body that decodes past the limit gets the 413 a big body gets", "gzip", bomb, http.StatusRequestEntityTooLarge, "request_too_large", nil},
		{"a body that is not the gzip it claims is a 400", "gzip", plain, http.StatusBadRequest, "invalid_request", nil},
		{"a gzip body cut short is a 400", "gzip", gzipped(t, plain)[:20], http.StatusBadRequest, "invalid_request", nil},
		{"a brotli body is a 415", "br", plain, http.StatusUnsupportedMediaType, "unsupported_content_encoding", nil},
		{"gzip under another encoding is a 415", "gzip, br", gzipped(t, plain), http.StatusUnsupportedMediaType, "unsupported_content_encoding", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &encodingRecorder{}
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, "gateway:\n  body_limit: 1048576\n")))
			x := send(t, base, tc.body, map[string]string{"Content-Encoding": tc.encoding})
			seen := up.requests()
			if tc.status != http.StatusOK {
				wantError(t, x, tc.status, tc.code)
				if len(seen) != 0 {
					t.Errorf("the upstream got %d requests; want none", len(seen))
				}
				return
			}
			if x.status != http.StatusOK || gjson.GetBytes(x.body, "choices.0.message.content").String() != "hi" {
				t.Fatalf("status %d %s; want the upstream's answer", x.status, x.body)
			}
			if len(seen) != 1 || !tc.upstream(seen[0]) {
				for _, s := range seen {
					t.Logf("upstream got Content-Encoding %q, Content-Length %q: %.300s", s.encoding, s.length, s.body)
				}
				t.Errorf("the upstream got %d requests, not the one expected", len(seen))
			}
		})
	}
}
