package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/selector"
)

// scriptedTurn is a Chat Completions upstream that answers its n-th
// request with the assistant message reply(n) and keeps every request.
type scriptedTurn struct {
	reply func(n int) string

	mu     sync.Mutex
	bodies [][]byte
}

func (s *scriptedTurn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	msg := s.reply(n)
	finish := "stop"
	if gjson.Get(msg, "tool_calls").IsArray() {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`, n, msg, finish)
}

// requests returns the requests the upstream got, in order.
func (s *scriptedTurn) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

// searchAnswers returns the content of the tool message each request
// after the first ended with: the gateway's answers to the searches, in
// order.
func (s *scriptedTurn) searchAnswers() []string {
	var out []string
	for _, b := range s.requests()[1:] {
		if last := gjson.GetBytes(b, "messages.@reverse.0"); last.Get("role").String() == "tool" {
			out = append(out, last.Get("content").String())
		}
	}
	return out
}

// searchMsg is an assistant message that calls tool_search once per
// query, each with the arguments {"query": q}.
func searchMsg(queries ...string) string {
	var args []string
	for _, q := range queries {
		a, _ := json.Marshal(map[string]string{"query": q})
		args = append(args, string(a))
	}
	return searchArgsMsg(args...)
}

// searchArgsMsg is an assistant message that calls tool_search once with
// each of the raw argument strings.
func searchArgsMsg(args ...string) string {
	var calls []map[string]any
	for i, a := range args {
		calls = append(calls, map[string]any{"id": fmt.Sprintf("call_s%d", i), "type": "function",
			"function": map[string]string{"name": SearchToolName, "arguments": a}})
	}
	b, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
	return string(b)
}

// callsMsg is an assistant message that calls each named tool with {}.
func callsMsg(names ...string) string {
	var calls []map[string]any
	for i, n := range names {
		calls = append(calls, map[string]any{"id": fmt.Sprintf("call_c%d", i), "type": "function",
			"function": map[string]string{"name": n, "arguments": "{}"}})
	}
	b, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
	return string(b)
}

// textMsg is an assistant message of text only.
func textMsg(s string) string {
	b, _ := json.Marshal(map[string]any{"role": "assistant", "content": s})
	return string(b)
}

// TestWhatASearchFoundStaysOfferedForTheRestOfTheTurn: a search's answer
// says its tools are now in the model's list. A second search in the same
// request (for the task's next step) used to offer only its own finds, and
// the first search's tools could not be found again either, since a
// search skips what an earlier one returned: the model could not call the
// tool it had been told to call.
func TestWhatASearchFoundStaysOfferedForTheRestOfTheTurn(t *testing.T) {
	const issue, chat = "repo_create_issue", "chat_post_message"
	for _, tc := range []struct {
		name    string
		queries []string // one search a round, in order
		calls   []string // what the model calls after them
	}{
		{"the tools of both searches are offered after the second, and the model calls both",
			[]string{"create issue repository", "send message chat channel"}, []string{issue, chat}},
		{"the first search's tool is offered after a search that finds nothing",
			[]string{"create issue repository", "zzqx vvwk"}, []string{issue}},
		{"the first search's tool is still offered after two more searches",
			[]string{"create issue repository", "send message chat channel", "create issue repository"}, []string{issue, chat}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &scriptedTurn{reply: func(n int) string {
				if n < len(tc.queries) {
					return searchMsg(tc.queries[n])
				}
				return callsMsg(tc.calls...)
			}}
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, "gateway: {mode: search}\nsearch: {limit: 2}\n")))
			x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "File a bug about the login crash and tell the team in chat."}}, testCatalog(40), false, nil), nil)
			reqs := model.requests()
			if x.status != http.StatusOK || len(reqs) != len(tc.queries)+1 {
				t.Fatalf("status %d after %d upstream calls; want 200 after %d: %s", x.status, len(reqs), len(tc.queries)+1, x.body)
			}
			if first := foundTools(model.searchAnswers()[0]); !slices.Contains(first, issue) {
				t.Fatalf("the first search listed %v; the case needs %s among them", first, issue)
			}
			for i, b := range reqs[2:] {
				if names := toolNames(b); !slices.Contains(names, issue) {
					t.Errorf("upstream call %d, after search %d, offered %v; want %s, which the first search said was in the list", i+2, i+2, names, issue)
				}
			}
			var got []string
			gjson.GetBytes(x.body, "choices.0.message.tool_calls.#.function.name").ForEach(func(_, n gjson.Result) bool {
				got = append(got, n.String())
				return true
			})
			if !slices.Equal(got, tc.calls) {
				t.Errorf("the client got calls of %v; want %v", got, tc.calls)
			}
		})
	}
}

// TestASearchRepeatedAtOnceReplacesItsFinds: a model that asks again at
// once what it just asked says the tools found did not do, and gets the
// next batch. Offering every batch on top of the next made each repeat
// cost more than the last: the round after a repeat offers its own finds,
// not the earlier ones, which stay active for the client's next request.
// A repeat after another search is not a rejection (the third case of
// TestWhatASearchFoundStaysOfferedForTheRestOfTheTurn).
func TestASearchRepeatedAtOnceReplacesItsFinds(t *testing.T) {
	const query = "create issue repository"
	model := &scriptedTurn{reply: func(n int) string {
		if n < 2 {
			return searchMsg(query)
		}
		return textMsg("None of these files issues.")
	}}
	base := newTestGateway(t, model, withPolicy(loadPolicy(t, "gateway: {mode: search}\nsearch: {limit: 2}\n")))
	x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "File a bug about the login crash."}}, testCatalog(40), false, nil), nil)
	reqs, answers := model.requests(), model.searchAnswers()
	if x.status != http.StatusOK || len(reqs) != 3 || len(answers) != 2 {
		t.Fatalf("status %d after %d upstream calls and %d search answers; want 200 after 3 and 2: %s", x.status, len(reqs), len(answers), x.body)
	}
	first, second := foundTools(answers[0]), foundTools(answers[1])
	if len(first) == 0 || len(second) == 0 {
		t.Fatalf("the searches found %v, then %v; the case needs both to find tools", first, second)
	}
	offered := toolNames(reqs[2])
	for _, name := range first {
		if slices.Contains(offered, name) {
			t.Errorf("after the repeat the round offered %v, with %s of the first batch %v", offered, name, first)
		}
		if slices.Contains(second, name) {
			t.Errorf("the repeat listed %s again (%v); want the next batch", name, second)
		}
	}
	for _, name := range second {
		if !slices.Contains(offered, name) {
			t.Errorf("after the repeat the round offered %v, without %s of its batch %v", offered, name, second)
		}
	}
}

// browserBundleCatalog is testCatalog(40) after eleven more browser tools,
// so that catalog order puts browser_screenshot thirteenth of the
// browser_* tools.
func browserBundleCatalog() []map[string]any {
	var tools []map[string]any
	for _, action := range []string{"click", "type", "hover", "scroll", "select_option", "go_back", "go_forward", "reload", "close_tab", "resize", "wait_for"} {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": "browser_" + action, "description": "Browser page action: " + strings.ReplaceAll(action, "_", " ") + "."}})
	}
	return append(tools, testCatalog(40)...)
}

// TestAQueryNamingABundleGetsItsBestMatchesFirst: a query that names a
// bundle used to get the bundle's first ten tools in catalog order ahead
// of the ranked results, so "take a browser screenshot" was answered
// without browser_screenshot, and the model's limit was ignored. The
// ranked results now lead and the rest of the bundle fills the answer up
// to the limit the model asked for, or ten.
func TestAQueryNamingABundleGetsItsBestMatchesFirst(t *testing.T) {
	const policyText = "gateway: {mode: search}\nbundles: {browser: {description: Drive the browser, tools: [\"browser_*\"]}}\n"
	for _, tc := range []struct {
		name, args string
		first      string // the tool the answer must list first, "" for any
		listed     int    // how many tools it lists
	}{
		{"a query for one of the bundle's tools lists that tool first and the rest of the bundle after it",
			`{"query":"take a browser screenshot"}`, "browser_screenshot", maxSearchLimit},
		{"a query with a limit lists that many tools",
			`{"query":"take a browser screenshot","limit":3}`, "browser_screenshot", 3},
		{"a query of the bundle's name alone gets ten of its tools",
			`{"query":"browser"}`, "", maxSearchLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &searchingUpstream{args: tc.args}
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, policyText)))
			if x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "Check the page."}}, browserBundleCatalog(), false, nil), nil); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			up.mu.Lock()
			answer := up.answer
			up.mu.Unlock()
			listed := foundTools(answer)
			if len(listed) != tc.listed || tc.first != "" && listed[0] != tc.first {
				t.Errorf("the search listed %v; want %d tools, %q first", listed, tc.listed, tc.first)
			}
			for _, n := range listed {
				if tc.first == "" && !strings.HasPrefix(n, "browser_") {
					t.Errorf("the search for the bundle listed %s, not one of its tools: %v", n, listed)
				}
			}
		})
	}
}

// TestASearchThatReturnsABundleSaysWhatItIsFor: a bundle's description
// was documented as shown by search, and nothing showed it. An answer
// that returns a bundle's tools for a query that names it now carries a
// line of it; tool_search's definition stays as it was.
func TestASearchThatReturnsABundleSaysWhatItIsFor(t *testing.T) {
	const line = "The browser bundle: Drive the browser (navigate, click, read)."
	for _, tc := range []struct {
		name, policy, args string
		want               bool
	}{
		{"a query that names the bundle gets its description",
			"gateway: {mode: search}\nbundles: {browser: {description: \"Drive the browser (navigate, click, read).\", tools: [\"browser_*\"]}}\n",
			`{"query":"browser tools"}`, true},
		{"a query that finds the bundle's tools without naming it does not",
			"gateway: {mode: search}\nbundles: {browser: {description: \"Drive the browser (navigate, click, read).\", tools: [\"browser_*\"]}}\n",
			`{"query":"take a screenshot of the page"}`, false},
		{"a bundle without a description adds no line",
			"gateway: {mode: search}\nbundles: {browser: {tools: [\"browser_*\"]}}\n",
			`{"query":"browser tools"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &searchingUpstream{args: tc.args}
			base := newTestGateway(t, up, withPolicy(loadPolicy(t, tc.policy)))
			if x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "Check the page."}}, browserBundleCatalog(), false, nil), nil); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			up.mu.Lock()
			answer := up.answer
			up.mu.Unlock()
			if got := strings.Contains(answer, "\n"+line+"\n"); got != tc.want {
				t.Errorf("the answer carries the bundle's line: %v, want %v:\n%s", got, tc.want, answer)
			}
			if listed := foundTools(answer); len(listed) == 0 || !strings.HasPrefix(listed[0], "browser_") {
				t.Errorf("the search listed %v; want browser tools", listed)
			}
		})
	}
}

// loadPolicyFiles compiles a tools.yaml source next to files (hints), by
// their paths relative to it.
func loadPolicyFiles(t *testing.T, src string, files map[string]string) *policy.Snapshot {
	t.Helper()
	s, err := policy.Load(writePolicy(t, src, files))
	if err != nil {
		t.Fatalf("loading policy: %v", err)
	}
	return s
}

// TestCategoryGuidanceComesOncePerTurnForTheTopResult: a category's
// guidance is most of a search answer's tokens, and every later round of
// the turn resends the answer. It came with every answer, for the
// category of every tool listed, the fifth included; it now comes with the
// top result's category, the first time a search of the turn shows it.
func TestCategoryGuidanceComesOncePerTurnForTheTopResult(t *testing.T) {
	const (
		code = "Find before you create: search for duplicates first."
		chat = "Resolve channel names to ids first."
		mail = "Draft first, then send."
	)
	pol := loadPolicyFiles(t, `gateway: {mode: search}
search: {limit: 3}
tools:
  "repo_*": {category: code}
  "chat_*": {category: chat}
  "mail_*": {category: mail}
categories:
  code: {hints: hints/code.md}
  chat: {hints: hints/chat.md}
  mail: {hints: hints/mail.md}
`, map[string]string{"hints/code.md": code, "hints/chat.md": chat, "hints/mail.md": mail})
	for _, tc := range []struct {
		name    string
		queries []string
		want    [][]string // the guidance each answer carries, in order
	}{
		{"an answer carries its top result's guidance, not a runner-up's",
			[]string{"send message chat channel email"}, [][]string{{chat}}},
		{"a second search whose top result is of the same category does not repeat it",
			[]string{"create issue repository", "merge pull request"}, [][]string{{code}, nil}},
		{"a second search whose top result is of another category carries that one's",
			[]string{"create issue repository", "send message chat channel"}, [][]string{{code}, {chat}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &scriptedTurn{reply: func(n int) string {
				if n < len(tc.queries) {
					return searchMsg(tc.queries[n])
				}
				return textMsg("Done.")
			}}
			base := newTestGateway(t, model, withPolicy(pol))
			if x := send(t, base, chatRequest(t, []map[string]any{{"role": "user", "content": "Do the thing."}}, testCatalog(40), false, nil), nil); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			answers := model.searchAnswers()
			if len(answers) != len(tc.want) {
				t.Fatalf("%d search answers, want %d", len(answers), len(tc.want))
			}
			for i, answer := range answers {
				for _, g := range []string{code, chat, mail} {
					if want := slices.Contains(tc.want[i], g); strings.Contains(answer, g) != want {
						t.Errorf("answer %d carries %q: %v, want %v:\n%s", i, g, !want, want, answer)
					}
				}
			}
		})
	}
}

// TestASearchForAToolTheModelHasSaysItIsInItsList: a search skipped the
// tools already in the model's list, so a model that searched for one it
// had called earlier was answered with a limit of other tools, as if its
// tool were not there. When such tools lead the ranking, the answer now
// names them in a line, on top of the limit of new tools.
func TestASearchForAToolTheModelHasSaysItIsInItsList(t *testing.T) {
	const issue = "repo_create_issue"
	history := []map[string]any{
		{"role": "user", "content": "File a bug about the login crash, then another about the logout crash."},
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": "h1", "type": "function",
			"function": map[string]any{"name": issue, "arguments": "{}"}}}},
		{"role": "tool", "tool_call_id": "h1", "content": "created #1"},
	}
	for _, tc := range []struct {
		name, query string
		listed      bool // the answer names repo_create_issue as in the list
		found       int  // how many new tools it lists
	}{
		{"a search by the tool's name says it is in the list and still offers a limit of new tools", issue, true, 3},
		{"a search by its words says the same", "create issue repository", true, 3},
		{"a search that ranks a new tool first says nothing of it", "send email recipients", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &scriptedTurn{reply: func(n int) string {
				if n == 0 {
					return searchMsg(tc.query)
				}
				return textMsg("Done.")
			}}
			base := newTestGateway(t, model, withPolicy(loadPolicy(t, "gateway: {mode: search}\nsearch: {limit: 3}\n")))
			if x := send(t, base, chatRequest(t, history, testCatalog(40), false, nil), nil); x.status != http.StatusOK {
				t.Fatalf("status %d: %s", x.status, x.body)
			}
			answers, reqs := model.searchAnswers(), model.requests()
			if len(answers) != 1 {
				t.Fatalf("%d search answers, want 1", len(answers))
			}
			found := foundTools(answers[0])
			if listed := strings.HasPrefix(answers[0], "Already in your tool list: "+issue+".\n"); listed != tc.listed || len(found) != tc.found || slices.Contains(found, issue) {
				t.Errorf("the answer names %s as in the list: %v, lists %v; want %v and %d other tools:\n%s", issue, listed, found, tc.listed, tc.found, answers[0])
			}
			if names := toolNames(reqs[1]); !slices.Contains(names, issue) {
				t.Errorf("the round after the search offered %v, without %s", names, issue)
			}
		})
	}
	t.Run("a tool the answer names as held stays in a full list", func(t *testing.T) {
		// Called in an earlier user turn, the tool is not pinned: with
		// max_active full of the search's finds, bound took it first, and
		// the round after the answer that named it went without it.
		earlier := append(slices.Clone(history),
			map[string]any{"role": "assistant", "content": "Filed #1."},
			map[string]any{"role": "user", "content": "Now file one about the logout crash."})
		model := &scriptedTurn{reply: func(n int) string {
			if n == 0 {
				return searchMsg("create issue repository")
			}
			return textMsg("Done.")
		}}
		base := newTestGateway(t, model, withPolicy(loadPolicy(t, "gateway: {mode: search, max_active: 3}\nsearch: {limit: 3}\n")))
		if x := send(t, base, chatRequest(t, earlier, testCatalog(40), false, nil), nil); x.status != http.StatusOK {
			t.Fatalf("status %d: %s", x.status, x.body)
		}
		answers, reqs := model.searchAnswers(), model.requests()
		if len(answers) != 1 || !strings.HasPrefix(answers[0], "Already in your tool list: "+issue+".\n") {
			t.Fatalf("search answers %q; the case needs one that names %s as held", answers, issue)
		}
		names := toolNames(reqs[1])
		if !slices.Contains(names, issue) {
			t.Errorf("the round after the answer offered %v, without %s, which the answer said the model has", names, issue)
		}
		if len(names) > 1+3 {
			t.Errorf("the round offered %v: more than tool_search and max_active 3", names)
		}
	})
	t.Run("an answer whose only match is in the list says no other tool matched", func(t *testing.T) {
		got := formatResults(issue, selector.Results{}, []string{issue}, nil, nil)
		if got != "Already in your tool list: "+issue+".\nNo other tools matched \""+issue+"\"." {
			t.Errorf("answer %q", got)
		}
	})
}
