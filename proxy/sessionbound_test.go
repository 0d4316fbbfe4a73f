package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
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
