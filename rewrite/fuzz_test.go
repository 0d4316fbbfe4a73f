package rewrite

import (
	"errors"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// searchDef stands for the gateway's tool_search definition.
const searchDef = `{"type":"function","function":{"name":"tool_search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}`

// FuzzParseRequestBuild feeds arbitrary bodies to ParseRequest and, when
// one is accepted, rewrites it with Build three ways (a new tools array, no
// tools, and an appended search round). A body is either refused with an
// error wrapping ErrBadRequest, or every rewrite is valid JSON that keeps
// the body an object whose messages grew by exactly the round.
func FuzzParseRequestBuild(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"a","description":"d","parameters":{"type":"object","properties":{"x":{"type":"string","description":"y"}}}}}],"tool_choice":{"type":"function","function":{"name":"a"}}}`,
		`{"model":"m","stream":true,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"a","arguments":"{}"}}]},{"role":"tool","tool_call_id":"1","content":"ok"}],"tools":[{"name":"a"}],"parallel_tool_calls":true}`,
		`{"messages":[],"tools":null}`, `{"messages":[],"tools":{}}`, `{"messages":{}}`, `[]`, `"x"`, ``, `{"messages":[],"x":[[[[[]]]]]}`,
		`{"messages":[],"tools":[{"function":{"name":"a"}},{"function":{"name":"a"}}]}`,
		"{\"messages\":[],\"a\":\"\xff\"}", `{"messages":[] , "tools" : [ {"name":"b\"c"} ] }`, `{"tools":[{"name":"a"}],"messages":[]}`,
		`{"stream":true,"messages":[],"tools":[{"name":"a"}]} `, "{\"stream\":true,\"messages\":[]\n}\n", `{"stream":true,"stream_options":{},"messages":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseRequest(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("refused with %v, which does not wrap ErrBadRequest", err)
			}
			return
		}
		before := len(gjson.GetBytes(body, pathMessages).Array())
		var tools []string
		for i, tl := range req.Tools {
			if i == 2 {
				break
			}
			tools = append(tools, tl.Raw)
		}
		round := []Round{{Content: "looking", Calls: []Call{{ID: "s1", Name: "tool_search", Arguments: `{"query":"x"}`}}, Results: []ToolResult{{CallID: "s1", Content: "found \"a\"\n"}}}}
		for _, tc := range []struct {
			name   string
			tools  []string
			rounds []Round
			added  int
		}{
			{"a new tools array", append([]string{searchDef}, tools...), nil, 0},
			{"no tools", nil, nil, 0},
			{"a search round", []string{searchDef}, round, 2},
		} {
			out, err := Chat{}.Build(req, tc.tools, tc.rounds)
			if err != nil {
				t.Fatalf("%s: Build refused an accepted request: %v", tc.name, err)
			}
			if !gjson.ValidBytes(out) {
				t.Fatalf("%s: Build wrote invalid JSON: %q", tc.name, out)
			}
			root := gjson.ParseBytes(out)
			if got := len(root.Get(pathMessages).Array()); !root.IsObject() || got != before+tc.added {
				t.Fatalf("%s: %d messages after the rewrite, want %d: %q", tc.name, got, before+tc.added, out)
			}
			got := root.Get(pathTools)
			switch {
			case tc.tools == nil && got.Exists():
				t.Fatalf("%s: tools remain: %q", tc.name, out)
			case tc.tools != nil && len(got.Array()) != len(tc.tools):
				t.Fatalf("%s: %d tools upstream, want %d: %q", tc.name, len(got.Array()), len(tc.tools), out)
			}
			if req.Stream && !root.Get(pathIncludeUsage).Bool() {
				t.Fatalf("%s: a stream rewrite does not ask for usage: %q", tc.name, out)
			}
			if req.Stream && !req.IncludeUsage {
				// Usage is asked for exactly as sjson would set it.
				asked := *req
				asked.IncludeUsage = true
				ref, err := Chat{}.Build(&asked, tc.tools, tc.rounds)
				if err != nil {
					t.Fatalf("%s: Build without usage: %v", tc.name, err)
				}
				if want, _ := sjson.SetBytes(ref, pathIncludeUsage, true); string(out) != string(want) {
					t.Fatalf("%s: usage asked for as %q, sjson writes %q", tc.name, out, want)
				}
			}
		}
	})
}

// FuzzEditEvent feeds arbitrary chunks to ParseEvent and EditEvent: an
// accepted chunk edited in every way stays valid JSON.
func FuzzEditEvent(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`,
		`{"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"x","function":{"name":"a","arguments":"{"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1}}`,
		`{"choices":[],"usage":{"total_tokens":3}}`, `{"error":{"message":"x"}}`, `{}`, `[]`, `{"choices":{"0":1}}`, `{"choices":[1]}`,
		`{"id":"a","id":"b","created":"12","choices":[{"index":1}],"choices":[{"index":2}],"usage":1,"usage":{}}`,
		`{"\u0069d":"escaped","mod\u0065l":"m","choices":[{"finish_reason":"stop"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev := &Event{}
		err := Chat{}.ParseEvent(data, ev)
		if want := parseEventByPaths(data); (err == nil) != (want != nil) || err == nil && !sameEvent(ev, want) {
			t.Fatalf("Chat.ParseEvent(%q) = %+v, %v; a Get per field reads %+v", data, ev, err, want)
		}
		// An Event the relay reuses reads the same as a fresh one.
		var reused Event
		if err := (Chat{}).ParseEvent([]byte(`{"id":"r","model":"m","created":9,"choices":[{"index":2,"delta":{"content":"x","tool_calls":[{"index":1,"id":"c","function":{"name":"n","arguments":"{}"}}]},"finish_reason":"stop"}],"usage":{"total_tokens":1}}`), &reused); err != nil {
			t.Fatal(err)
		}
		if rerr := (Chat{}).ParseEvent(data, &reused); (rerr == nil) != (err == nil) || err == nil && !fullySame(&reused, ev) {
			t.Fatalf("Chat.ParseEvent(%q) into a used Event = %+v, %v; into a fresh one %+v, %v", data, reused, rerr, ev, err)
		}
		if err != nil {
			return
		}
		var calls []string
		for i, c := range ev.Calls {
			calls = append(calls, reindex(c.Raw, i), callDeltaJSON(i, c.ID, c.Name, c.Args))
		}
		for _, e := range []EventEdit{
			{ID: "chatcmpl-x", Created: 7},
			{SetCalls: true, Calls: calls},
			{SetCalls: true},
			{Finish: "null", DropUsage: true},
			{Finish: "stop", ID: "y", SetCalls: true, Calls: calls, DropUsage: true},
		} {
			out, err := Chat{}.EditEvent(append([]byte(nil), data...), e)
			if err != nil {
				continue // refusing an odd chunk is fine; corrupting it is not
			}
			if !gjson.ValidBytes(out) {
				t.Fatalf("edit %+v of %q wrote invalid JSON %q", e, data, out)
			}
		}
	})
}

// parseEventByPaths reads ParseEvent's top level with a gjson Get per
// field: the plain reading the one-pass version must agree with.
func parseEventByPaths(data []byte) *Event {
	if string(data) == chatDone {
		return &Event{Data: data, End: true}
	}
	root := gjson.ParseBytes(data)
	if !gjson.ValidBytes(data) || !root.IsObject() {
		return nil
	}
	ev := &Event{ID: root.Get("id").String(), Model: root.Get("model").String(), Created: root.Get("created").Int(),
		Choice: -1, Usage: root.Get("usage"), Error: root.Get("error")}
	ch := root.Get("choices.0")
	if ch.Exists() {
		ev.Choice = ch.Get("index").Int()
		ev.Finish = ch.Get("finish_reason").String()
	}
	return ev
}

// sameEvent compares the fields ParseEvent reads at the top level.
// fullySame compares every field ParseEvent sets.
func fullySame(a, b *Event) bool {
	return sameEvent(a, b) && a.Text == b.Text && a.Content == b.Content && slices.Equal(a.Calls, b.Calls) && string(a.Data) == string(b.Data)
}

func sameEvent(a, b *Event) bool {
	return a.End == b.End && a.ID == b.ID && a.Model == b.Model && a.Created == b.Created && a.Choice == b.Choice &&
		a.Finish == b.Finish && a.Usage.Raw == b.Usage.Raw && a.Error.Raw == b.Error.Raw
}

// FuzzKnownTools primes a cache with one body and parses another through
// the fast path for cached catalogs (with no minimum size, so small inputs
// reach it). Whatever the fast path accepts, the full parse must accept and
// read the same: same fields, same Original body, same upstream bodies.
func FuzzKnownTools(f *testing.F) {
	const tools = `[{"type":"function","function":{"name":"a","description":"d"}},{"function":{"name":"b"}}]`
	for _, s := range [][2]string{
		{`{"messages":[],"tools":` + tools + `}`, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":` + tools + `,"stream":true}`},
		{`{"messages":[],"tools":` + tools + `}`, `{"messages":[],"tools":` + tools + `]}`},
		{`{"messages":[],"tools":` + tools + `}`, `{"messages":[],"tool\u0073":[],"tools":` + tools + `}`},
		{`{"messages":[],"tools":` + tools + `}`, `{"x":{"tools":` + tools + `},"messages":[],"tools":[]}`},
		{`{"messages":[],"tools":[]}`, `{"messages":[] , "tools" : [] }`},
		{`{"messages":[],"tools":` + tools + `}`, `{"messages":[],"tools":` + tools + `,"tools":[]}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, prime, body []byte) {
		cache := &mapCache{m: map[string][]Tool{}}
		if _, err := ParseRequestCached(prime, cache); err != nil {
			return
		}
		fast, ok, err := parseKnownTools(body, cache, 0, ParseRequest)
		if !ok || err != nil {
			return
		}
		full, ferr := ParseRequest(body)
		if ferr != nil {
			t.Fatalf("the fast path accepted %q, the full parse refused it: %v", body, ferr)
		}
		if string(fast.Original()) != string(body) || fast.ToolsRaw.Raw != full.ToolsRaw.Raw || fast.ToolsRaw.Index != full.ToolsRaw.Index ||
			len(fast.Tools) != len(full.Tools) || fast.Model != full.Model || fast.Stream != full.Stream || fast.LastUser != full.LastUser {
			t.Fatalf("the fast path read %+v, the full parse %+v", fast, full)
		}
		for _, tools := range [][]string{{searchDef}, nil} {
			a, errA := Chat{}.Build(fast, tools, nil)
			b, errB := Chat{}.Build(full, tools, nil)
			if (errA == nil) != (errB == nil) || string(a) != string(b) {
				t.Fatalf("Build: fast path %q (%v), full parse %q (%v)", a, errA, b, errB)
			}
		}
	})
}

// FuzzMembers adds two valid JSON objects to Members: whatever they hold,
// the members must make a valid JSON object.
func FuzzMembers(f *testing.F) {
	f.Add(`{"reasoning_content":"a \"b"}`, `{"reasoning_content":"\u00e9\n"}`)
	f.Add(`{"x":[{"index":0,"t":"a"}]}`, `{"x":[{"index":0,"t":"b"},{"index":1}],"y":null}`)
	f.Add(`{"o":{"p":[1,2]}}`, `{"o":{"p":"s","q":{}}}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		if !gjson.Valid(a) || !gjson.Valid(b) {
			return
		}
		var ms Members
		ms.Add(gjson.Parse(a), nil)
		ms.Add(gjson.Parse(b), nil)
		if out := "{" + ms.String() + "}"; !gjson.Valid(out) {
			t.Fatalf("members of %s and %s: invalid JSON %s", a, b, out)
		}
	})
}

// FuzzResponsesParseBuild holds the Responses dialect to what the Chat one
// promises: any body is accepted or refused with ErrBadRequest, never a
// panic, and an accepted one rebuilds into valid JSON with the tools asked
// for and the round's items after the client's input.
func FuzzResponsesParseBuild(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi","tools":[{"type":"function","name":"a","parameters":{}}]}`,
		`{"model":"m","input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs"},{"type":"function_call","call_id":"1","name":"a","arguments":"{}"},{"type":"function_call_output","call_id":"1","output":"ok"}],"tools":[{"type":"web_search"}]}`,
		`{"input":[],"tools":null}`, `{"input":42}`, `{"previous_response_id":"r","tools":[]}`, `{"input":"x","tools":[{"type":"function"}]}`,
		`{"input":"x","tool_choice":{"type":"allowed_tools","tools":[{"type":"function","name":"a"}]},"text":{"format":{"type":"json_schema"}}}`,
		`[]`, ``, "{\"input\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := Responses{}.ParseRequest(body, nil)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("refused with %v, which does not wrap ErrBadRequest", err)
			}
			return
		}
		in := gjson.GetBytes(body, respInput)
		before := len(in.Array())
		if in.Type == gjson.String {
			before = 1
		}
		checkBuilds(t, Responses{}, req, func(got gjson.Result) bool { return got.Get("0.strict").Type == gjson.False }, func(root gjson.Result) bool {
			items := root.Get(respInput).Array()
			return len(items) == before+2 && items[len(items)-1].Get("type").String() == "function_call_output"
		})
	})
}

// FuzzMessagesParseBuild holds the Messages dialect to the same promise:
// any body is accepted or refused with ErrBadRequest, never a panic; an
// accepted one rebuilds into valid JSON with the tools asked for (the
// search tool in the Messages form) and a round as two messages after
// the client's; and any stream event is read or refused, never a panic.
func FuzzMessagesParseBuild(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"a","input_schema":{}}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":[{"type":"tool_use","id":"1","name":"a","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"1","content":"ok"}]}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`,
		`{"messages":[],"tools":null}`, `{"messages":42}`, `{"messages":[],"tool_choice":{"type":"tool","name":"a"},"system":[{"type":"text","text":"s"}]}`,
		`{"messages":[{"role":"assistant","content":"{"}],"tools":[{"name":"a","input_schema":{},"defer_loading":true}]}`,
		`[]`, ``, "{\"messages\":\"\xff\"}",
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"a","input":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rd := Messages{}.ItemReader()
		for _, ev := range [][]byte{body, []byte(`{"type":"message_delta","delta":{},"usage":{}}`)} {
			if e, err := rd.Read(ev); err == nil && e.Terminal && !e.Failed {
				for _, it := range e.Items {
					if it != "" && !gjson.Valid(it) { // "" holds an index no block took
						t.Fatalf("a stream built the invalid block %q", it)
					}
				}
			}
		}
		req, err := Messages{}.ParseRequest(body, nil)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("refused with %v, which does not wrap ErrBadRequest", err)
			}
			return
		}
		before := len(gjson.GetBytes(body, pathMessages).Array())
		checkBuilds(t, Messages{}, req, func(got gjson.Result) bool { return got.Get("0.input_schema").IsObject() }, func(root gjson.Result) bool {
			msgs := root.Get(pathMessages).Array()
			return len(msgs) == before+2 && msgs[len(msgs)-1].Get("content.0.type").String() == "tool_result"
		})
	})
}

// checkBuilds holds d's Build of an accepted request to valid JSON with
// the tools asked for (the first of them as searchOK says the dialect
// writes the search tool) and the request's pinned ones, and a search
// round where roundOK finds it.
func checkBuilds(t *testing.T, d Dialect, req *Request, searchOK, roundOK func(gjson.Result) bool) {
	t.Helper()
	own, err := d.OwnTool(searchDef)
	if err != nil {
		t.Fatalf("the search definition in the dialect's form: %v", err)
	}
	round := []Round{{Calls: []Call{{ID: "s1", Name: "tool_search", Arguments: `{"query":"x"}`}}, Results: []ToolResult{{CallID: "s1", Content: "found \"a\"\n"}}}}
	for _, tc := range []struct {
		name   string
		tools  []string
		rounds []Round
	}{
		{"a new tools array", []string{own}, nil},
		{"no tools", nil, nil},
		{"a search round", []string{own}, round},
	} {
		out, err := d.Build(req, tc.tools, tc.rounds)
		if err != nil {
			t.Fatalf("%s: Build refused an accepted request: %v", tc.name, err)
		}
		root := gjson.ParseBytes(out)
		if !gjson.ValidBytes(out) || !root.IsObject() {
			t.Fatalf("%s: Build wrote invalid JSON: %q", tc.name, out)
		}
		got := root.Get(pathTools)
		switch {
		case tc.tools == nil && len(req.Pinned) == 0 && got.Exists():
			t.Fatalf("%s: tools remain: %q", tc.name, out)
		case len(got.Array()) != len(tc.tools)+len(req.Pinned) || (tc.tools != nil && !searchOK(got)):
			t.Fatalf("%s: tools upstream %s, want the search tool in the dialect's form and the %d pinned: %q", tc.name, got.Raw, len(req.Pinned), out)
		}
		if tc.rounds != nil && !roundOK(root) {
			t.Fatalf("%s: %q, want the round after the client's conversation", tc.name, out)
		}
	}
}
