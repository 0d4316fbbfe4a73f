package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/session"
)

// arrow splits a header value "A->B" into its two numbers.
func arrow(t *testing.T, h http.Header, name string) (int, int) {
	t.Helper()
	v := h.Get(name)
	a, b, ok := strings.Cut(v, "->")
	if !ok {
		t.Fatalf("%s = %q, want A->B", name, v)
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s = %q: not numbers", name, v)
	}
	return x, y
}

// countTokens counts text with the named encoding, the test's independent
// reference for the gateway's per-tool sums.
func countTokens(t *testing.T, enc tokenizer.Encoding, text string) int {
	t.Helper()
	c, err := tokenizer.Get(enc)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Count(text)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// near reports whether got is within 3% (and 3 tokens) of want: the
// gateway sums per-tool counts, which can split a few tokens differently at
// tool boundaries than counting the whole array at once.
func near(got, want int) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= 3+want*3/100
}

func TestToolgateHeadersMatchWhatTheUpstreamReceived(t *testing.T) {
	tools := testCatalog(60)
	clientTools, _ := json.Marshal(tools)
	for _, tc := range []struct {
		name   string
		model  string
		enc    tokenizer.Encoding
		stream bool
		// trailers: the streamed answer trickles in, so the client has
		// events (and the headers) before the turn's numbers are known.
		trailers bool
	}{
		{"a non-streamed turn reports tools, tool tokens, rounds and input tokens", "gpt-4o", tokenizer.O200kBase, false, false},
		{"a streamed turn reports tools, tool tokens and rounds when its headers are committed, and the whole turn's in trailers", "gpt-4o", tokenizer.O200kBase, true, true},
		{"a streamed turn whose answer arrives whole reports the whole turn's numbers in its headers", "gpt-4o", tokenizer.O200kBase, true, false},
		{"an older model is counted with cl100k_base", "gpt-4-0613", tokenizer.Cl100kBase, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
			if tc.trailers {
				model.ChunkDelay = 2 * time.Millisecond
			} else {
				model.Whole = true
			}
			base := newTestGateway(t, model)
			body := chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, tools, tc.stream,
				map[string]any{"model": tc.model})
			resp := post(t, base, body, nil)
			defer resp.Body.Close()
			respBody, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			recs := model.Records()
			last := recs[len(recs)-1]

			inTools, upTools := arrow(t, resp.Header, "X-Toolgate-Tools")
			if inTools != len(tools) || upTools != last.Tools {
				t.Errorf("X-Toolgate-Tools = %d->%d, want %d->%d (the last upstream request's tools)", inTools, upTools, len(tools), last.Tools)
			}
			inTok, upTok := arrow(t, resp.Header, "X-Toolgate-Tool-Tokens")
			wantIn := countTokens(t, tc.enc, string(clientTools))
			wantUp := countTokens(t, tc.enc, gjson.GetBytes(last.Body, "tools").Raw)
			if !near(inTok, wantIn) || !near(upTok, wantUp) {
				t.Errorf("X-Toolgate-Tool-Tokens = %d->%d, want about %d->%d", inTok, upTok, wantIn, wantUp)
			}
			if upTok*3 > inTok {
				t.Errorf("upstream tool tokens %d are not well under the client's %d", upTok, inTok)
			}
			if got := resp.Header.Get("X-Toolgate-Rounds"); got != strconv.Itoa(len(recs)) {
				t.Errorf("X-Toolgate-Rounds = %s, want %d (upstream calls)", got, len(recs))
			}
			_, hasInput := resp.Header["X-Toolgate-Input-Tokens"]
			if hasInput == tc.trailers {
				t.Errorf("X-Toolgate-Input-Tokens present = %v in the headers; want %v", hasInput, !tc.trailers)
			}
			if declared := len(resp.Trailer) > 0; declared != tc.trailers { // Go moves the Trailer header here
				t.Errorf("trailers %v declared; want trailers = %v", resp.Trailer, tc.trailers)
			}
			if tc.stream && !tc.trailers && resp.ContentLength != int64(len(respBody)) {
				t.Errorf("Content-Length %d for a %d-byte answer sent whole", resp.ContentLength, len(respBody))
			}
			final := resp.Header // a trickled turn's final numbers are its trailers
			if tc.trailers {
				final = resp.Trailer
				if got := final.Get("X-Toolgate-Rounds"); got != strconv.Itoa(len(recs)) {
					t.Errorf("trailer X-Toolgate-Rounds = %q, want %d (upstream calls)", got, len(recs))
				}
				if got, want := final.Get("X-Toolgate-Tools"), resp.Header.Get("X-Toolgate-Tools"); got != want {
					t.Errorf("trailer X-Toolgate-Tools = %q, header %q: the answering call is the same", got, want)
				}
			}
			direct, gw := arrow(t, final, "X-Toolgate-Input-Tokens")
			var sum int
			for _, r := range recs {
				sum += int(r.PromptTokens) // fakellm's prompt_tokens
			}
			if gw != sum {
				t.Errorf("gateway input tokens %d, want the sum of upstream usage %d", gw, sum)
			}
			if direct <= gw {
				t.Errorf("direct estimate %d not above the gateway's %d for a 60-tool catalog", direct, gw)
			}
		})
	}
}

func TestEncodingIsChosenByModelName(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  tokenizer.Encoding
	}{
		{"gpt-4o-mini", tokenizer.O200kBase},
		{"gpt-4.1", tokenizer.O200kBase},
		{"gpt-4", tokenizer.Cl100kBase},
		{"gpt-4-turbo", tokenizer.Cl100kBase},
		{"gpt-3.5-turbo-0125", tokenizer.Cl100kBase},
		{"openai/gpt-4-0613", tokenizer.Cl100kBase},
		{"o3-mini", tokenizer.O200kBase},
		{"llama-3-70b", tokenizer.O200kBase},
		{"", tokenizer.O200kBase},
	} {
		t.Run(tc.model+" uses "+string(tc.want), func(t *testing.T) {
			if got := encodingFor(tc.model); got != tc.want {
				t.Errorf("encodingFor(%q) = %s, want %s", tc.model, got, tc.want)
			}
		})
	}
}

// metricValue finds one sample in a Prometheus text exposition; -1 when
// absent.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics status %d", resp.StatusCode)
	}
	return string(b)
}

// scrapeUntil scrapes the metrics until done holds of them, or 2 s pass,
// and returns the last scrape: a request's metrics are written once its
// client has the answer, so a test may read them a moment early.
func scrapeUntil(t *testing.T, base string, done func(text string) bool) string {
	t.Helper()
	text := scrape(t, base)
	for deadline := time.Now().Add(2 * time.Second); !done(text) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		text = scrape(t, base)
	}
	return text
}

// missUpstream calls a client tool the request did not offer.
var missUpstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"util_gadget_40","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105}}`)
})

func TestMetricsAreExposedAndCount(t *testing.T) {
	m := NewMetrics()
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	base := newTestGateway(t, model, func(g *Gateway) { g.Metrics = m })
	body := chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(60), false, nil)
	for range 2 {
		resp := post(t, base, body, map[string]string{"X-Session-ID": "metrics-test"})
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	small := chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(3), false, nil)
	resp := post(t, base, small, nil)
	resp.Body.Close()
	m.PolicyReloaded(nil)
	m.PolicyReloaded(errors.New("bad yaml"))
	// A request is recorded when its handler returns, which can be just
	// after the client has read the response.
	var text string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		text = scrape(t, base)
		if metricValue(t, text, `toolgate_requests_total{mode="passthrough",route="chat",status="200"}`) >= 0 || time.Now().After(deadline) {
			break
		}
	}

	calls := len(model.Records())
	for _, tc := range []struct {
		name   string
		series string
		want   func(float64) bool
	}{
		{"rewritten requests are counted by route, mode and status", `toolgate_requests_total{mode="hybrid",route="chat",status="200"}`, eq(2)},
		{"passed-through chat requests are counted under mode passthrough", `toolgate_requests_total{mode="passthrough",route="chat",status="200"}`, eq(1)},
		{"a passed-through request is counted under its reason", `toolgate_passthrough_total{reason="fewer than min_tools"}`, eq(1)},
		{"upstream rounds of rewritten requests add up to the calls made", `toolgate_upstream_rounds_sum`, eq(float64(calls - 1))},
		{"search latency has one sample per tool_search answered", `toolgate_search_duration_seconds_count`, func(v float64) bool {
			return v == metricValue(t, text, "toolgate_tool_search_calls_total")
		}},
		{"gateway-added latency is observed per rewritten request", `toolgate_added_latency_seconds_count{stream="false"}`, eq(2)},
		{"client tool tokens are counted", `toolgate_tool_tokens_total{side="client"}`, gt(1000)},
		{"upstream tool tokens are far fewer than the client's", `toolgate_tool_tokens_total{side="upstream"}`, func(v float64) bool {
			return v > 0 && v < metricValue(t, text, `toolgate_tool_tokens_total{side="client"}`)/2
		}},
		{"input tokens through the gateway are reported", `toolgate_input_tokens_total{path="gateway"}`, gt(0)},
		{"the direct estimate is reported next to them", `toolgate_input_tokens_total{path="direct_estimate"}`, gt(0)},
		{"the session is counted once", `toolgate_sessions`, eq(1)},
		{"each tools array is parsed when first seen (the catalog and the small one)", `toolgate_tools_parse_cache_misses_total`, eq(2)},
		{"the second request finds its tools array parsed", `toolgate_tools_parse_cache_hits_total`, eq(1)},
		{"the first catalog lookup misses", `toolgate_catalog_cache_misses_total`, eq(1)},
		{"the second lookup of the same catalog hits", `toolgate_catalog_cache_hits_total`, eq(1)},
		{"the catalog held is counted at its estimated heap", `toolgate_catalog_cache_bytes`, gt(100 << 10)},
		{"no catalog was too large to keep", `toolgate_catalogs_too_large_total`, eq(0)},
		{"successful policy reloads are counted", `toolgate_policy_reloads_total{result="ok"}`, eq(1)},
		{"failed policy reloads are counted", `toolgate_policy_reloads_total{result="error"}`, eq(1)},
		{"the process collector reports RSS", `process_resident_memory_bytes`, gt(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := metricValue(t, text, tc.series)
			if v < 0 || !tc.want(v) {
				t.Errorf("%s = %v", tc.series, v)
			}
		})
	}

	t.Run("a call of a tool that was not active counts as a miss", func(t *testing.T) {
		m := NewMetrics()
		base := newTestGateway(t, missUpstream, func(g *Gateway) { g.Metrics = m })
		resp := post(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "compute the gadget flux"}}, testCatalog(60), false, nil), nil)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		text := scrapeUntil(t, base, func(text string) bool { return metricValue(t, text, "toolgate_tool_misses_total") == 1 })
		if v := metricValue(t, text, "toolgate_tool_misses_total"); v != 1 {
			t.Errorf("toolgate_tool_misses_total = %v, want 1", v)
		}
	})
	t.Run("a failing session store is counted and the request still succeeds", func(t *testing.T) {
		m := NewMetrics()
		base := newTestGateway(t, model, func(g *Gateway) { g.Metrics = m; g.Sessions = brokenStore{} })
		resp := post(t, base, body, nil)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		get, put := storeErrors(t, base, 1)
		if get < 1 || put < 1 {
			t.Errorf("store errors get = %v, put = %v; want both counted", get, put)
		}
	})
	t.Run("without Metrics there is no /metrics route", func(t *testing.T) {
		base := newTestGateway(t, model)
		resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("status %d, want 404", resp.StatusCode)
		}
	})
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func gt(min float64) func(float64) bool  { return func(v float64) bool { return v > min } }

// waitLines returns the records once there are n of them (a record is
// written when its handler returns, which can be just after the client has
// read the response), or whatever there is after two seconds.
func (s *syncBuffer) waitLines(t *testing.T, n int) []gjson.Result {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		out := s.lines(t)
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *syncBuffer) lines(t *testing.T) []gjson.Result {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() == 0 {
		return nil
	}
	var out []gjson.Result
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if !gjson.Valid(l) {
			t.Fatalf("decision log line is not JSON: %s", l)
		}
		out = append(out, gjson.Parse(l))
	}
	return out
}

func TestDecisionLogSaysWhyEachToolIsActive(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(cfg, []byte("core: [\"chat_list_channels\"]\ndeny: [\"*delete*\"]\ngateway: {preselect: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := policy.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	base := newTestGateway(t, model, func(g *Gateway) {
		g.Policy = func() *policy.Snapshot { return snap }
		g.DecisionLog = slog.New(slog.NewJSONHandler(&buf, nil))
	})
	const secret = "Bearer sk-very-secret-credential-123"
	hdr := map[string]string{"Authorization": secret, "X-Session-ID": "s-42"}
	msgs := []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}
	tools := testCatalog(60)
	resp := post(t, base, chatRequest(t, msgs, tools, false, nil), hdr)
	first := gjson.ParseBytes(mustRead(t, resp))
	// The second turn carries the first call in its history.
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": json.RawMessage(first.Get("choices.0.message.tool_calls").Raw)},
		map[string]any{"role": "tool", "tool_call_id": first.Get("choices.0.message.tool_calls.0.id").String(), "content": "created #7"})
	resp = post(t, base, chatRequest(t, msgs, tools, true, nil), hdr)
	mustRead(t, resp)

	lines := buf.waitLines(t, 2)
	if len(lines) != 2 {
		t.Fatalf("%d decision records, want 2", len(lines))
	}
	reason := func(rec gjson.Result, name string) (string, string) {
		a := rec.Get(`active.#(name==` + strconv.Quote(name) + `)`)
		return a.Get("reason").String(), a.Get("rule").String()
	}
	for _, tc := range []struct {
		name  string
		check func() bool
	}{
		{"the core tool is active as core, with the rule that made it so", func() bool {
			r, rule := reason(lines[0], "chat_list_channels")
			return r == reasonCore && strings.Contains(rule, "chat_list_channels")
		}},
		{"the tool the model first called was found by search or preselection", func() bool {
			r, _ := reason(lines[0], "repo_create_issue")
			return r == reasonDiscovered || r == reasonPreselect
		}},
		{"on the next turn the tool called in the history is active as history", func() bool {
			r, _ := reason(lines[1], "repo_create_issue")
			return r == reasonHistory
		}},
		{"after the tool result, the default two follow-up tools join as follow-up", func() bool {
			n := 0
			for _, a := range lines[1].Get("active").Array() {
				if a.Get("reason").String() == reasonFollowUp {
					n++
				}
			}
			return n == 2
		}},
		{"denied tools are listed as hidden with the deny rule", func() bool {
			h := lines[0].Get(`hidden.#(name=="fs_delete_file")`)
			return strings.Contains(h.Get("rule").String(), "delete") && lines[0].Get("hidden_count").Int() == 2
		}},
		{"each search has its query and scored results", func() bool {
			for _, l := range lines {
				for _, s := range l.Get("searches").Array() {
					if s.Get("query").String() == "" || !s.Get("results.0.score").Exists() {
						return false
					}
				}
			}
			return lines[0].Get("searches.#").Int()+lines[1].Get("searches.#").Int() > 0
		}},
		{"the session is the tenant-namespaced store key", func() bool {
			return session.IsKey(lines[0].Get("session").String()) && strings.HasSuffix(lines[0].Get("session").String(), ":id:s-42")
		}},
		{"tokens and upstream calls are recorded", func() bool {
			return lines[0].Get("tool_tokens_client").Int() > 0 && lines[0].Get("upstream_calls").Int() >= 1 &&
				lines[0].Get("input_tokens").Int() > 0 && lines[0].Get("input_tokens_direct_estimate").Int() > 0
		}},
		{"no record holds the credential", func() bool {
			buf.mu.Lock()
			defer buf.mu.Unlock()
			return !strings.Contains(buf.b.String(), "sk-very-secret-credential-123")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.check() {
				t.Errorf("records:\n%s\n%s", lines[0].Raw, lines[1].Raw)
			}
		})
	}
}

func mustRead(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return b
}

func TestDebugSessionsNeedsTheAdminToken(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	var buf syncBuffer
	base := newTestGateway(t, model, func(g *Gateway) {
		g.AdminToken = "admin-s3cret"
		g.DecisionLog = slog.New(slog.NewJSONHandler(&buf, nil))
	})
	off := newTestGateway(t, model)
	tenant := map[string]string{"Authorization": "Bearer sk-tenant-a", "X-Session-ID": "dbg-1"}
	resp := post(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(60), false, nil), tenant)
	mustRead(t, resp)
	recs := buf.waitLines(t, 1)
	if len(recs) != 1 {
		t.Fatalf("%d decision records, want 1", len(recs))
	}
	key := recs[0].Get("session").String()

	get := func(root, id string, hdr map[string]string) (int, string) {
		return getWithHeaders(t, strings.TrimSuffix(root, "/v1")+"/debug/sessions/"+id, hdr)
	}
	good := map[string]string{AdminTokenHeader: "admin-s3cret"}
	for _, tc := range []struct {
		name       string
		root, id   string
		hdr        map[string]string
		wantStatus int
		wantBody   string
	}{
		{"without an admin token configured the route does not exist", off, key, good, http.StatusNotFound, ""},
		{"without the token header it refuses", base, key, nil, http.StatusUnauthorized, ""},
		{"with a wrong token it refuses", base, key, map[string]string{AdminTokenHeader: "admin-s3cres"}, http.StatusUnauthorized, ""},
		{"the tenant's own credential is not an admin token", base, key, map[string]string{"Authorization": "Bearer sk-tenant-a"}, http.StatusUnauthorized, ""},
		{"with the token it shows the session by its store key", base, key, good, http.StatusOK, "repo_create_issue"},
		{"with the token and the tenant's credential it finds the session by X-Session-ID", base, "dbg-1",
			map[string]string{AdminTokenHeader: "admin-s3cret", "Authorization": "Bearer sk-tenant-a"}, http.StatusOK, key},
		{"another tenant's credential does not reach the session", base, "dbg-1",
			map[string]string{AdminTokenHeader: "admin-s3cret", "Authorization": "Bearer sk-tenant-b"}, http.StatusNotFound, ""},
		{"an unknown session is 404", base, "nope", good, http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(tc.root, tc.id, tc.hdr)
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("status %d body %s, want %d containing %q", status, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

// brokenStore is a session store whose server is down.
type brokenStore struct{}

var errStoreDown = errors.New("session store unreachable")

func (brokenStore) Get(context.Context, string) (session.State, error) {
	return session.State{}, errStoreDown
}
func (brokenStore) Put(context.Context, string, session.State) error { return errStoreDown }
func (brokenStore) Delete(context.Context, string) error             { return errStoreDown }

func TestPprofNeedsTheAdminToken(t *testing.T) {
	model := &fakellm.Model{}
	base := strings.TrimSuffix(newTestGateway(t, model, func(g *Gateway) { g.AdminToken = "admin-s3cret" }), "/v1")
	off := strings.TrimSuffix(newTestGateway(t, model), "/v1")
	good := map[string]string{AdminTokenHeader: "admin-s3cret"}
	for _, tc := range []struct {
		name       string
		url        string
		hdr        map[string]string
		wantStatus int
		wantBody   string
	}{
		{"without an admin token configured the profiles are not served", off + "/debug/pprof/", good, http.StatusNotFound, ""},
		{"without the token header it refuses", base + "/debug/pprof/", nil, http.StatusUnauthorized, ""},
		{"with a wrong token it refuses a profile", base + "/debug/pprof/heap", map[string]string{AdminTokenHeader: "nope"}, http.StatusUnauthorized, ""},
		{"with the token it lists the profiles", base + "/debug/pprof/", good, http.StatusOK, "goroutine"},
		{"with the token it serves a named profile", base + "/debug/pprof/goroutine?debug=1", good, http.StatusOK, "goroutine profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := getWithHeaders(t, tc.url, tc.hdr)
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("status %d body %.200s, want %d containing %q", status, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

// getWithHeaders GETs url with the given headers and returns the status and
// body.
func getWithHeaders(t *testing.T, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUpstreamCacheHitsAreReported checks that the prompt-cache hits an
// upstream reports reach the metrics and the decision log, summed over a
// turn's calls: a gateway changes the tools array, and with it what a
// provider's cache can serve, so operators need the real number next to
// the token counts.
func TestUpstreamCacheHitsAreReported(t *testing.T) {
	answer := func(details string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2000,"completion_tokens":5,"total_tokens":2005`+details+`}}`)
		}
	}
	for _, tc := range []struct {
		name    string
		details string
		want    float64 // -1: no attribute in the decision record
	}{
		{"an upstream's reported cache hits are counted", `,"prompt_tokens_details":{"cached_tokens":1536}`, 1536},
		{"an upstream that reports none adds nothing and claims nothing", ``, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics()
			var buf syncBuffer
			base := newTestGateway(t, answer(tc.details), func(g *Gateway) {
				g.Metrics = m
				g.DecisionLog = slog.New(slog.NewJSONHandler(&buf, nil))
			})
			resp := post(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "Create an issue about the crash."}}, testCatalog(60), false, nil), nil)
			mustRead(t, resp)
			recs := buf.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			got := recs[0].Get("input_tokens_cached")
			switch {
			case tc.want < 0 && got.Exists():
				t.Errorf("the record claims %v cached tokens the upstream never reported", got)
			case tc.want >= 0 && got.Float() != tc.want:
				t.Errorf("input_tokens_cached = %v, want %v:\n%s", got, tc.want, recs[0].Raw)
			}
			metric := metricValue(t, scrape(t, base), "toolgate_input_tokens_cached_total")
			if want := max(tc.want, 0); metric != want {
				t.Errorf("toolgate_input_tokens_cached_total = %v, want %v", metric, want)
			}
		})
	}
}

// heldWriter is a decision-log sink that holds every write until the test
// releases it, or gives up after a while and says so.
type heldWriter struct {
	release  chan struct{}
	gaveUp   chan struct{} // closed when a write stopped waiting
	once     sync.Once
	received syncBuffer
}

func (h *heldWriter) Write(p []byte) (int, error) {
	select {
	case <-h.release:
	case <-time.After(time.Second):
		h.once.Do(func() { close(h.gaveUp) })
	}
	return h.received.Write(p)
}

func TestTheClientHasItsAnswerBeforeTheDecisionIsLogged(t *testing.T) {
	// An upstream that answers at once, the whole stream in one write: the
	// gateway has the turn in hand before it first waits.
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, fakellm.TextStream("chatcmpl-1", "gpt-4o", "Done.", " Nothing", " to do."))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":2,"total_tokens":902}}`)
	})
	for _, tc := range []struct {
		name   string
		stream bool
	}{
		{"a JSON answer reaches the client while the decision record is still being written", false},
		{"a streamed answer the gateway had whole reaches the client while the decision record is still being written", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &heldWriter{release: make(chan struct{}), gaveUp: make(chan struct{})}
			base := newTestGateway(t, upstream, func(g *Gateway) {
				g.DecisionLog = slog.New(slog.NewJSONHandler(log, nil))
			})
			msgs := []map[string]any{{"role": "user", "content": "Create an issue about the crash."}}
			resp := post(t, base, chatRequest(t, msgs, testCatalog(60), tc.stream, nil), nil)
			body := mustRead(t, resp)
			close(log.release)
			if !strings.Contains(string(body), "Done.") {
				t.Fatalf("answer %s, want the upstream's text", body)
			}
			select {
			case <-log.gaveUp:
				t.Fatal("the client got its answer only after the decision log's write gave up waiting for it")
			default:
			}
			if recs := log.received.waitLines(t, 1); len(recs) != 1 {
				t.Errorf("%d decision records, want 1", len(recs))
			}
		})
	}
}

// TestAMissIsACallOfAToolTheUpstreamWasNotSent: a miss is counted
// against the tools array of the call the model answered, not against
// the turn's active set, which holds guesses a search round leaves out
// and grows with the searches of the same response.
func TestAMissIsACallOfAToolTheUpstreamWasNotSent(t *testing.T) {
	reply := func(calls ...[2]string) string {
		var cs []string
		for i, c := range calls {
			cs = append(cs, fmt.Sprintf(`{"id":"call_%d","type":"function","function":{"name":%q,"arguments":%q}}`, i, c[0], c[1]))
		}
		return `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
			strings.Join(cs, ",") + `]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105}}`
	}
	search := [2]string{SearchToolName, `{"query":"create issue repository"}`}
	tests := []struct {
		name string
		// answer returns the n-th upstream call's reply, given the tool
		// names of every call so far (the last is this call's).
		answer func(t *testing.T, seen [][]string) string
		want   float64
	}{
		{"a call of a tool the search round left out is a miss", func(t *testing.T, seen [][]string) string {
			if len(seen) == 1 {
				return reply(search)
			}
			for _, n := range seen[0] {
				if n != SearchToolName && !slices.Contains(seen[1], n) {
					return reply([2]string{n, "{}"})
				}
			}
			t.Fatalf("the search round offered every tool of the first call; the test needs one it left out")
			return ""
		}, 1},
		{"a call next to the search that finds its tool is a miss", func(t *testing.T, seen [][]string) string {
			if slices.Contains(seen[0], "repo_create_issue") {
				t.Fatalf("the first call offered repo_create_issue; the test needs a tool it did not")
			}
			return reply(search, [2]string{"repo_create_issue", "{}"})
		}, 1},
		{"a call of a tool the call offered is no miss", func(t *testing.T, seen [][]string) string {
			return reply([2]string{seen[0][len(seen[0])-1], "{}"})
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen [][]string
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				seen = append(seen, toolNames(b))
				answer := tt.answer(t, seen)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, answer)
			})
			m := NewMetrics()
			base := newTestGateway(t, up, func(g *Gateway) { g.Metrics = m })
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "compute the gadget flux"}}, testCatalog(60), false, nil), nil)
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			text := scrapeUntil(t, base, func(text string) bool { return metricValue(t, text, "toolgate_upstream_rounds_count") == 1 })
			if v := metricValue(t, text, "toolgate_tool_misses_total"); v != tt.want {
				t.Errorf("toolgate_tool_misses_total = %v, want %v", v, tt.want)
			}
		})
	}
}

// TestPassedThroughRequestsCountInTheTokenMetrics: a savings ratio read
// from the token metrics must cover every chat request with tools, not
// only those the gateway rewrote.
func TestPassedThroughRequestsCountInTheTokenMetrics(t *testing.T) {
	const answer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5000,"completion_tokens":1,"total_tokens":5001}}`
	tests := []struct {
		name, policy, reason string
		stream               bool
		// what the upstream got against what the client sent, and
		// whether the input tokens are counted
		fewerSent, input bool
	}{
		{"a request with fewer than min_tools counts its tools and prompt on both sides", "{}\n", "fewer than min_tools", false, false, true},
		{"a tool the policy removed counts on the client's side only", "deny: [repo_list_issues]\ngateway: {mode: passthrough}\n", "mode passthrough", false, true, true},
		{"a streamed request without a usage event counts its tools but not its prompt", "{}\n", "fewer than min_tools", true, false, false},
		{"a streamed request counts its prompt from the usage event", "{}\n", "fewer than min_tools", true, false, true},
		{"a streamed request whose usage follows a long answer counts its prompt", "{}\n", "fewer than min_tools", true, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.stream {
					w.Header().Set("Content-Type", "text/event-stream")
					text := textChunk("hi")
					if strings.Contains(tt.name, "long answer") {
						text = strings.Repeat(textChunk(strings.Repeat("word ", 50)), 400) // ~100 KB, in many reads
					}
					_, _ = io.WriteString(w, text+finishChunk("stop"))
					if tt.input {
						_, _ = io.WriteString(w, sseData(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5000,"completion_tokens":1,"total_tokens":5001}}`))
					}
					_, _ = io.WriteString(w, doneEvent)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, answer)
			})
			m := NewMetrics()
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, tt.policy)), func(g *Gateway) { g.Metrics = m })
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "hi"}}, testCatalog(3), tt.stream, nil), nil)
			if x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			text := scrapeUntil(t, base, func(text string) bool {
				return metricValue(t, text, `toolgate_passthrough_total{reason="`+tt.reason+`"}`) == 1
			})
			client := metricValue(t, text, `toolgate_tool_tokens_total{side="client"}`)
			sent := metricValue(t, text, `toolgate_tool_tokens_total{side="upstream"}`)
			gw := metricValue(t, text, `toolgate_input_tokens_total{path="gateway"}`)
			direct := metricValue(t, text, `toolgate_input_tokens_total{path="direct_estimate"}`)
			if client <= 0 || sent <= 0 || (sent < client) != tt.fewerSent {
				t.Errorf("tool tokens client %v, upstream %v; want both counted, upstream fewer: %v", client, sent, tt.fewerSent)
			}
			// A tool held back counts in the direct estimate as the model
			// reads it, fewer tokens than its JSON.
			heldBack := direct > 5000 && direct < 5000-sent+client
			switch {
			case tt.input && (gw != 5000 || (tt.fewerSent && !heldBack) || (!tt.fewerSent && direct != 5000)):
				t.Errorf("input tokens gateway %v, direct %v; want 5000, and the direct estimate 5000 plus the held-back tool's tokens as read (under its %v of JSON): %v",
					gw, direct, client-sent, tt.fewerSent)
			case !tt.input && (gw > 0 || direct > 0):
				t.Errorf("input tokens gateway %v, direct %v; want none counted", gw, direct)
			}
		})
	}
}

// TestARefusedAdminTokenIsLoggedWithoutTheToken: a probe of the debug
// routes shows in the log, and what it sent does not.
func TestARefusedAdminTokenIsLoggedWithoutTheToken(t *testing.T) {
	logs := &syncBuffer{}
	base := newTestGateway(t, &recorder{}, func(g *Gateway) {
		g.AdminToken = "admin-s3cret"
		g.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	root := strings.TrimSuffix(base, "/v1")
	for _, tt := range []struct {
		name, path, token string
	}{
		{"a wrong token for the sessions route", "/debug/sessions/x", "guess-1"},
		{"no token for the profiles", "/debug/pprof/", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.token != "" {
				hdr[AdminTokenHeader] = tt.token
			}
			if status, _ := getWithHeaders(t, root+tt.path, hdr); status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", status)
			}
			out := logs.String()
			if !strings.Contains(out, "admin token refused") || !strings.Contains(out, tt.path) {
				t.Errorf("the log does not show the refusal of %s:\n%s", tt.path, out)
			}
			if strings.Contains(out, "guess-1") {
				t.Errorf("the log shows the token sent:\n%s", out)
			}
		})
	}
}
