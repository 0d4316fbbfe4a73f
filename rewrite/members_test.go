package rewrite

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

func TestMembersAssembleAStreamsPiecesAsTheSDKsDo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string
		skip   func(string) bool
		want   string // the object the members make, compared as JSON
	}{
		{
			name: "a reasoning detail's format, repeated in every chunk, stays one",
			pieces: []string{`{"reasoning_details":[{"type":"reasoning.text","text":"I ","format":"anthropic-claude-v1","index":0}]}`,
				`{"reasoning_details":[{"type":"reasoning.text","text":"search.","format":"anthropic-claude-v1","index":0}]}`},
			want: `{"reasoning_details":[{"type":"reasoning.text","text":"I search.","format":"anthropic-claude-v1","index":0}]}`,
		},
		{
			name:   "strings continue each other",
			pieces: []string{`{"reasoning_content":"I should "}`, `{"reasoning_content":"search."}`},
			want:   `{"reasoning_content":"I should search."}`,
		},
		{
			name:   "escapes survive the join",
			pieces: []string{`{"r":"a \"quoted\" \u00e9"}`, `{"r":"\n\\ end"}`},
			want:   `{"r":"a \"quoted\" é\n\\ end"}`,
		},
		{
			name:   "an empty string is kept, since some providers require the member",
			pieces: []string{`{"reasoning_content":""}`},
			want:   `{"reasoning_content":""}`,
		},
		{
			name:   "null never replaces a value and is never kept",
			pieces: []string{`{"refusal":null,"r":"x"}`, `{"r":null}`},
			want:   `{"r":"x"}`,
		},
		{
			name:   "objects merge member by member",
			pieces: []string{`{"extra_content":{"google":{"thought_signature":"sig"}}}`, `{"extra_content":{"google":{"other":1}}}`},
			want:   `{"extra_content":{"google":{"thought_signature":"sig","other":1}}}`,
		},
		{
			name: "array elements with an index merge into the element of that index",
			pieces: []string{
				`{"reasoning_details":[{"type":"reasoning.text","text":"Let ","index":0}]}`,
				`{"reasoning_details":[{"type":"reasoning.text","text":"me see.","index":0}]}`,
				`{"reasoning_details":[{"type":"reasoning.encrypted","data":"xyz","index":1}]}`,
				`{"reasoning_details":[{"index":0,"signature":"s0"}]}`,
			},
			want: `{"reasoning_details":[{"type":"reasoning.text","text":"Let me see.","index":0,"signature":"s0"},{"type":"reasoning.encrypted","data":"xyz","index":1}]}`,
		},
		{
			name:   "other arrays are appended to",
			pieces: []string{`{"a":[1,"x"]}`, `{"a":[{"k":2}]}`},
			want:   `{"a":[1,"x",{"k":2}]}`,
		},
		{
			name:   "index, type and id are replaced, never joined",
			pieces: []string{`{"index":0,"type":"function","id":"c1"}`, `{"index":0,"type":"function","id":"c1"}`},
			want:   `{"index":0,"type":"function","id":"c1"}`,
		},
		{
			name:   "numbers and booleans take the last value",
			pieces: []string{`{"n":1,"b":true}`, `{"n":2,"b":false}`},
			want:   `{"n":2,"b":false}`,
		},
		{
			name:   "a value of another kind replaces the old one",
			pieces: []string{`{"v":"text"}`, `{"v":{"o":1}}`},
			want:   `{"v":{"o":1}}`,
		},
		{
			name:   "skipped members are left out",
			pieces: []string{`{"role":"assistant","content":"hi","reasoning":"r"}`},
			skip:   messageKey,
			want:   `{"reasoning":"r"}`,
		},
		{
			name:   "a piece that is not an object adds nothing",
			pieces: []string{`"text"`, `[1]`, `{"a":"b"}`},
			want:   `{"a":"b"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ms Members
			for _, p := range tc.pieces {
				buf := []byte(p)
				ms.Add(gjson.ParseBytes(buf), tc.skip)
				for i := range buf {
					buf[i] = 'X' // the members must not alias what they were given
				}
			}
			got := "{" + ms.String() + "}"
			if !json.Valid([]byte(got)) {
				t.Fatalf("members %s are not valid JSON", got)
			}
			var g, w any
			_ = json.Unmarshal([]byte(got), &g)
			_ = json.Unmarshal([]byte(tc.want), &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) {
				t.Errorf("members = %s\nwant      %s", got, tc.want)
			}
		})
	}
}

func TestMembersAreEmptyUntilSomethingIsKept(t *testing.T) {
	var ms Members
	ms.Add(gjson.Parse(`{"refusal":null}`), nil)
	if !ms.Empty() || ms.String() != "" {
		t.Errorf("after only nulls: Empty %v, String %q; want true and empty", ms.Empty(), ms.String())
	}
	ms.Add(gjson.Parse(`{"r":""}`), nil)
	if ms.Empty() {
		t.Error("after an empty string: Empty, want a member")
	}
}

func TestWithMembersAddsToAnObject(t *testing.T) {
	for _, tt := range []struct{ name, raw, members, want string }{
		{"members join an object's own", `{"id":"a"}`, `"x":1`, `{"id":"a","x":1}`},
		{"an empty object takes them", `{ }`, `"x":1`, `{"x":1}`},
		{"no members leave it as it is", `{"id":"a"}`, ``, `{"id":"a"}`},
		{"what is not an object is left as it is", `[1]`, `"x":1`, `[1]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := withMembers(tt.raw, tt.members); got != tt.want {
				t.Errorf("WithMembers(%s, %s) = %s, want %s", tt.raw, tt.members, got, tt.want)
			}
		})
	}
}
