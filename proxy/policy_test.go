package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/selector"
)

// writePolicy writes a tools.yaml source and files (hints, by their
// paths relative to it) to a temp dir and returns the tools.yaml's path.
func writePolicy(t *testing.T, yaml string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// withLivePolicy writes a tools.yaml (and hint files) to a temp dir and serves
// it live: edits to the file apply to the running gateway.
func withLivePolicy(t *testing.T, yaml string, files map[string]string) (func(*Gateway), string) {
	t.Helper()
	opt, path, _ := withWatchedPolicy(t, yaml, files)
	return opt, path
}

// withWatchedPolicy is withLivePolicy that also reports the outcome of
// every reload the watcher attempts, so a test can wait for the reload
// of an edit instead of guessing how long the watcher takes.
func withWatchedPolicy(t *testing.T, yaml string, files map[string]string) (opt func(*Gateway), path string, reloads <-chan error) {
	t.Helper()
	path = writePolicy(t, yaml, files)
	live, err := policy.NewLive(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Buffered, and never blocking the watcher (OnReload must not): the
	// few reloads a test's edits cause fit.
	outcomes := make(chan error, 16)
	live.OnReload = func(err error) {
		select {
		case outcomes <- err:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = live.Watch(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return func(g *Gateway) { g.Policy = live.Current }, path, outcomes
}

// awaitFailedReload waits until the watcher has tried to reload and
// failed. The bound only keeps a watcher that never reloads from hanging
// the run; the watcher reloads about a second after an edit.
func awaitFailedReload(t *testing.T, reloads <-chan error) {
	t.Helper()
	bound := time.After(30 * time.Second)
	for {
		select {
		case err := <-reloads:
			if err != nil {
				return
			}
		case <-bound:
			t.Fatal("the watcher attempted no failing reload of the edited policy within 30s")
		}
	}
}

func firstUpstreamNames(t *testing.T, model *fakellm.Model) []string {
	t.Helper()
	recs := model.Records()
	if len(recs) == 0 {
		t.Fatal("upstream saw no request")
	}
	return recs[0].Names
}

func TestPolicyShapesWhatTheModelSees(t *testing.T) {
	deleteTask := fakellm.Task{
		Prompt: "Delete the old branch and the stale file.",
		Steps:  []fakellm.Step{{Tool: "repo_delete_branch", Query: "delete branch", Args: json.RawMessage(`{}`)}},
		Answer: "Done.",
	}
	t.Run("a core tool is in the very first upstream request", func(t *testing.T) {
		opt, _ := withLivePolicy(t, "core: [calendar_create_event]\n", nil)
		model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
		base := newTestGateway(t, model, opt)
		runAgent(t, base, twoStepTask, testCatalog(30), false, nil)
		if names := firstUpstreamNames(t, model); !slices.Contains(names, "calendar_create_event") {
			t.Errorf("first upstream tools %v lack the core tool", names)
		}
	})
	t.Run("denied tools never reach the upstream even when the task asks for them", func(t *testing.T) {
		opt, _ := withLivePolicy(t, "deny: ['*delete*']\n", nil)
		model := &fakellm.Model{Tasks: []fakellm.Task{deleteTask}}
		base := newTestGateway(t, model, opt)
		run := runAgent(t, base, deleteTask, testCatalog(30), true, nil)
		for _, r := range model.Records() {
			for _, n := range r.Names {
				if strings.Contains(n, "delete") {
					t.Fatalf("upstream was offered %s", n)
				}
			}
		}
		if len(run.calls) != 0 {
			t.Errorf("client received calls %v", run.calls)
		}
	})
	t.Run("a model's call to a denied tool is answered with an error and never reaches the client", func(t *testing.T) {
		opt, _ := withLivePolicy(t, "deny: ['*delete*']\n", nil)
		model := &fakellm.Model{Tasks: []fakellm.Task{deleteTask}, Keep: true, Reckless: true}
		base := newTestGateway(t, model, opt)
		for _, stream := range []bool{false, true} {
			model.Reset()
			run := runAgent(t, base, deleteTask, testCatalog(30), stream, nil)
			if len(run.calls) != 0 || run.answer != deleteTask.Answer {
				t.Errorf("stream=%v: client got calls %v and answer %q; want no calls and the final answer", stream, run.calls, run.answer)
			}
			recs := model.Records()
			if len(recs) < 2 || !strings.Contains(string(recs[len(recs)-1].Body), "blocked by policy") {
				t.Errorf("stream=%v: the model was not told the tool is blocked", stream)
			}
		}
	})
	t.Run("a destructive tool is neither offered nor named in search results until the user asks for a change", func(t *testing.T) {
		opt, _ := withLivePolicy(t, "tools:\n  repo_delete_branch: {risk: destructive}\n", nil)
		for _, tc := range []struct {
			name, prompt string
			offered      bool
		}{
			{"without write intent", "Which branches are stale?", false},
			{"with write intent", "Delete the stale branch.", true},
		} {
			task := fakellm.Task{
				Prompt: tc.prompt,
				Steps:  []fakellm.Step{{Tool: "repo_delete_branch", Query: "delete branch", Args: json.RawMessage(`{}`)}},
				Answer: "Done.",
			}
			model := &fakellm.Model{Tasks: []fakellm.Task{task}, Keep: true}
			base := newTestGateway(t, model, opt)
			run := runAgent(t, base, task, testCatalog(60), false, nil)
			named := false
			for _, r := range model.Records() {
				named = named || strings.Contains(string(r.Body), "repo_delete_branch") // offered, or listed by a search
			}
			if called := slices.Contains(run.calls, "repo_delete_branch"); called != tc.offered || named != tc.offered {
				t.Errorf("%s: called %v, named upstream %v; want both %v", tc.name, called, named, tc.offered)
			}
		}
	})
	t.Run("keywords make an otherwise unfindable tool found", func(t *testing.T) {
		task := fakellm.Task{
			Prompt: "Hi there.",
			Steps:  []fakellm.Step{{Tool: "util_gadget_150", Query: "zorblax", Args: json.RawMessage(`{}`)}},
			Answer: "Done.",
		}
		for _, tc := range []struct {
			name  string
			yaml  string
			found bool
		}{
			{"without keywords", "gateway: {min_tools: 12}\n", false},
			{"with keywords", "tools:\n  util_gadget_150: {keywords: [zorblax]}\n", true},
		} {
			opt, _ := withLivePolicy(t, tc.yaml, nil)
			model := &fakellm.Model{Tasks: []fakellm.Task{task}}
			base := newTestGateway(t, model, opt)
			run := runAgent(t, base, task, testCatalog(200), false, nil)
			if got := slices.Contains(run.calls, "util_gadget_150"); got != tc.found {
				t.Errorf("%s: tool found = %v, want %v (calls %v)", tc.name, got, tc.found, run.calls)
			}
		}
	})
	t.Run("a category's hints reach the model inside the tool_search result", func(t *testing.T) {
		yaml := "gateway: {mode: search}\ntools:\n  'chat_*': {category: chat}\ncategories:\n  chat: {hints: hints/chat.md}\n"
		opt, _ := withLivePolicy(t, yaml, map[string]string{"hints/chat.md": "Always reply in the thread, never in the channel."})
		task := fakellm.Task{
			Prompt: "Let everyone know the deploy finished.",
			Steps:  []fakellm.Step{{Tool: "chat_post_message", Query: "send message chat channel", Args: json.RawMessage(`{}`)}},
			Answer: "Done.",
		}
		model := &fakellm.Model{Tasks: []fakellm.Task{task}, Keep: true}
		base := newTestGateway(t, model, opt)
		runAgent(t, base, task, testCatalog(30), false, nil)
		found := false
		for _, r := range model.Records() {
			found = found || strings.Contains(string(r.Body), "Always reply in the thread")
		}
		if !found {
			t.Error("no upstream request carried the category's hint text")
		}
	})
	t.Run("a query naming a bundle gets the bundle whole", func(t *testing.T) {
		yaml := "bundles:\n  browser: {description: Drive the browser, tools: ['browser_*']}\n"
		opt, _ := withLivePolicy(t, yaml, nil)
		task := fakellm.Task{
			Prompt: "Hello.",
			Steps:  []fakellm.Step{{Tool: "browser_screenshot", Query: "browser", Args: json.RawMessage(`{}`)}},
			Answer: "Done.",
		}
		model := &fakellm.Model{Tasks: []fakellm.Task{task}}
		base := newTestGateway(t, model, opt)
		runAgent(t, base, task, testCatalog(30), false, nil)
		recs := model.Records()
		last := recs[len(recs)-1].Names
		for _, want := range []string{"browser_navigate", "browser_screenshot"} {
			if !slices.Contains(last, want) {
				t.Errorf("after searching the bundle the model has %v, missing %s", last, want)
			}
		}
	})
	t.Run("appending to deny takes effect without a restart", func(t *testing.T) {
		opt, path := withLivePolicy(t, "core: [repo_delete_branch]\n", nil)
		model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
		base := newTestGateway(t, model, opt)
		tools := testCatalog(30)
		runAgent(t, base, twoStepTask, tools, false, nil)
		if !slices.Contains(firstUpstreamNames(t, model), "repo_delete_branch") {
			t.Fatal("the core tool was not offered before the edit")
		}
		if err := os.WriteFile(path, []byte("core: [repo_delete_branch]\ndeny: ['*delete*']\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			model.Reset()
			runAgent(t, base, twoStepTask, tools, false, map[string]string{"X-Session-ID": time.Now().String()})
			if !slices.Contains(firstUpstreamNames(t, model), "repo_delete_branch") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("deny edit not in effect after 5s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("a broken edit keeps the last good policy serving", func(t *testing.T) {
		opt, path, reloads := withWatchedPolicy(t, "core: [calendar_create_event]\n", nil)
		model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}}
		base := newTestGateway(t, model, opt)
		if err := os.WriteFile(path, []byte("core: [calendar_create_event\n  bad: ["), 0o644); err != nil {
			t.Fatal(err)
		}
		awaitFailedReload(t, reloads)
		runAgent(t, base, twoStepTask, testCatalog(30), false, nil)
		if !slices.Contains(firstUpstreamNames(t, model), "calendar_create_event") {
			t.Error("the last good policy stopped serving after a broken edit")
		}
	})
}

// TestAPolicyThatHidesEveryToolSendsTheRequestWithoutThem: with nothing
// left to search, the request goes upstream without its tools, as
// passthrough mode sends it, instead of failing the compile of an empty
// catalog with a 500.
func TestAPolicyThatHidesEveryToolSendsTheRequestWithoutThem(t *testing.T) {
	for _, tc := range []struct{ name, policy string }{
		{"a deny of every name", "deny: ['*']\n"},
		{"an allow list that matches none of the tools", "allow: ['weather_*']\n"},
		{"a deny of every name in search mode", "deny: ['*']\ngateway: {mode: search}\n"},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s (stream %v) reaches the upstream with no tools", tc.name, stream), func(t *testing.T) {
				var seen atomic.Value
				up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					seen.Store(b)
					if stream {
						w.Header().Set("Content-Type", "text/event-stream")
						_, _ = io.WriteString(w, textChunk("hi")+finishChunk("stop")+doneEvent)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, plainAnswer)
				})
				base := newTestGateway(t, up, withPolicy(loadPolicy(t, tc.policy)))
				x := send(t, base, bigRequest(t, stream), nil)
				body, _ := seen.Load().([]byte)
				if x.status != http.StatusOK || body == nil || gjson.GetBytes(body, "tools").Exists() || gjson.GetBytes(body, "tool_choice").Exists() {
					t.Errorf("status %d (%s); upstream got %s; want 200 and a request without tools", x.status, x.body, body)
				}
			})
		}
	}
}

func TestAPolicyEditKeepsTheCompiledCatalogUnlessItChangesWhatTheCatalogIsCompiledFrom(t *testing.T) {
	var cur atomic.Pointer[policy.Snapshot]
	model := &fakellm.Model{Tasks: []fakellm.Task{twoStepTask}, Keep: true}
	catalogs := selector.NewCache(8)
	base := newTestGateway(t, model, func(g *Gateway) {
		g.Policy = cur.Load
		g.Catalogs = catalogs
	})
	for _, st := range []struct {
		name       string
		policy     string
		wantMisses int64
		wantFirst  string // a tool the turn's first upstream request must offer
	}{
		{"the first request compiles the catalog", "deny: ['*delete*']\n", 1, ""},
		{"an edit of core alone reuses it and still applies the new core", "deny: ['*delete*']\ncore: [calendar_create_event]\n", 1, "calendar_create_event"},
		{"an edit of deny compiles it again", "deny: ['*delete*', '*merge*']\ncore: [calendar_create_event]\n", 2, "calendar_create_event"},
	} {
		t.Run(st.name, func(t *testing.T) {
			cur.Store(loadPolicy(t, st.policy))
			model.Reset()
			runAgent(t, base, twoStepTask, testCatalog(30), false, nil)
			if got := catalogs.Stats().Misses; got != st.wantMisses {
				t.Errorf("%d catalog compiles in all, want %d", got, st.wantMisses)
			}
			if names := firstUpstreamNames(t, model); st.wantFirst != "" && !slices.Contains(names, st.wantFirst) {
				t.Errorf("first upstream tools %v lack %s", names, st.wantFirst)
			}
		})
	}
}
