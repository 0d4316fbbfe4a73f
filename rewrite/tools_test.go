package rewrite

import (
	"errors"
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseToolsReadsEachKindOfTool(t *testing.T) {
	for _, tc := range []struct {
		name     string
		array    string
		wantName string
		wantDesc string
		wantKind string
		wantErr  error
	}{
		{"a function tool is read from its function object",
			`[{"type":"function","function":{"name":"fs_read","description":"Read a file."}}]`, "fs_read", "Read a file.", "", nil},
		{"a bare function object of the flat form is read as a function",
			`[{"name":"fs_read","description":"Read a file."}]`, "fs_read", "Read a file.", "", nil},
		{"a custom tool is read from its custom object and marked custom",
			`[{"type":"custom","custom":{"name":"run_python","description":"Run code.","format":{"type":"text"}}}]`, "run_python", "Run code.", "custom", nil},
		{"a type with path characters is read as a member name, not a path",
			`[{"type":"a.b","a.b":{"name":"odd"},"a":{"b":{"name":"wrong"}}}]`, "odd", "", "a.b", nil},
		{"a custom tool without a name is refused like a function without one",
			`[{"type":"custom","custom":{"description":"Run code."}}]`, "", "", "", ErrToolNoName},
		{"a function and a custom tool of one name are duplicates",
			`[{"type":"function","function":{"name":"x"}},{"type":"custom","custom":{"name":"x"}}]`, "", "", "", ErrToolDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tools, err := ParseTools(gjson.Parse(tc.array))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(tools) != 1 {
				t.Fatalf("ParseTools = %d tools, %v", len(tools), err)
			}
			got := tools[0]
			if got.Name != tc.wantName || got.Description != tc.wantDesc || got.Kind != tc.wantKind {
				t.Errorf("got name %q desc %q kind %q; want %q %q %q", got.Name, got.Description, got.Kind, tc.wantName, tc.wantDesc, tc.wantKind)
			}
			if got.Raw != gjson.Parse(tc.array).Get("0").Raw {
				t.Errorf("Raw = %s; want the item as sent", got.Raw)
			}
		})
	}
}
