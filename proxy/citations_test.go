package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
)

// citedRound is one upstream round of a turn: what the model said and its
// message's annotations (raw JSON objects). Every round but the last calls
// tool_search.
type citedRound struct {
	text  string
	notes []string
}

// cite is a url_citation of words in text, as a web-search model sends
// it: offsets in characters (code points, as OpenAI's Python servers
// count) into the round's own text, and the cited words as its title, so
// a test can check what the citation marks in the client's answer.
func cite(text, words string) string {
	i := strings.Index(text, words)
	if i < 0 {
		panic("cite: " + words + " is not in " + text)
	}
	start := len([]rune(text[:i]))
	b, _ := json.Marshal(map[string]any{"type": "url_citation", "url_citation": map[string]any{
		"start_index": start, "end_index": start + len([]rune(words)), "url": "https://example.com/src", "title": words}})
	return string(b)
}

// TestCitationsMarkTheirWordsInTheClientsAnswer: a web-search model's
// url_citations count their offsets from the start of their round's text,
// and the client's answer starts with the text of the search rounds
// before it, so the gateway moves them on by that text, counted in
// characters, as every client reads them; a search round's citations
// stay with its text. Before, the last round's citations kept their
// offsets and marked the wrong words, streamed or not, and a whole
// answer lost the search rounds' citations.
func TestCitationsMarkTheirWordsInTheClientsAnswer(t *testing.T) {
	const answer = "Paris is sunny today (source)."
	other := `{"type":"provider_note","start_index":0,"end_index":5}`
	tests := []struct {
		name   string
		rounds []citedRound
	}{
		{"a citation in the answer still marks its words after the search round's text", []citedRound{
			{"Let me look that up. ", nil},
			{answer, []string{cite(answer, "(source)")}},
		}},
		{"characters, not bytes, move a citation past non-ASCII text", []citedRound{
			{"Voilà — ", nil},
			{"Il fait beau à Paris (source).", []string{cite("Il fait beau à Paris (source).", "(source)")}},
		}},
		{"a search round's citations stay, ahead of the answer's", []citedRound{
			{"Météo (a): ", []string{cite("Météo (a): ", "(a)")}},
			{"sunny (b), warm (c).", []string{cite("sunny (b), warm (c).", "(b)"), cite("sunny (b), warm (c).", "(c)")}},
		}},
		{"two search rounds' text moves the answer's citations past both", []citedRound{
			{"Looking… ", nil},
			{"Still looking (d). ", []string{cite("Still looking (d). ", "(d)")}},
			{answer, []string{cite(answer, "(source)")}},
		}},
		{"an annotation of another kind passes as it came", []citedRound{
			{"Voilà — ", nil},
			{answer, []string{other, cite(answer, "(source)")}},
		}},
	}
	const search = `{"id":"s1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"weather\"}"}}`
	whole := func(rounds []citedRound) http.Handler {
		var n atomic.Int32
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			i := min(int(n.Add(1)), len(rounds)) - 1
			rd := rounds[i]
			calls, finish := "", "stop"
			if i < len(rounds)-1 {
				calls, finish = `,"tool_calls":[`+search+`]`, "tool_calls"
			}
			msg := fmt.Sprintf(`{"role":"assistant","content":%q,"annotations":[%s]%s}`, rd.text, strings.Join(rd.notes, ","), calls)
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}]}`, i, msg, finish)
		})
	}
	streamed := func(rounds []citedRound) http.Handler {
		var sse []string
		for i, rd := range rounds {
			// OpenRouter sends a round's annotations in a delta of their
			// own, after its text.
			s := textChunk(rd.text) + sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"annotations":[`+strings.Join(rd.notes, ",")+`]},"finish_reason":null}]}`)
			if i < len(rounds)-1 {
				s += callChunk(0, "s1", SearchToolName, `{"query":"weather"}`) + finishChunk("tool_calls")
			} else {
				s += finishChunk("stop")
			}
			sse = append(sse, s+doneEvent)
		}
		var n atomic.Int32
		return sseHandler(&n, sse...)
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name + " (whole answer)"
			if stream {
				name = tt.name + " (streamed)"
			}
			t.Run(name, func(t *testing.T) {
				up := whole(tt.rounds)
				if stream {
					up = streamed(tt.rounds)
				}
				base := newTestGateway(t, up)
				x := send(t, base, bigRequest(t, stream), nil)
				if x.status != http.StatusOK {
					t.Fatalf("status %d: %s", x.status, x.body)
				}
				var content string
				var got []gjson.Result
				if stream {
					rep := readStream(t, strings.NewReader(string(x.body)))
					content = rep.content
					for _, data := range rep.raw {
						got = append(got, gjson.Get(data, "choices.0.delta.annotations").Array()...)
					}
				} else {
					msg := gjson.GetBytes(x.body, "choices.0.message")
					content, got = msg.Get("content").String(), msg.Get("annotations").Array()
				}
				var said strings.Builder
				var want []string
				for _, rd := range tt.rounds {
					said.WriteString(rd.text)
					want = append(want, rd.notes...)
				}
				if content != said.String() {
					t.Fatalf("content %q, want %q", content, said.String())
				}
				if len(got) != len(want) {
					t.Fatalf("the client got %d annotations, want %d: %v", len(got), len(want), got)
				}
				chars := []rune(content)
				for i, g := range got {
					w := gjson.Parse(want[i])
					if w.Get("type").String() != "url_citation" {
						if g.Raw != w.Raw {
							t.Errorf("annotation %d is %s, want it as it came: %s", i, g.Raw, w.Raw)
						}
						continue
					}
					start, end := int(g.Get("url_citation.start_index").Int()), int(g.Get("url_citation.end_index").Int())
					if start < 0 || start > end || end > len(chars) {
						t.Errorf("citation %d spans %d..%d, outside the %d characters of %q", i, start, end, len(chars), content)
						continue
					}
					if marked, words := string(chars[start:end]), w.Get("url_citation.title").String(); marked != words {
						t.Errorf("citation %d marks %q in %q, want %q", i, marked, content, words)
					}
				}
			})
		}
	}
}
