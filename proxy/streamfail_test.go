package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// streamKinds are a rewritten turn's streams, one of each relay: what the
// upstream sends before it hangs ends with the word "Working", which the
// gateway relays at once.
var streamKinds = []struct {
	name, path string
	body       func(t *testing.T) []byte
	before     string
}{
	{"a Chat stream", "/chat/completions", func(t *testing.T) []byte { return bigRequest(t, true) }, textChunk("Working")},
	{"a Responses stream", "/responses", func(t *testing.T) []byte {
		var tools []map[string]any
		for _, tool := range testCatalog(30) {
			fn := tool["function"].(map[string]any)
			tools = append(tools, map[string]any{"type": "function", "name": fn["name"], "parameters": fn["parameters"]})
		}
		b, _ := json.Marshal(map[string]any{"model": "m", "input": "File a bug about the login crash.", "tools": tools, "stream": true})
		return b
	}, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"type\":\"message\",\"id\":\"m1\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"output_index\":0,\"item_id\":\"m1\",\"content_index\":0,\"delta\":\"Working\"}\n\n"},
	{"a Messages stream", "/messages", func(t *testing.T) []byte {
		var tools []map[string]any
		for _, tool := range testCatalog(30) {
			fn := tool["function"].(map[string]any)
			tools = append(tools, map[string]any{"name": fn["name"], "input_schema": fn["parameters"]})
		}
		b, _ := json.Marshal(map[string]any{"model": "claude", "max_tokens": 100, "messages": []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}, "tools": tools, "stream": true})
		return b
	}, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Working\"}}\n\n"},
}

// TestAStreamOfEitherRelayFailsAlikeWhenItsClientOrTheServerLeaves: a
// stream that has begun and then loses its request is not the upstream's
// failure, whichever relay carries it. A client that hung up gets nothing
// and is logged at Debug, not warned of; a turn the server's shutdown cut
// ends with the gateway_shutting_down error event the client can act on.
func TestAStreamOfEitherRelayFailsAlikeWhenItsClientOrTheServerLeaves(t *testing.T) {
	for _, kind := range streamKinds {
		t.Run(kind.name+" whose client hangs up is logged as the client's leaving", func(t *testing.T) {
			logs := &syncBuffer{}
			srv, reached := hangingGateway(t, kind.before, logs)
			ctx, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			resp := openStream(t, ctx, srv.URL+"/v1"+kind.path, kind.body(t))
			hangUp()
			resp.Body.Close()
			<-reached
			srv.Close() // waits for the gateway's handler to return
			if out := logs.String(); !strings.Contains(out, "client went away mid-stream") || strings.Contains(out, "stream failed after start") {
				t.Errorf("log:\n%s\nwant the client's leaving at Debug, and no warning of a failed stream", out)
			}
		})
		t.Run(kind.name+" cut by the shutdown ends with the shutdown's error event", func(t *testing.T) {
			logs := &syncBuffer{}
			base, cut := context.WithCancelCause(context.Background())
			defer cut(nil)
			srv, reached := hangingGateway(t, kind.before, logs, func(s *httptest.Server) {
				s.Config.BaseContext = func(net.Listener) context.Context { return base }
			})
			resp := openStream(t, context.Background(), srv.URL+"/v1"+kind.path, kind.body(t))
			defer resp.Body.Close()
			<-reached
			cut(ErrShuttingDown)
			rest, _ := io.ReadAll(resp.Body)
			// The Messages API's error event has a type and a message, no code.
			if !strings.Contains(string(rest), "the gateway is shutting down") {
				t.Errorf("the stream ended with %q; want the shutdown's error event", rest)
			}
		})
	}
}

// hangingGateway serves a gateway whose upstream sends before, then
// hangs until the gateway leaves; reached is closed once the upstream has
// sent it. The gateway logs at Debug to logs.
func hangingGateway(t *testing.T, before string, logs io.Writer, opts ...func(*httptest.Server)) (*httptest.Server, chan struct{}) {
	t.Helper()
	reached := make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, before)
		_ = http.NewResponseController(w).Flush()
		close(reached)
		<-r.Context().Done()
	})
	g := testGateway(t, up, func(g *Gateway) {
		g.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	srv := httptest.NewUnstartedServer(g.Handler())
	for _, o := range opts {
		o(srv)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, reached
}

// openStream posts body and returns the response once the client has read
// the upstream's "Working".
func openStream(t *testing.T, ctx context.Context, url string, body []byte) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			resp.Body.Close()
			t.Fatalf("the stream ended before the upstream's first text: %v", err)
		}
		if strings.Contains(line, "Working") {
			break
		}
	}
	resp.Body = readCloser{io.MultiReader(br, resp.Body), resp.Body}
	return resp
}
