package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPingsOfEveryRoundReachTheClient: a Messages stream's later round
// holds the model's thinking back until what follows it shows, so while
// the model thinks the client would get no byte, and an idle timeout
// between (a proxy's) would cut the stream. The upstream's pings carry no
// content and no index: the client gets those of every round as they
// come, as it would directly.
func TestPingsOfEveryRoundReachTheClient(t *testing.T) {
	event := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	start := func(i int32) string {
		return event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_%d","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`, i))
	}
	const ping = `{"type":"ping"}`
	thinking := func(text string) string {
		return event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`) +
			event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"`+text+`"}}`)
	}
	thought := event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	search := func(i int32) string {
		return event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_s%d","name":"tool_search","input":{}}}`, i)) +
			event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\":\"xqzv\"}"}}`) +
			event("content_block_stop", `{"type":"content_block_stop","index":1}`)
	}
	answer := event("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`) +
		event("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Nothing does that."}}`) +
		event("content_block_stop", `{"type":"content_block_stop","index":1}`)
	stop := func(reason string) string {
		return event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+reason+`","stop_sequence":null},"usage":{"output_tokens":5}}`) +
			event("message_stop", `{"type":"message_stop"}`)
	}
	for _, tc := range []struct {
		name string
		// rounds is the number of upstream rounds; the last answers, the
		// others search. Each round pings after message_start and
		// while it thinks; the last waits there for the client to
		// have every ping so far.
		rounds int32
	}{
		{"the pings of the round that answers reach the client while it thinks", 2},
		{"the pings of a round that thinks only to search again reach the client while it thinks", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := 2 * tc.rounds
			var pings atomic.Int32
			seen := make(chan struct{})
			var waited atomic.Bool
			var n atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				i := n.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				fl := w.(http.Flusher)
				_, _ = io.WriteString(w, start(i)+event("ping", ping)+thinking("Hmm.")+event("ping", ping))
				fl.Flush()
				if i == tc.rounds {
					select {
					case <-seen:
					case <-time.After(2 * time.Second):
						waited.Store(true)
					}
					_, _ = io.WriteString(w, thought+answer+stop("end_turn"))
					return
				}
				_, _ = io.WriteString(w, thought+search(i)+stop("tool_use"))
			})
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, "gateway: {mode: search}\n")))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/messages", strings.NewReader(string(fruitlessRequest(t, "messages", true))))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b strings.Builder
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				b.WriteString(sc.Text() + "\n")
				if sc.Text() == "event: ping" && pings.Add(1) == want {
					close(seen)
				}
			}
			if waited.Load() {
				t.Errorf("the client had %d pings while the last round thought, want %d (every round's): %s", pings.Load(), want, b.String())
			}
			if got := pings.Load(); got != want {
				t.Errorf("the client got %d pings, want %d", got, want)
			}
			if !strings.Contains(b.String(), "Nothing does that.") || strings.Contains(b.String(), `"type":"error"`) {
				t.Errorf("the stream did not end with the answer: %s", b.String())
			}
		})
	}
}

// TestTheUpstreamsCommentsKeepARewrittenStreamAlive: a provider keeps a
// stream alive with SSE comments while its model thinks (OpenRouter's
// ": OPENROUTER PROCESSING"), and a direct client has the headers and
// each comment as it comes. Through the gateway the client must too, on
// every route and in every round: a client that waits for its headers
// (ResponseHeaderTimeout) or a proxy that cuts an idle connection (60 s
// on ALB and nginx) would cut a turn whose model thinks for minutes.
// Before, the relay skipped comments and sent no header until the first
// event the client sees.
func TestTheUpstreamsCommentsKeepARewrittenStreamAlive(t *testing.T) {
	const (
		comments = 8
		comment  = ": OPENROUTER PROCESSING"
		said     = "Nothing does that."
	)
	chat := func(last bool) string {
		if !last {
			return searchRound
		}
		return textChunk(said) + finishChunk("stop") + doneEvent
	}
	responses := func(w http.ResponseWriter, last bool) {
		output := `[{"type":"function_call","id":"fc_s","call_id":"call_s","name":"tool_search","arguments":"{\"query\":\"xqzv\"}","status":"completed"}]`
		if last {
			output = `[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"` + said + `"}]}]`
		}
		writeResponse(w, "resp_1", output, true)
	}
	messages := func(last bool) string {
		if !last {
			return messagesReply("msg_s", []string{`{"type":"tool_use","id":"toolu_s","name":"tool_search","input":{"query":"xqzv"}}`}, "tool_use", true)
		}
		return messagesReply("msg_1", []string{`{"type":"text","text":"` + said + `"}`}, "end_turn", true)
	}
	paths := map[string]string{"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}
	for _, tc := range []struct {
		name, api string
		// thinks is the round whose model thinks (sends the comments)
		// before it answers; the rounds before it search.
		thinks int32
	}{
		{"a Chat Completions client has the comments of a round that thinks before its answer", "chat", 0},
		{"a Chat Completions client has the comments of a round that thinks after a search", "chat", 1},
		{"a Responses client has the comments of a round that thinks before its answer", "responses", 0},
		{"a Responses client has the comments of a round that thinks after a search", "responses", 1},
		{"a Messages client has the comments of a round that thinks before its answer", "messages", 0},
		{"a Messages client has the comments of a round that thinks after a search", "messages", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan struct{}) // the client has every comment
			var waited atomic.Bool
			var n atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				round := n.Add(1) - 1
				w.Header().Set("Content-Type", "text/event-stream")
				if round == tc.thinks {
					fl := w.(http.Flusher)
					for i := 0; i < comments; i++ {
						if i > 0 {
							time.Sleep(100 * time.Millisecond)
						}
						_, _ = io.WriteString(w, comment+"\n\n")
						fl.Flush()
					}
					select {
					case <-seen:
					case <-time.After(2 * time.Second):
						waited.Store(true)
					}
				}
				last := round >= tc.thinks
				switch tc.api {
				case "chat":
					_, _ = io.WriteString(w, chat(last))
				case "responses":
					responses(w, last)
				case "messages":
					_, _ = io.WriteString(w, messages(last))
				}
			})
			base := newTestGateway(t, up, searchOnly(t))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+paths[tc.api], strings.NewReader(string(fruitlessRequest(t, tc.api, true))))
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			headers := time.Since(start)
			var b strings.Builder
			got := 0
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				b.WriteString(sc.Text() + "\n")
				if strings.HasPrefix(sc.Text(), ":") {
					if got++; got == comments {
						close(seen)
					}
				}
			}
			if waited.Load() {
				t.Errorf("the client had its headers after %s and %d comments while the model thought, want all %d: %s", headers, got, comments, b.String())
			}
			if got != comments {
				t.Errorf("the client got %d comments, want %d", got, comments)
			}
			if !strings.Contains(b.String(), said) || strings.Contains(b.String(), `"error"`) {
				t.Errorf("the stream did not end with the answer: %s", b.String())
			}
			if n.Load() != tc.thinks+1 {
				t.Errorf("%d upstream calls, want %d", n.Load(), tc.thinks+1)
			}
		})
	}
}
