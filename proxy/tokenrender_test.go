package proxy

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// TestAToolIsCountedAsTheModelReadsIt: the direct estimate adds held-back
// tools to the upstream's own prompt count, which reads a function as a
// declaration, not as the JSON a client sends.
func TestAToolIsCountedAsTheModelReadsIt(t *testing.T) {
	chat := `{"type":"function","function":{"name":"repo_create_issue","description":"Open an issue in a repository.",` +
		`"parameters":{"type":"object","properties":{"repo":{"type":"string","description":"owner/name"},` +
		`"labels":{"type":"array","items":{"type":"string"}},"priority":{"type":"string","enum":["low","high"]}},"required":["repo"]}}}`
	flat := `{"type":"function","name":"repo_create_issue","description":"Open an issue in a repository.",` +
		`"parameters":{"type":"object","properties":{"repo":{"type":"string","description":"owner/name"},` +
		`"labels":{"type":"array","items":{"type":"string"}},"priority":{"type":"string","enum":["low","high"]}},"required":["repo"]}}`
	want := "// Open an issue in a repository.\ntype repo_create_issue = (_: {\n  // owner/name\n  repo: string,\n" +
		"  labels?: string[],\n  priority?: \"low\" | \"high\",\n}) => any;\n\n"
	for _, tc := range []struct {
		name, raw string
		ok        bool
	}{
		{"a Chat Completions function reads as a declaration", chat, true},
		{"a Responses API function reads the same", flat, true},
		{"an Anthropic tool is not rendered: it is read as JSON", `{"name":"x","description":"d","input_schema":{"type":"object"}}`, false},
		{"a tool without a name is not rendered", `{"type":"web_search"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := renderedTool(tc.raw)
			if ok != tc.ok || (ok && got != want) {
				t.Errorf("renderedTool = %q, %v; want %q, %v", got, ok, want, tc.ok)
			}
		})
	}
	t.Run("the bundled catalog counts about a quarter fewer tokens as read than as JSON", func(t *testing.T) {
		raw, err := os.ReadFile("../testdata/catalog.json")
		if err != nil {
			t.Fatalf("reading the bundled catalog, which the repository holds: %v", err)
		}
		var tools []json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatal(err)
		}
		c := newTokenCounter()
		var asJSON, asRead int
		for _, tool := range tools {
			var compact bytes.Buffer // as clients send it
			if err := json.Compact(&compact, tool); err != nil {
				t.Fatal(err)
			}
			tool = compact.Bytes()
			j, err := c.tool(tokenizer.O200kBase, string(tool))
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.rendered(tokenizer.O200kBase, string(tool))
			if err != nil {
				t.Fatal(err)
			}
			asJSON, asRead = asJSON+j, asRead+r
		}
		if share := float64(asRead) / float64(asJSON); share < 0.6 || share > 0.9 {
			t.Errorf("%d tools: %d tokens as read, %d as JSON (%.2f); want a share between 0.6 and 0.9", len(tools), asRead, asJSON, share)
		} else {
			t.Logf("%d tools: %d tokens as read, %d as JSON (%.2f)", len(tools), asRead, asJSON, share)
		}
	})
}

// TestADeeplyNestedSchemaRendersInBoundedWork: a client's schema may nest
// without end; rendering stops at maxRenderDepth.
func TestADeeplyNestedSchemaRendersInBoundedWork(t *testing.T) {
	schema := strings.Repeat(`{"type":"array","items":`, 10000) + `{"type":"string"}` + strings.Repeat(`}`, 10000)
	raw := `{"type":"function","function":{"name":"deep","parameters":{"type":"object","properties":{"x":` + schema + `}}}}`
	got, ok := renderedTool(raw)
	if !ok || len(got) > 500 || !strings.Contains(got, "any") {
		t.Errorf("renderedTool = %.200q (%d bytes), %v; want a short declaration that gives up with any", got, len(got), ok)
	}
}
