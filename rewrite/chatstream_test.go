package rewrite

import "testing"

func TestParseEventReadsWhatAClientWouldRead(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	tests := []struct {
		name        string
		delta       string
		wantText    bool
		content     string
		wantParts   bool
		wantThought bool // all its text is reasoning
	}{
		{"string content is text", `{"content":"Hi"}`, true, "Hi", false, false},
		{"an array of parts is text, its text parts read as the content", `{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]},{"type":"text","text":"Hi"}]}`, true, "Hi", true, false},
		{"thinking parts alone still reach the client", `{"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]}]}`, true, "", true, false},
		{"reasoning is text, and all of it reasoning", `{"reasoning":"hm"}`, true, "", false, true},
		{"reasoning details are reasoning", `{"content":"","reasoning_details":[{"type":"reasoning.text","text":"hm","index":0}]}`, true, "", false, true},
		{"reasoning before an empty content is still text", `{"reasoning_content":"hm","content":""}`, true, "", false, true},
		{"reasoning beside content is not all the text", `{"reasoning":"hm","content":"Hi"}`, true, "Hi", false, false},
		{"a refusal is text and no reasoning", `{"refusal":"I can't."}`, true, "", false, false},
		{"a provider's number is not (Together's token_id)", `{"token_id":421}`, false, "", false, false},
		{"a role alone is not", `{"role":"assistant"}`, false, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev Event
			if err := (Chat{}).ParseEvent([]byte(head+tt.delta+`,"finish_reason":null}]}`), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Text != tt.wantText || ev.Content != tt.content || (ev.ContentParts != "") != tt.wantParts || ev.Thought != tt.wantThought {
				t.Errorf("Text %v, Content %q, ContentParts %q, Thought %v; want %v, %q, parts %v, %v", ev.Text, ev.Content, ev.ContentParts, ev.Thought, tt.wantText, tt.content, tt.wantParts, tt.wantThought)
			}
		})
	}
}

func TestAnnotationFindsAProvidersVerdictBesideTheDelta(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk string
		want  bool
	}{
		{"Azure's asynchronous verdict with offsets and no delta is one", `{"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":9},"content_filter_results":{"hate":{"filtered":false}},"finish_reason":null,"index":0}],"id":""}`, true},
		{"a verdict beside an empty delta is one", `{"choices":[{"index":0,"delta":{},"content_filter_results":{"violence":{"filtered":true,"severity":"high"}}}]}`, true},
		{"an empty verdict, as on Azure's role chunk, is none", `{"choices":[{"index":0,"delta":{"role":"assistant"},"content_filter_results":{}}]}`, false},
		{"a null member is none", `{"choices":[{"index":0,"delta":{},"content_filter_results":null,"finish_reason":null}]}`, false},
		{"logprobs are the choice's own, not an annotation", `{"choices":[{"index":0,"delta":{},"logprobs":{"content":[{"token":"a"}]}}]}`, false},
		{"a chunk without a choice has none", `{"choices":[],"prompt_filter_results":[{"prompt_index":0}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event
			if err := (Chat{}).ParseEvent([]byte(tc.chunk), &ev); err != nil {
				t.Fatal(err)
			}
			if got := ev.Annotation(); got != tc.want {
				t.Errorf("Annotation() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShiftAnnotationsMovesOnlyURLCitations(t *testing.T) {
	const cite = `{"type":"url_citation","url_citation":{"start_index":2,"end_index":5,"url":"https://example.com"}}`
	tests := []struct {
		name        string
		annotations string
		by          int
		want        string
	}{
		{"a url_citation's offsets move on", `[` + cite + `]`, 8,
			`[{"type":"url_citation","url_citation":{"start_index":10,"end_index":13,"url":"https://example.com"}}]`},
		{"another kind of annotation stays as it came", `[{"type":"provider_note","start_index":2,"end_index":5},` + cite + `]`, 1,
			`[{"type":"provider_note","start_index":2,"end_index":5},{"type":"url_citation","url_citation":{"start_index":3,"end_index":6,"url":"https://example.com"}}]`},
		{"an offset that is not a number stays", `[{"type":"url_citation","url_citation":{"start_index":"2"}}]`, 3,
			`[{"type":"url_citation","url_citation":{"start_index":"2"}}]`},
		{"nothing moves when nothing came before", `[` + cite + `]`, 0, `[` + cite + `]`},
		{"annotations that are not an array stay", `{}`, 3, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShiftAnnotations(tt.annotations, tt.by); got != tt.want {
				t.Errorf("ShiftAnnotations(%s, %d) = %s, want %s", tt.annotations, tt.by, got, tt.want)
			}
		})
	}
}

func TestEditEventShiftsADeltasCitations(t *testing.T) {
	const chunk = `{"id":"c1","choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation","url_citation":{"start_index":0,"end_index":3}}]}}]}`
	out, err := Chat{}.EditEvent([]byte(chunk), EventEdit{ShiftAnnotations: 4})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"c1","choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation","url_citation":{"start_index":4,"end_index":7}}]}}]}`
	if string(out) != want {
		t.Errorf("EditEvent gave %s, want %s", out, want)
	}
}

// TestANullMemberIsNeitherACallNorARole: SGLang writes every member of a
// delta or a message, nulls included; gjson's ForEach calls back once over
// a null, so "tool_calls": null would read as one nameless call.
func TestANullMemberIsNeitherACallNorARole(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	for _, tc := range []struct {
		name     string
		delta    string
		calls    int
		role     bool
		wantText bool
	}{
		{"a role chunk with null calls and reasoning has a role and no call", `{"role":"assistant","content":"","tool_calls":null,"reasoning_content":null}`, 0, true, false},
		{"a text chunk with a null role and null calls has neither", `{"role":null,"content":"Hi","tool_calls":null}`, 0, false, true},
		{"a call chunk beside a null role has its one call", `{"role":null,"content":null,"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":""}}]}`, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event
			if err := (Chat{}).ParseEvent([]byte(head+tc.delta+`,"finish_reason":null}]}`), &ev); err != nil {
				t.Fatal(err)
			}
			if len(ev.Calls) != tc.calls || ev.Role != tc.role || ev.Text != tc.wantText {
				t.Errorf("%d calls %+v, Role %v, Text %v; want %d calls, Role %v, Text %v", len(ev.Calls), ev.Calls, ev.Role, ev.Text, tc.calls, tc.role, tc.wantText)
			}
		})
	}
	t.Run("a whole message with null calls has none", func(t *testing.T) {
		r, err := ParseResponse([]byte(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","tool_calls":null,"reasoning_content":null},"finish_reason":"stop"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Calls) != 0 || r.Content != "Hi" || r.Extra != "" {
			t.Errorf("calls %+v, content %q, extra %q; want no call, Hi, no extra", r.Calls, r.Content, r.Extra)
		}
	})
}

func TestAChunksErrorIsOneOnlyWhenItSaysSomething(t *testing.T) {
	for _, tc := range []struct {
		name, member string
		want         bool
	}{
		{"an error object is one", `{"message":"overloaded","code":502}`, true},
		{"an error message alone is one", `"overloaded"`, true},
		{"a null error is none", `null`, false},
		{"an empty error message is none", `""`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event
			chunk := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","error":` + tc.member + `,"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`
			if err := (Chat{}).ParseEvent([]byte(chunk), &ev); err != nil {
				t.Fatal(err)
			}
			if got := ev.Error.Exists(); got != tc.want {
				t.Errorf("Error %s read as an error: %v, want %v", tc.member, got, tc.want)
			}
		})
	}
}

func TestShiftDetailsNumbersReasoningDetailsOn(t *testing.T) {
	for _, tc := range []struct {
		name, details string
		by            int64
		want          string
	}{
		{"each detail's index moves on", `[{"type":"reasoning.text","text":"a","index":0},{"type":"reasoning.encrypted","data":"x","index":1}]`, 2,
			`[{"type":"reasoning.text","text":"a","index":2},{"type":"reasoning.encrypted","data":"x","index":3}]`},
		{"a detail without a numeric index stays", `[{"type":"reasoning.text","text":"a","index":"0"},{"text":"b"}]`, 2, `[{"type":"reasoning.text","text":"a","index":"0"},{"text":"b"}]`},
		{"nothing moves when nothing came before", `[{"text":"a","index":0}]`, 0, `[{"text":"a","index":0}]`},
		{"details that are not an array stay", `null`, 2, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shiftDetails(tc.details, tc.by); got != tc.want {
				t.Errorf("shiftDetails(%s, %d) = %s, want %s", tc.details, tc.by, got, tc.want)
			}
		})
	}
	t.Run("an event's details move on and its index end is read", func(t *testing.T) {
		chunk := []byte(`{"id":"c1","choices":[{"index":0,"delta":{"reasoning_details":[{"text":"a","index":0},{"text":"b","index":1}]},"finish_reason":null}]}`)
		var ev Event
		if err := (Chat{}).ParseEvent(chunk, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Details != 2 || !ev.Thought {
			t.Errorf("Details %d, Thought %v; want 2 and true", ev.Details, ev.Thought)
		}
		out, err := Chat{}.EditEvent(chunk, EventEdit{ShiftDetails: 3})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"id":"c1","choices":[{"index":0,"delta":{"reasoning_details":[{"text":"a","index":3},{"text":"b","index":4}]},"finish_reason":null}]}`; string(out) != want {
			t.Errorf("edited %s, want %s", out, want)
		}
	})
}
