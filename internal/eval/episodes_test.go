package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

func TestNameWords(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"filesystem__write_file", "write file"},
		{"getBaziDetail", "get bazi detail"},
		{"get-9to5mac-news", "get 9to5mac news"},
		{"playwright_navigate", "playwright navigate"},
		{"HTMLParser.parse", "htmlparser parse"},
	} {
		t.Run(tc.name+" reads as "+tc.want, func(t *testing.T) {
			if got := nameWords(tc.name); got != tc.want {
				t.Errorf("nameWords(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

func TestEpisodesBecomeScriptedTasks(t *testing.T) {
	defs := map[string][]rewrite.Tool{"c": {{Name: "fs_read_file", Raw: `{"n":1}`}, {Name: "chat_post_message", Raw: `{"n":2}`}}}
	qs := []selector.EvalQuery{
		{ID: "a", Catalog: "c", Query: "read notes.txt and post it", Gold: []string{"fs_read_file", "chat_post_message"}, Subset: "live/office"},
		{ID: "b", Catalog: "c", Query: "post hello", Gold: []string{"chat_post_message"}, Subset: "bench/chat"},
		{ID: "c", Catalog: "c", Query: "nothing needed", Subset: "live/office"},
	}
	t.Run("a query is a task whose steps are its gold tools in order", func(t *testing.T) {
		tasks, catalog, err := Episodes(qs, defs, "live", StepName, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []fakellm.Task
		if err := json.Unmarshal(tasks, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Prompt != qs[0].Query || len(got[0].Steps) != 2 ||
			got[0].Steps[0].Tool != "fs_read_file" || got[0].Steps[1].Query != "chat post message" {
			t.Errorf("tasks %+v", got)
		}
		if string(catalog) != `[{"n":1},{"n":2}]` {
			t.Errorf("catalog %s", catalog)
		}
	})
	t.Run("with prompt step queries every step searches with the task's text", func(t *testing.T) {
		tasks, _, err := Episodes(qs, defs, "", StepPrompt, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []fakellm.Task
		_ = json.Unmarshal(tasks, &got)
		if len(got) != 2 || got[0].Steps[1].Query != qs[0].Query {
			t.Errorf("tasks %+v", got)
		}
	})
	for _, tc := range []struct {
		name      string
		qs        []selector.EvalQuery
		subset    string
		stepQuery string
	}{
		{"an unknown step query is an error", qs, "", "guess"},
		{"a subset without queries is an error", qs, "nope", StepName},
		{"queries over two catalogs are an error", append(qs, selector.EvalQuery{ID: "d", Catalog: "other", Gold: []string{"x"}}), "", StepName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := Episodes(tc.qs, defs, tc.subset, tc.stepQuery, 0); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestAgentCatalogKeepsTheCalledToolsAndDrawsTheRest(t *testing.T) {
	var tools []rewrite.Tool
	for i := range 40 {
		tools = append(tools, rewrite.Tool{Name: fmt.Sprintf("tool_%02d", i)})
	}
	tasks := []fakellm.Task{{Steps: []fakellm.Step{{Tool: "tool_07"}, {Tool: "tool_31"}}}, {Steps: []fakellm.Step{{Tool: "tool_07"}}}}
	names := func(ts []rewrite.Tool) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		n    int
		want int // tools returned; 0 means an error
	}{
		{"an agent smaller than the catalog keeps n tools", 10, 10},
		{"an agent of exactly the called tools keeps only them", 2, 2},
		{"an agent as large as the catalog is the catalog", 40, 40},
		{"an agent larger than the catalog is the catalog", 99, 40},
		{"an agent too small for the called tools is an error saying how many they call", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agentCatalog(tools, tasks, tc.n)
			if tc.want == 0 {
				var small *AgentTooSmallError
				if !errors.As(err, &small) || small.Size != tc.n || small.Called != 2 {
					t.Fatalf("err = %v, want an AgentTooSmallError of size %d for 2 called tools", err, tc.n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ns := names(got)
			if len(ns) != tc.want || !slices.Contains(ns, "tool_07") || !slices.Contains(ns, "tool_31") {
				t.Errorf("agent %v: want %d tools with tool_07 and tool_31", ns, tc.want)
			}
			if !slices.IsSorted(ns) {
				t.Errorf("agent %v is not in the catalog's order", ns)
			}
			again, _ := agentCatalog(tools, tasks, tc.n)
			if !slices.Equal(names(again), ns) {
				t.Errorf("two draws differ: %v and %v", ns, names(again))
			}
		})
	}
	t.Run("the drawn tools are not simply the catalog's first ones", func(t *testing.T) {
		got, _ := agentCatalog(tools, tasks, 10)
		if ns := names(got); slices.Equal(ns[:8], names(tools[:8])) {
			t.Errorf("agent %v: the others were not drawn", ns)
		}
	})
}
