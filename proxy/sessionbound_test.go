package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/session"
)

// TestAChangingCatalogDoesNotGrowTheStoredSession: a client whose tools
// change every turn (here all core, so all join the session) used to leave
// every name it ever sent in the session, 1,600 names after 400 turns;
// what is stored is bounded, and the current request's tools stay.
func TestAChangingCatalogDoesNotGrowTheStoredSession(t *testing.T) {
	store := session.NewMemory(16, 0)
	base := newTestGateway(t, &fakellm.Model{}, withPolicy(loadPolicy(t, "gateway: {min_tools: 1}\ncore: ['*']\n")),
		func(g *Gateway) { g.Sessions = store })
	const turns, perTurn = 100, 4
	var last []string
	for turn := range turns {
		var tools []map[string]any
		last = last[:0]
		for i := range perTurn {
			name := fmt.Sprintf("turn%03d_tool%d", turn, i)
			last = append(last, name)
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
				"name": name, "description": "Does step " + name + ".", "parameters": map[string]any{"type": "object"}}})
		}
		msgs := []map[string]any{{"role": "user", "content": "hello"}}
		resp := post(t, base, chatRequest(t, msgs, tools, false, nil), map[string]string{"X-Session-ID": "drift"})
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: status %d", turn, resp.StatusCode)
		}
	}
	st, err := store.Get(context.Background(), session.Key(session.Tenant("Bearer sk-test"), "drift", "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if turns*perTurn <= session.MaxStoredNames {
		t.Fatalf("the test sends %d names, not more than the %d kept", turns*perTurn, session.MaxStoredNames)
	}
	if len(st.Active) > session.MaxStoredNames {
		t.Errorf("%d active names stored after %d turns, want at most %d", len(st.Active), turns, session.MaxStoredNames)
	}
	for _, n := range last {
		if !slices.Contains(st.Active, n) {
			t.Errorf("the last request's tool %s was dropped", n)
		}
	}
}

// TestAnOversizedStoredSessionIsReplaced: a 2 MB value planted under a
// session's Redis key used to be read, kept and written back every turn;
// it is refused as unreadable and the turn's save replaces it.
func TestAnOversizedStoredSessionIsReplaced(t *testing.T) {
	srv := miniredis.RunT(t)
	store, err := session.NewRedis("redis://"+srv.Addr(), time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	key := "toolgate:session:" + session.Key(session.Tenant("Bearer sk-test"), "planted", "", "", "")
	if err := srv.Set(key, `{"active":["`+strings.Repeat("x", 2<<20)+`"]}`); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	base := newTestGateway(t, &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}, func(g *Gateway) {
		g.Sessions = store
		g.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	msgs := []map[string]any{{"role": "user", "content": twoStepTask.Prompt}}
	resp := post(t, base, chatRequest(t, msgs, testCatalog(60), false, nil), map[string]string{"X-Session-ID": "planted"})
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	v, err := srv.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) > 16<<10 {
		t.Errorf("the stored value is %d bytes after the turn, want the turn's own small state", len(v))
	}
	if !strings.Contains(logs.String(), `"msg":"the stored session is unreadable`) ||
		!strings.Contains(logs.String(), `"session":"`+strings.TrimPrefix(key, "toolgate:session:")+`"`) {
		t.Errorf("the planted value was not reported with its session key:\n%s", logs.String())
	}
}

// callingHistory is a chat request over testCatalog(30) whose history
// called names, one step, each answered.
func callingHistory(t *testing.T, stream bool, names ...string) []byte {
	var calls []map[string]any
	msgs := []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}
	for i, n := range names {
		calls = append(calls, map[string]any{"id": fmt.Sprintf("c%d", i), "type": "function", "function": map[string]any{"name": n, "arguments": "{}"}})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
	for i := range names {
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("c%d", i), "content": "ok"})
	}
	return chatRequest(t, msgs, testCatalog(30), stream, nil)
}

// callAnswer is a whole chat answer that calls name.
func callAnswer(name string) string {
	return `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"x1","type":"function","function":{"name":` +
		strconv.Quote(name) + `,"arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
}

func TestATurnRemembersOnlyTheCatalogsNames(t *testing.T) {
	// A name of 64 KB stands for the megabytes a body may hold: a session
	// (and the tenant's transitions, whose rows its last name keys) that
	// kept it whole kept whatever the client sent.
	long := "n_" + strings.Repeat("z", 64<<10)
	catalog := map[string]bool{}
	for _, tool := range testCatalog(30) {
		catalog[tool["function"].(map[string]any)["name"].(string)] = true
	}
	for _, tc := range []struct {
		name    string
		history []string
		calls   string // what the model calls
	}{
		{"a name the history calls that the catalog lacks is not remembered", []string{long, "repo_create_issue", long + "2"}, "repo_create_issue"},
		{"a name the model calls that the catalog lacks is not remembered", []string{"repo_create_issue"}, long},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := session.NewMemory(16, 0)
			base := newTestGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, callAnswer(tc.calls))
			}), func(g *Gateway) { g.Sessions = store })
			resp := post(t, base, callingHistory(t, false, tc.history...), map[string]string{"X-Session-ID": "names"})
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			st, err := store.Get(context.Background(), session.Key(session.Tenant("Bearer sk-test"), "names", "", "", ""))
			if err != nil {
				t.Fatal(err)
			}
			if st.Last != "repo_create_issue" {
				t.Errorf("last tool %.40q, want repo_create_issue", st.Last)
			}
			for _, list := range [][]string{{st.Last}, st.Recent, st.Active, st.Preselected, st.Guesses} {
				for _, n := range list {
					if !catalog[n] {
						t.Errorf("the session keeps %.40q (%d bytes), none of the catalog's tools", n, len(n))
					}
				}
			}
		})
	}
}

func TestATurnTheUpstreamNeverAcceptedLeavesNoTrace(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		stream  bool
		answers bool // whether the turn is accepted, and so remembered
	}{
		{"a whole answer refused for its key saves no session and records no tenant", http.StatusUnauthorized, false, false},
		{"a stream refused for its key saves no session and records no tenant", http.StatusUnauthorized, true, false},
		{"a request the upstream finds malformed saves no session and records no tenant", http.StatusBadRequest, false, false},
		{"an accepted turn saves its session and records its tenant", http.StatusOK, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := session.NewMemory(16, 0)
			learned := NewLearned(16)
			base := newTestGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if tc.status != http.StatusOK {
					w.WriteHeader(tc.status)
					_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
					return
				}
				_, _ = io.WriteString(w, callAnswer("repo_create_issue"))
			}), func(g *Gateway) { g.Sessions, g.Learned = store, learned })
			body := callingHistory(t, tc.stream, "repo_create_issue", "repo_list_issues")
			resp := post(t, base, body, map[string]string{"Authorization": "Bearer sk-wrong", "X-Session-ID": "refused"})
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want the upstream's %d", resp.StatusCode, tc.status)
			}
			trans, habits := learned.Peek(session.Tenant("Bearer sk-wrong"))
			if got := store.Len() > 0; got != tc.answers {
				t.Errorf("a session was saved: %v, want %v", got, tc.answers)
			}
			if got := trans != nil && habits != nil; got != tc.answers {
				t.Errorf("the tenant has transitions and habits: %v, want %v", got, tc.answers)
			}
		})
	}
}
