package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/session"
)

// TestLaterTurnsKeepTheToolsAlreadyUsed: after a first turn that had to
// search, the next turn of the same conversation starts with the found tool
// already offered, whether the session is named by X-Session-ID, found by
// fingerprint, or lost (the history is the truth).
func TestLaterTurnsKeepTheToolsAlreadyUsed(t *testing.T) {
	task := fakellm.Task{
		Prompt: "Let everyone know the deploy finished.",
		Steps:  []fakellm.Step{{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{}`)}},
		Answer: "Done.",
	}
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		forget bool
	}{
		{"a session named by X-Session-ID keeps the tool", map[string]string{"X-Session-ID": "s-1"}, false},
		{"a session found by fingerprint keeps the tool", nil, false},
		{"a lost session still offers the tool called in the history", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{task}}
			mem := session.NewMemory(100, 0)
			base := newTestGateway(t, model, searchOnly(t), func(g *Gateway) { g.Sessions = mem })
			tools := testCatalog(30)
			msgs := []map[string]any{{"role": "system", "content": "agent"}, {"role": "user", "content": task.Prompt}}
			resp := post(t, base, chatRequest(t, msgs, tools, false, nil), tc.hdr)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out struct {
				Choices []struct {
					Message map[string]any `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
				t.Fatalf("first turn: %s", b)
			}
			first := model.Records()
			if slices.Contains(first[0].Names, "chat_post_message") {
				t.Fatalf("the tool was offered before any search; the test needs a search to mean anything")
			}
			if tc.forget {
				for _, k := range mem.Keys() {
					_ = mem.Delete(t.Context(), k)
				}
			}
			model.Reset()
			msgs = append(msgs, out.Choices[0].Message, map[string]any{"role": "tool", "tool_call_id": out.Choices[0].Message["tool_calls"].([]any)[0].(map[string]any)["id"], "content": "ok"})
			msgs = append(msgs, map[string]any{"role": "user", "content": "Thanks. Anything else?"})
			resp = post(t, base, chatRequest(t, msgs, tools, false, nil), tc.hdr)
			resp.Body.Close()
			recs := model.Records()
			if len(recs) == 0 || !slices.Contains(recs[0].Names, "chat_post_message") {
				t.Fatalf("second turn's first upstream request offered %v, want chat_post_message among them", recs[0].Names)
			}
			if tc.forget {
				return
			}
			// With the session, everything turn 1 ended with is offered again,
			// in the same order (a stable prefix keeps upstream prompt caches
			// warm), including tools found but never called.
			last := first[len(first)-1].Names
			if got := recs[0].Names; len(got) < len(last) || !slices.Equal(got[:len(last)], last) {
				t.Errorf("second turn offered %v, want it to start with turn 1's %v", got, last)
			}
		})
	}
}

// TestALongSessionIDIsHeldUnderAShortKey: the store holds a long
// X-Session-ID's session under a key of bounded length (a 900 KB id per
// session used to be held whole, in the store and in every decision
// record), and the debug route still finds it by the id.
func TestALongSessionIDIsHeldUnderAShortKey(t *testing.T) {
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
	mem := session.NewMemory(100, 0)
	var log syncBuffer
	base := newTestGateway(t, model, func(g *Gateway) {
		g.Sessions = mem
		g.AdminToken = "adm"
		g.DecisionLog = slog.New(slog.NewJSONHandler(&log, nil))
	})
	id := strings.Repeat("conversation-", 5000) // 65 KB
	hdr := map[string]string{"Authorization": "Bearer sk-tenant-a", "X-Session-ID": id}
	mustRead(t, post(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}, testCatalog(30), false, nil), hdr))
	recs := log.waitLines(t, 1)
	if len(recs) != 1 {
		t.Fatalf("%d decision records, want 1", len(recs))
	}
	key := recs[0].Get("session").String()
	debug := strings.TrimSuffix(base, "/v1") + "/debug/sessions/"
	status, body := getWithHeaders(t, debug+id, map[string]string{AdminTokenHeader: "adm", "Authorization": "Bearer sk-tenant-a"})
	byKey, _ := getWithHeaders(t, debug+key, map[string]string{AdminTokenHeader: "adm"})
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"the store holds one session, under a short key", len(mem.Keys()) == 1 && len(mem.Keys()[0]) <= 100},
		{"the decision record names the session by that key", mem.Len() == 1 && key == mem.Keys()[0] && session.IsKey(key)},
		{"the debug route finds the session by the long id", status == http.StatusOK && strings.Contains(body, key)},
		{"the debug route finds the session by the key the record names", byKey == http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("keys %.300q, record's %.300q, debug %d %.300s", mem.Keys(), key, status, body)
			}
		})
	}
}

// TestTheDebugRouteFindsASessionByAnyKeyTheDecisionLogPrints: the debug
// route reads an id as a store key only of the kinds it knew, so the key
// of a session derived from a prompt_cache_key, copied from the decision
// log, was looked up as an X-Session-ID and answered 404.
func TestTheDebugRouteFindsASessionByAnyKeyTheDecisionLogPrints(t *testing.T) {
	msgs := []map[string]any{{"role": "system", "content": "agent"}, {"role": "user", "content": twoStepTask.Prompt}}
	for _, tc := range []struct {
		name  string
		hdr   map[string]string
		extra map[string]any
		kind  string // in the key the record prints
	}{
		{"a session named by X-Session-ID is found by its key", map[string]string{"X-Session-ID": "s-1"}, nil, ":id:"},
		{"a session derived from the conversation's opening is found by its key", nil, nil, ":fp:"},
		{"a session derived from prompt_cache_key is found by its key", nil, map[string]any{"prompt_cache_key": "conv-a"}, ":fc:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
			var log syncBuffer
			base := newTestGateway(t, model, func(g *Gateway) {
				g.AdminToken = "adm"
				g.DecisionLog = slog.New(slog.NewJSONHandler(&log, nil))
			})
			mustRead(t, post(t, base, chatRequest(t, msgs, testCatalog(30), false, tc.extra), tc.hdr))
			recs := log.waitLines(t, 1)
			if len(recs) != 1 {
				t.Fatalf("%d decision records, want 1", len(recs))
			}
			key := recs[0].Get("session").String()
			if !strings.Contains(key, tc.kind) {
				t.Fatalf("the record names the session %q, want a key of kind %q", key, tc.kind)
			}
			// The admin token alone: a store key needs no tenant's credential.
			status, body := getWithHeaders(t, strings.TrimSuffix(base, "/v1")+"/debug/sessions/"+key, map[string]string{AdminTokenHeader: "adm"})
			if status != http.StatusOK || gjson.Get(body, "key").String() != key {
				t.Errorf("GET /debug/sessions/%s: %d %.300s, want 200 with the session", key, status, body)
			}
		})
	}
}

// scriptedSearch is an upstream that calls tool_search with query in a
// turn's first call and answers in text once its search is answered. It
// records the tool names of every call and the search's result text.
type scriptedSearch struct {
	query func(firstCall []string) string
	mu    sync.Mutex
	calls [][]string
	found []string // the results text of every search answered
}

func (s *scriptedSearch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	names := toolNames(b)
	last := gjson.GetBytes(b, "messages.@reverse.0")
	s.mu.Lock()
	s.calls = append(s.calls, names)
	q := ""
	if last.Get("role").String() == "tool" {
		s.found = append(s.found, last.Get("content").String())
	} else {
		q = s.query(names)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if q == "" {
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}]}`)
		return
	}
	args, _ := json.Marshal(map[string]string{"query": q})
	_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_s","type":"function","function":{"name":%q,"arguments":%q}}]},"finish_reason":"tool_calls"}]}`, SearchToolName, args)
}

// TestAGuessASearchFindsStaysForTheNextTurn: the README promises that
// tools the model found with tool_search stay; a preselected tool the
// search returns again is one of them, not a guess the next user turn
// drops.
func TestAGuessASearchFindsStaysForTheNextTurn(t *testing.T) {
	var guess string
	up := &scriptedSearch{query: func(first []string) string {
		for _, n := range first {
			if n != SearchToolName {
				guess = n
				return strings.ReplaceAll(n, "_", " ")
			}
		}
		t.Fatalf("the first call offered no preselected tool")
		return ""
	}}
	var gw *Gateway
	base := newTestGateway(t, up, func(g *Gateway) { gw = g })
	msgs := []map[string]any{{"role": "user", "content": "File a bug about the login crash in the repository."}}
	post(t, base, chatRequest(t, msgs, testCatalog(40), false, nil), map[string]string{"X-Session-ID": "refound"}).Body.Close()
	if len(up.found) != 1 || !slices.Contains(foundTools(up.found[0]), guess) {
		t.Fatalf("the search for %q found %v; the test needs it to find the guess", guess, up.found)
	}
	st, err := gw.Sessions.Get(context.Background(), session.Key(session.Tenant("Bearer sk-test"), "refound", "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.Active, guess) || slices.Contains(st.Guesses, guess) {
		t.Errorf("session active %v, guesses %v; want %s active and no longer a guess", st.Active, st.Guesses, guess)
	}
	if age := time.Since(st.Updated); age < 0 || age > time.Minute {
		t.Errorf("session updated %v; want the time of the turn", st.Updated)
	}
}

// TestASearchRoundOffersWhatItListsUnderASmallMaxActive: the results
// text tells the model the tools are in its list; with max_active small,
// the round must offer every tool it lists, the best ranked among them.
func TestASearchRoundOffersWhatItListsUnderASmallMaxActive(t *testing.T) {
	for _, maxActive := range []int{3, 5} {
		t.Run(fmt.Sprintf("with max_active %d the round offers every tool it lists, and no more than %d", maxActive, maxActive), func(t *testing.T) {
			up := &scriptedSearch{query: func([]string) string { return "create issue repository" }}
			pol := fmt.Sprintf("core: [calendar_create_event]\ngateway: {max_active: %d}\n", maxActive)
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, pol)))
			msgs := []map[string]any{{"role": "user", "content": "Send the weekly report."}}
			post(t, base, chatRequest(t, msgs, testCatalog(40), false, nil), nil).Body.Close()
			if len(up.found) != 1 || len(up.calls) != 2 {
				t.Fatalf("%d searches answered over %d calls; want 1 over 2", len(up.found), len(up.calls))
			}
			names := foundTools(up.found[0])
			offered := up.calls[1]
			if len(names) == 0 || names[0] != "repo_create_issue" {
				t.Fatalf("the search listed %v; the test needs repo_create_issue first", names)
			}
			for _, n := range names {
				if !slices.Contains(offered, n) {
					t.Errorf("the results list %s, which the round's tools %v lack", n, offered)
				}
			}
			if tools := len(offered) - 1; tools > maxActive { // tool_search aside
				t.Errorf("the round offered %d tools besides tool_search; max_active is %d", tools, maxActive)
			}
		})
	}
}

// holdFirstCall is an upstream that holds the first call whose latest user
// message is prompt until release is closed, saying when it arrived: by
// then the gateway has loaded that request's session.
type holdFirstCall struct {
	h                http.Handler
	prompt           string
	arrived, release chan struct{}
	once             sync.Once
}

func (u *holdFirstCall) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	latest := ""
	gjson.GetBytes(b, "messages").ForEach(func(_, m gjson.Result) bool {
		if m.Get("role").String() == "user" {
			latest = m.Get("content").String()
		}
		return true
	})
	if latest == u.prompt {
		u.once.Do(func() { close(u.arrived); <-u.release })
	}
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(b))), int64(len(b))
	u.h.ServeHTTP(w, r)
}

// TestTwoRequestsOfOneSessionAtOnceKeepWhatEachFound: a subagent's request
// (B) on the session of an agent's task (A) loads the session, A's first
// step searches and saves what it found, then B saves. B's save wrote over
// A's with the state B had loaded, and A's second step searched again for
// a tool A's search had found. The store merges B's state into A's.
func TestTwoRequestsOfOneSessionAtOnceKeepWhatEachFound(t *testing.T) {
	sub := fakellm.Task{
		Prompt: "Tell the team the deploy is done.",
		Steps:  []fakellm.Step{{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{"id":"eng"}`)}},
		Answer: "Told them.",
	}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) session.Store
	}{
		{"in memory", func(*testing.T) session.Store { return session.NewMemory(100, 0) }},
		{"in redis", func(t *testing.T) session.Store {
			store, err := session.NewRedis("redis://"+miniredis.RunT(t).Addr(), time.Hour, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			return store
		}},
	} {
		t.Run("a subagent's request saved "+tc.name+" after the agent's first step leaves its finds for the second", func(t *testing.T) {
			model := &fakellm.Model{Tasks: []fakellm.Task{issueTwiceTask, sub}}
			up := &holdFirstCall{h: model, prompt: sub.Prompt, arrived: make(chan struct{}), release: make(chan struct{})}
			store := tc.store(t)
			base := newTestGateway(t, up, searchOnly(t), func(g *Gateway) { g.Sessions = store })
			hdr := map[string]string{"X-Session-ID": "shared"}
			tools := testCatalog(40)

			bDone := make(chan error, 1)
			body := chatRequest(t, []map[string]any{{"role": "user", "content": sub.Prompt}}, tools, false, nil)
			go func() {
				req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(string(body)))
				req.Header.Set("Authorization", "Bearer sk-test")
				req.Header.Set("X-Session-ID", "shared")
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				bDone <- err
			}()
			select {
			case <-up.arrived:
			case <-time.After(10 * time.Second):
				t.Fatal("the subagent's request never reached the upstream")
			}

			msgs := []map[string]any{{"role": "user", "content": issueTwiceTask.Prompt}}
			x := send(t, base, chatRequest(t, msgs, tools, false, nil), hdr)
			msg := gjson.GetBytes(x.body, "choices.0.message")
			if call := msg.Get("tool_calls.0.function.name").String(); call != "repo_create_issue" {
				t.Fatalf("the agent's first step called %q: %s", call, x.body)
			}
			close(up.release)
			if err := <-bDone; err != nil {
				t.Fatalf("the subagent's request: %v", err)
			}

			var m map[string]any
			_ = json.Unmarshal([]byte(msg.Raw), &m)
			msgs = append(msgs, m, map[string]any{"role": "tool", "tool_call_id": msg.Get("tool_calls.0.id").String(), "content": "ok"})
			before := len(model.Records())
			x = send(t, base, chatRequest(t, msgs, tools, false, nil), hdr)
			if call := gjson.GetBytes(x.body, "choices.0.message.tool_calls.0.function.name").String(); call != "repo_list_issues" {
				t.Fatalf("the agent's second step called %q: %s", call, x.body)
			}
			if recs := model.Records()[before:]; len(recs) != 1 || !slices.Contains(recs[0].Names, "repo_list_issues") {
				var offered [][]string
				for _, r := range recs {
					offered = append(offered, r.Names)
				}
				t.Errorf("the second step took %d upstream calls offering %v; want one, offering repo_list_issues, which the first step's search found", len(recs), offered)
			}
			st, err := store.Get(context.Background(), session.Key(session.Tenant("Bearer sk-test"), "shared", "", "", ""))
			if err != nil || !slices.Contains(st.Active, "chat_post_message") || !slices.Contains(st.Active, "repo_list_issues") {
				t.Errorf("the session holds %v (%v), want the subagent's chat_post_message and the agent's repo_list_issues", st.Active, err)
			}
		})
	}
}

// TestConversationsThatOpenAlikeKeepTheirOwnSessions: without an
// X-Session-ID a session is found by the conversation's opening, and an
// agent whose first user message is a fixed preamble (AGENTS.md,
// <environment_context>) opens every conversation alike: each found the
// tools of the others. The prompt_cache_key a client keeps per
// conversation (Codex CLI sends its conversation id there) now parts
// them; without it they still share one session.
func TestConversationsThatOpenAlikeKeepTheirOwnSessions(t *testing.T) {
	const sys, preamble = "You are a coding agent.", "<environment_context><cwd>/repo</cwd></environment_context>"
	first := fakellm.Task{Prompt: "File the login bug.",
		Steps:  []fakellm.Step{{Tool: "repo_create_issue", Query: "create issue repository", Args: json.RawMessage(`{"id":"acme/web"}`)}},
		Answer: "Filed."}
	second := fakellm.Task{Prompt: "Tell the team the deploy is done.",
		Steps:  []fakellm.Step{{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{"id":"eng"}`)}},
		Answer: "Told them."}
	// bodies are each route's opening request of a conversation whose
	// task is prompt, with key as its prompt_cache_key ("": none).
	bodies := map[string]func(key, prompt string) map[string]any{
		"/chat/completions": func(key, prompt string) map[string]any {
			return map[string]any{"model": "gpt-test", "tools": testCatalog(40), "messages": []map[string]any{
				{"role": "system", "content": sys}, {"role": "user", "content": preamble},
				{"role": "assistant", "content": "ok"}, {"role": "user", "content": prompt}}}
		},
		"/responses": func(key, prompt string) map[string]any {
			var tools []map[string]any
			for _, tool := range testCatalog(40) {
				fn := tool["function"].(map[string]any)
				tools = append(tools, map[string]any{"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"], "strict": false})
			}
			return map[string]any{"model": "gpt-test", "instructions": sys, "tools": tools, "input": []map[string]any{
				{"type": "message", "role": "user", "content": preamble}, {"type": "message", "role": "user", "content": prompt}}}
		},
	}
	for _, route := range []string{"/chat/completions", "/responses"} {
		for _, tc := range []struct {
			name        string
			keyA, keyB  string
			sessions    int
			sharesFinds bool
		}{
			{"conversations that open alike with their own prompt_cache_key keep their own sessions", "conv-a", "conv-b", 2, false},
			{"conversations that open alike without an id share one session", "", "", 1, true},
		} {
			t.Run(map[string]string{"/chat/completions": "chat", "/responses": "responses"}[route]+": "+tc.name, func(t *testing.T) {
				model := &fakellm.Model{Tasks: []fakellm.Task{first, second}}
				mem := session.NewMemory(100, 0)
				base := newTestGateway(t, model, searchOnly(t), func(g *Gateway) { g.Sessions = mem })
				open := func(key, prompt string) {
					body := bodies[route](key, prompt)
					if key != "" {
						body["prompt_cache_key"] = key
					}
					b, _ := json.Marshal(body)
					if x := sendTo(t, base, route, b, nil); x.status != http.StatusOK {
						t.Fatalf("status %d: %s", x.status, x.body)
					}
				}
				open(tc.keyA, first.Prompt)
				before := len(model.Records())
				open(tc.keyB, second.Prompt)
				offered := model.Records()[before].Names
				if got := slices.Contains(offered, "repo_create_issue"); got != tc.sharesFinds {
					t.Errorf("the second conversation's first upstream call offered %v: the first one's find among them %v, want %v", offered, got, tc.sharesFinds)
				}
				if got := mem.Len(); got != tc.sessions {
					t.Errorf("%d sessions %v, want %d", got, mem.Keys(), tc.sessions)
				}
			})
		}
	}
}
