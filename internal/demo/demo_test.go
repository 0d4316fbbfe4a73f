package demo

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/policy"
)

// Floors the bundled run must clear: the targets, at least 85%
// fewer upstream input tokens, at least 95% of tool steps completed and at
// most 1.3x the upstream calls (46/46 steps today).
const (
	minInputReduction = 0.85
	minStepShare      = 0.95
	maxCallRatio      = 1.3
)

// reduction returns 1 - gateway/direct, the share saved.
func reduction(direct, gateway int64) float64 {
	if direct == 0 {
		return 0
	}
	return 1 - float64(gateway)/float64(direct)
}

func TestDemoSavesTokensWithoutLosingSteps(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"the non-streamed replay cuts input tokens and completes the steps", Options{}},
		{"the streamed replay cuts input tokens and completes the steps", Options{Stream: true}},
		{"the Responses API replay cuts input tokens and completes the steps", Options{API: APIResponses}},
		{"the streamed Responses API replay cuts input tokens and completes the steps", Options{API: APIResponses, Stream: true}},
		{"the Messages API replay cuts input tokens and completes the steps", Options{API: APIMessages}},
		{"the streamed Messages API replay cuts input tokens and completes the steps", Options{API: APIMessages, Stream: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(context.Background(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			d, g := res.Direct, res.Gateway
			if d.StepsCompleted != res.Steps || d.TasksCompleted != res.Tasks {
				t.Fatalf("direct run completed %d/%d steps, %d/%d tasks: the harness is broken", d.StepsCompleted, res.Steps, d.TasksCompleted, res.Tasks)
			}
			if d.Refused+g.Refused > 0 {
				t.Errorf("upstream refused %d direct and %d gateway requests", d.Refused, g.Refused)
			}
			if r := reduction(d.InputTokens, g.InputTokens); r < minInputReduction {
				t.Errorf("input tokens %d -> %d: %.1f%% fewer, want at least %.0f%%", d.InputTokens, g.InputTokens, r*100, minInputReduction*100)
			}
			if share := float64(g.StepsCompleted) / float64(res.Steps); share < minStepShare {
				t.Errorf("gateway completed %d/%d steps (%.0f%%), want at least %.0f%%", g.StepsCompleted, res.Steps, share*100, minStepShare*100)
			}
			if ratio := float64(g.Calls) / float64(d.Calls); ratio > maxCallRatio {
				t.Errorf("upstream calls %d -> %d (%.2fx), want at most %.1fx", d.Calls, g.Calls, ratio, maxCallRatio)
			}
			if g.Tools*10 > d.Tools {
				t.Errorf("gateway sent %d tools in all, direct %d: want at least 10x fewer", g.Tools, d.Tools)
			}
			// The direct run resends one tools array: a prefix cache
			// serves nearly all of it, which the billed row must show.
			if d.CachedTokens*10 < d.InputTokens*9 {
				t.Errorf("direct run: %d of %d input tokens estimated cache hits, want at least 90%%", d.CachedTokens, d.InputTokens)
			}
			if g.CachedTokens >= g.InputTokens || g.CachedTokens <= 0 {
				t.Errorf("gateway run: %d of %d input tokens estimated cache hits, want some but not all", g.CachedTokens, g.InputTokens)
			}
			if db, gb := d.billed(res.CacheRate), g.billed(res.CacheRate); !(gb < db && db < float64(d.InputTokens)) {
				t.Errorf("billed input at %v: direct %.0f, gateway %.0f (input %d, %d)", res.CacheRate, db, gb, d.InputTokens, g.InputTokens)
			}
			var out bytes.Buffer
			if err := res.Print(&out); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"input tokens, all calls", "prompt-cache hits", "input billed, hits at 50%", "tool steps completed", "tasks completed"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestDemoRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"a catalog that is not JSON is an error", Options{Catalog: []byte("nope")}},
		{"an empty task list is an error", Options{Tasks: []byte("[]")}},
		{"a cache rate above the input price is an error", Options{CacheRate: 1.5}},
		{"a negative cache rate is an error", Options{CacheRate: -0.1}},
		{"a cache rate that is not a number is an error", Options{CacheRate: math.NaN()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Run(context.Background(), tc.o); err == nil {
				t.Error("no error")
			}
		})
	}
}

// An agent that works through the tasks in one conversation builds a long
// history of called tools. The gateway must still offer each new request
// what it needs: with every earlier call pinned, the history alone filled
// max_active and the tasks after it failed (9 of 12 at the default 32, 2 of
// 12 at 10); earlier turns' tools now make way for the turn at hand.
func TestOneConversationCompletesEveryTask(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   string
		minTasks int
	}{
		{"with the default max_active every task completes", "", 12},
		{"with max_active 10 the turn's own tools still win", "gateway:\n  max_active: 10\n", 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{OneSession: true}
			if tc.policy != "" {
				path := filepath.Join(t.TempDir(), "tools.yaml")
				if err := os.WriteFile(path, []byte(tc.policy), 0o600); err != nil {
					t.Fatal(err)
				}
				snap, err := policy.Load(path)
				if err != nil {
					t.Fatal(err)
				}
				o.Policy = snap
			}
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Direct; d.TasksCompleted != res.Tasks {
				t.Fatalf("direct run completed %d/%d tasks in one conversation: the harness is broken", d.TasksCompleted, res.Tasks)
			}
			if g := res.Gateway; g.TasksCompleted < tc.minTasks {
				t.Errorf("gateway completed %d/%d tasks (%d/%d steps), want at least %d", g.TasksCompleted, res.Tasks, g.StepsCompleted, res.Steps, tc.minTasks)
			}
		})
	}
}

func TestRunRefusesInputItCannotReplay(t *testing.T) {
	tool := func(name string) string {
		return `{"type":"function","function":{"name":"` + name + `","description":"d"}}`
	}
	tasks := `[{"name":"t1","prompt":"read it","steps":[{"tool":"a","query":"a","args":{}},{"tool":"nosuch_tool","query":"x","args":{}}],"answer":"Done."}]`
	for _, tc := range []struct {
		name           string
		catalog, tasks string
		missing        bool   // the error is ErrMissingTools
		want           string // in the error
	}{
		{"a step whose tool the catalog lacks is named with its task and step", "[" + tool("a") + "]", tasks, true, "nosuch_tool (task t1, step 2)"},
		{"the bundled tasks over an unrelated catalog are refused", "[" + tool("a") + "]", "", true, "fs_read_file (task bug_notes_to_issue, step 1)"},
		{"a catalog with a duplicate name is refused before any task runs", "[" + tool("a") + "," + tool("a") + "," + tool("nosuch_tool") + "]", tasks, false,
			`tools[1] "a": duplicate tool name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Catalog: []byte(tc.catalog)}
			if tc.tasks != "" {
				o.Tasks = []byte(tc.tasks)
			}
			res, err := Run(context.Background(), o)
			if err == nil || errors.Is(err, ErrMissingTools) != tc.missing || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (result %+v); want %q in it", err, res, tc.want)
			}
		})
	}
}
