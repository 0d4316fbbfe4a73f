package rewrite

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestResponsesItemEventsAreClassified(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       ItemEvent
	}{
		{"a call added opens its item and names it", `{"type":"response.output_item.added","sequence_number":3,"output_index":2,"item":{"type":"function_call","name":"tool_search","call_id":"c"}}`,
			ItemEvent{Type: "response.output_item.added", OutputIndex: 2, Opens: true, Call: true, Name: "tool_search"}},
		{"a reasoning item added opens it as reasoning", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"reasoning","id":"rs"}}`,
			ItemEvent{Type: "response.output_item.added", OutputIndex: 0, Opens: true, Reasoning: true}},
		{"an item done opens nothing", `{"type":"response.output_item.done","sequence_number":4,"output_index":2,"item":{"type":"function_call","name":"tool_search","call_id":"c"}}`,
			ItemEvent{Type: "response.output_item.done", OutputIndex: 2}},
		{"a text delta has an index and no item", `{"type":"response.output_text.delta","output_index":0,"delta":"Hi"}`,
			ItemEvent{Type: "response.output_text.delta", OutputIndex: 0}},
		{"a lifecycle event has no index", `{"type":"response.created","response":{"id":"r"}}`,
			ItemEvent{Type: "response.created", OutputIndex: -1}},
		{"response.completed ends the stream", `{"type":"response.completed","response":{"id":"r"}}`,
			ItemEvent{Type: "response.completed", OutputIndex: -1, Terminal: true}},
		{"an error event ends it as a failure", `{"type":"error","code":"x","message":"y"}`,
			ItemEvent{Type: "error", OutputIndex: -1, Terminal: true, Failed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Responses{}.ParseItemEvent([]byte(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || got.OutputIndex != tc.want.OutputIndex || got.Opens != tc.want.Opens ||
				got.Call != tc.want.Call || got.Reasoning != tc.want.Reasoning ||
				got.Name != tc.want.Name || got.Terminal != tc.want.Terminal || got.Failed != tc.want.Failed {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	ev, err := Responses{}.ParseItemEvent([]byte(`{"type":"response.completed","response":{"id":"resp_2","created_at":7,"output":[{"type":"reasoning","id":"rs"},{"type":"message","content":[{"type":"output_text","text":"On it."}]},{"type":"function_call","call_id":"c1","name":"mail_send","arguments":"{}"}],"usage":{"input_tokens":40}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.ID != "resp_2" || ev.Created != 7 || ev.Usage.Get("input_tokens").Int() != 40 || ev.Text != "On it." || len(ev.Items) != 3 ||
		len(ev.Calls) != 1 || ev.Calls[0] != (Call{ID: "c1", Name: "mail_send", Arguments: "{}"}) || gjson.Get(ev.Items[2], "call_id").String() != "c1" {
		t.Errorf("a terminal event read as %+v", ev)
	}
	for _, bad := range []string{`{"type":`, `"0"`, `{"delta":"x"}`} {
		if _, err := (Responses{}).ParseItemEvent([]byte(bad)); err == nil {
			t.Errorf("event %s was accepted", bad)
		}
	}
}

func TestResponsesItemEventsAreRenumberedAndEnded(t *testing.T) {
	out, err := Responses{}.EditItemEvent([]byte(`{"type":"response.output_text.delta","sequence_number":3,"output_index":0,"delta":"Hi"}`), 17, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(out, "sequence_number").Int() != 17 || gjson.GetBytes(out, "output_index").Int() != 4 || gjson.GetBytes(out, "delta").String() != "Hi" {
		t.Errorf("renumbered %s", out)
	}
	out, err = Responses{}.EditItemEvent([]byte(`{"type":"response.in_progress","sequence_number":1,"response":{}}`), 2, -1, "")
	if err != nil || gjson.GetBytes(out, "output_index").Exists() || gjson.GetBytes(out, "sequence_number").Int() != 2 {
		t.Errorf("a lifecycle event renumbered to %s (%v): want no output_index", out, err)
	}
	last := `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_3","status":"completed","output":[{"type":"function_call","name":"tool_search"}],"usage":{"input_tokens":5}}}`
	end, err := Responses{}.EndItemEvents(NamedEvent{Name: "response.completed", Data: []byte(last)}, "resp_1", []string{`{"type":"message","id":"m1"}`, `{"type":"function_call","name":"mail_send"}`}, []byte(`{"input_tokens":50}`), 30)
	if err != nil {
		t.Fatal(err)
	}
	if len(end) != 1 || end[0].Name != "response.completed" {
		t.Fatalf("the turn ends with %d events (%+v), want the one response.completed", len(end), end)
	}
	out = end[0].Data
	r := gjson.GetBytes(out, "response")
	if r.Get("id").String() != "resp_1" || r.Get("output.#").Int() != 2 || r.Get("output.1.name").String() != "mail_send" ||
		r.Get("usage.input_tokens").Int() != 50 || gjson.GetBytes(out, "sequence_number").Int() != 30 || r.Get("status").String() != "completed" {
		t.Errorf("last event %s", out)
	}
}

func TestResponsesBuildContinuesFromTheUpstreamsResponse(t *testing.T) {
	for _, tc := range []struct {
		name, previous, upstream, want string
	}{
		{"a response the gateway showed under another id continues from the upstream's", "resp_1", "resp_3", "resp_3"},
		{"a response shown under its own id continues from it", "resp_1", "", "resp_1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Responses{}.ParseRequest([]byte(`{"model":"m","previous_response_id":"`+tc.previous+`","input":[{"type":"function_call_output","call_id":"c","output":"ok"}],"tools":[]}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.PreviousUpstream = tc.upstream
			out, err := Responses{}.Build(req, []string{`{"type":"function","name":"a"}`}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(out, "previous_response_id").String(); got != tc.want {
				t.Errorf("previous_response_id %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResponsesEventsEchoTheClientsTools(t *testing.T) {
	const client = `[{"type":"function","name":"a"},{"type":"function","name":"b"}]`
	for _, tc := range []struct{ name, data, tools, want string }{
		{"the tools the round was offered become the client's", `{"type":"response.created","response":{"id":"r","tools":[{"type":"function","name":"tool_search"}]}}`, client,
			`{"type":"response.created","response":{"id":"r","tools":` + client + `}}`},
		{"an event that echoes the client's tools already is left as it is", `{"type":"response.completed","response":{"tools":` + client + `}}`, client,
			`{"type":"response.completed","response":{"tools":` + client + `}}`},
		{"an event that echoes no tools gets none", `{"type":"response.in_progress","response":{"id":"r"}}`, client, `{"type":"response.in_progress","response":{"id":"r"}}`},
		{"no client tools leave the event as it is", `{"type":"response.created","response":{"tools":[]}}`, "", `{"type":"response.created","response":{"tools":[]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Responses{}.EchoTools([]byte(tc.data), tc.tools)
			if err != nil || string(got) != tc.want {
				t.Errorf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestItemReadersMarkAChatEndMarkerStray(t *testing.T) {
	for _, iw := range []ItemEventWriter{Responses{}, Messages{}} {
		ev, err := iw.ItemReader().Read([]byte("[DONE]"))
		if err != nil || !ev.Stray || ev.Terminal {
			t.Errorf("%T: read [DONE] as %+v, %v; want a stray event", iw, ev, err)
		}
	}
}

func TestLifecycleEventsAreEachAPIsOwn(t *testing.T) {
	tests := []struct {
		name                string
		responses, messages bool
	}{
		{"response.created", true, false},
		{"response.in_progress", true, false},
		{"response.queued", true, false},
		{"response.output_item.added", true, false},
		{"response.content_part.added", true, false},
		{"response.output_text.delta", false, false},
		{"response.completed", false, false},
		{"message_start", false, true},
		{"content_block_start", false, true},
		{"ping", false, true},
		{"content_block_delta", false, false},
		{"keepalive", true, true},
		{"error", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, m := Responses{}.LifecycleEvent(tt.name), Messages{}.LifecycleEvent(tt.name)
			if r != tt.responses || m != tt.messages || AnyLifecycleEvent(tt.name) != (r || m) {
				t.Errorf("Responses %v, Messages %v, any %v; want %v, %v", r, m, AnyLifecycleEvent(tt.name), tt.responses, tt.messages)
			}
		})
	}
	if _, ok := Dialect(Chat{}).(Lifecycle); ok {
		t.Error("Chat has lifecycle events; its stream names none")
	}
}

func TestResponsesItemEventTakesTheStreamsID(t *testing.T) {
	const failed = `{"type":"response.failed","sequence_number":4,"response":{"id":"resp_2","status":"failed"}}`
	tests := []struct {
		name, data, id, want string
	}{
		{"a later round's failure", failed, "resp_1", `{"type":"response.failed","sequence_number":9,"response":{"id":"resp_1","status":"failed"}}`},
		{"the first round's failure", failed, "resp_2", `{"type":"response.failed","sequence_number":9,"response":{"id":"resp_2","status":"failed"}}`},
		{"no id to take", failed, "", `{"type":"response.failed","sequence_number":9,"response":{"id":"resp_2","status":"failed"}}`},
		{"an event without a response", `{"type":"error","sequence_number":4,"message":"boom"}`, "resp_1", `{"type":"error","sequence_number":9,"message":"boom"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Responses{}.EditItemEvent([]byte(tt.data), 9, -1, tt.id)
			if err != nil || string(out) != tt.want {
				t.Errorf("EditItemEvent = %s, %v; want %s", out, err, tt.want)
			}
		})
	}
}
