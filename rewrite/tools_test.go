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

// TestAToolThatDefersOrIsTheProvidersSearchIsRecognised: a client runs a
// tool search of its own when a tool defers its loading, at its top level,
// on its function object or on a tool it groups (an OpenAI namespace, an
// Anthropic MCP toolset), or when it sends a provider's hosted search.
func TestAToolThatDefersOrIsTheProvidersSearchIsRecognised(t *testing.T) {
	for _, tc := range []struct {
		name, raw        string
		deferred, search bool
	}{
		{"a plain function defers nothing", `{"type":"function","name":"a","parameters":{}}`, false, false},
		{"a Responses function marked at its top level defers", `{"type":"function","name":"a","defer_loading":true}`, true, false},
		{"a Chat function marked on its function object defers", `{"type":"function","function":{"name":"a","defer_loading":true}}`, true, false},
		{"a namespace with a deferred member defers", `{"type":"namespace","name":"crm","tools":[{"type":"function","name":"a"},{"type":"function","name":"b","defer_loading":true}]}`, true, false},
		{"a namespace whose members load defers nothing", `{"type":"namespace","name":"crm","tools":[{"type":"function","name":"a","defer_loading":false}]}`, false, false},
		{"an MCP toolset deferred by its default config defers", `{"type":"mcp_toolset","mcp_server_name":"linear","default_config":{"defer_loading":true}}`, true, false},
		{"an MCP toolset with one deferred tool in its configs defers", `{"type":"mcp_toolset","mcp_server_name":"linear","configs":{"x":{"enabled":true},"y":{"defer_loading":true}}}`, true, false},
		{"an MCP toolset without deferral defers nothing", `{"type":"mcp_toolset","mcp_server_name":"linear","default_config":{"enabled":true}}`, false, false},
		{"an OpenAI mcp tool marked at its top level defers", `{"type":"mcp","server_label":"x","defer_loading":true}`, true, false},
		{"the Responses API's tool search is the provider's search", `{"type":"tool_search"}`, false, true},
		{"the Messages API's dated regex search is the provider's search", `{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}`, false, true},
		{"the Messages API's BM25 search is the provider's search", `{"type":"tool_search_tool_bm25","name":"tool_search_tool_bm25"}`, false, true},
		{"a web search is not a tool search", `{"type":"web_search"}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DefersLoading(tc.raw); got != tc.deferred {
				t.Errorf("DefersLoading = %v, want %v", got, tc.deferred)
			}
			if got := ProviderSearchType(gjson.Get(tc.raw, "type").String()); got != tc.search {
				t.Errorf("ProviderSearchType = %v, want %v", got, tc.search)
			}
		})
	}
}

// TestARequestKeepsBothToolsOfOneName: a request's parse keeps two tools of
// one name in every dialect (the proxy passes such a request through, for
// the upstream to decide), while a catalog's still refuses them.
func TestARequestKeepsBothToolsOfOneName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect Dialect
		body    string
	}{
		{"a Chat request keeps both functions", Chat{}, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"a","description":"one"}},{"type":"function","function":{"name":"a","description":"two"}}]}`},
		{"a Responses request keeps both functions", Responses{}, `{"input":"x","tools":[{"type":"function","name":"a","description":"one"},{"type":"function","name":"a","description":"two"}]}`},
		{"a Messages request keeps both tools", Messages{}, `{"model":"claude","messages":[],"tools":[{"name":"a","description":"one","input_schema":{}},{"name":"a","description":"two","input_schema":{}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.dialect.ParseRequest([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Tools) != 2 || r.Tools[0].Description != "one" || r.Tools[1].Description != "two" {
				t.Errorf("tools %+v, want both of name a, in order", r.Tools)
			}
		})
	}
	t.Run("a catalog of two tools of one name is refused", func(t *testing.T) {
		if _, err := ParseTools(gjson.Parse(`[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]`)); !errors.Is(err, ErrToolDuplicate) {
			t.Errorf("err = %v, want ErrToolDuplicate", err)
		}
	})
}
