package eval

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// Step queries for episodes: what the scripted model searches for a step
// whose tool it is not offered.
const (
	// StepPrompt searches with the task's own text: all a model knows before
	// it plans, so the result is a lower bound.
	StepPrompt = "prompt"
	// StepName searches with the words of the needed tool's name: a model
	// that knows exactly what it wants, so the result is an upper bound.
	StepName = "name"
)

// AgentTooSmallError is Episodes' error for an agent of fewer tools than
// its tasks call: such an agent could not complete them.
type AgentTooSmallError struct {
	Size   int // the agent's tools asked for
	Called int // the catalog's tools the tasks call
}

func (e *AgentTooSmallError) Error() string {
	return fmt.Sprintf("an agent of %d tools: the tasks call %d tools of the catalog; want at least that many", e.Size, e.Called)
}

// Episodes turns eval queries (the shared format) into scripted agent
// tasks for the demo: each query whose subset starts with subset becomes a
// task whose prompt is the query and whose steps are its gold tools in
// order, each searched for as stepQuery (StepPrompt or StepName) says. It
// returns the tasks and the tools array of their catalog, or, with
// agentTools > 0, of an agent of that many of its tools (agentCatalog; an
// *AgentTooSmallError when the tasks call more).
func Episodes(qs []selector.EvalQuery, defs map[string][]rewrite.Tool, subset, stepQuery string, agentTools int) (tasks, catalog []byte, err error) {
	if stepQuery != StepPrompt && stepQuery != StepName {
		return nil, nil, fmt.Errorf("episodes: step query %q; want %q or %q", stepQuery, StepPrompt, StepName)
	}
	var out []fakellm.Task
	catID := ""
	for _, q := range qs {
		if !strings.HasPrefix(q.Subset, subset) || len(q.Gold) == 0 {
			continue
		}
		if len(out) == 0 {
			catID = q.Catalog
		} else if q.Catalog != catID {
			return nil, nil, fmt.Errorf("episodes: queries name catalogs %q and %q; pick one with --subset", catID, q.Catalog)
		}
		task := fakellm.Task{Name: q.ID, Prompt: q.Query, Answer: "Done."}
		for _, g := range q.Gold {
			sq := q.Query
			if stepQuery == StepName {
				sq = nameWords(g)
			}
			task.Steps = append(task.Steps, fakellm.Step{Tool: g, Query: sq, Args: json.RawMessage(`{}`)})
		}
		out = append(out, task)
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("episodes: no query with gold tools in subset %q", subset)
	}
	tools, ok := defs[catID]
	if !ok && len(defs) == 1 {
		for _, only := range defs {
			tools = only
		}
	} else if !ok {
		return nil, nil, fmt.Errorf("episodes: the catalog file has no catalog %q", catID)
	}
	if agentTools > 0 {
		if tools, err = agentCatalog(tools, out, agentTools); err != nil {
			return nil, nil, err
		}
	}
	tasks, err = json.Marshal(out)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding episodes: %w", err)
	}
	return tasks, ToolsArray(tools), nil
}

// agentCatalog returns an agent's n tools out of a catalog: every tool the
// tasks call, and others drawn with a fixed seed (so runs compare), in
// the catalog's order. The savings of the gateway depend on how many tools
// an agent sends; an eval catalog is one size (650 tools for mcp), real
// agents come in others.
func agentCatalog(tools []rewrite.Tool, tasks []fakellm.Task, n int) ([]rewrite.Tool, error) {
	if n >= len(tools) {
		return tools, nil
	}
	needed := map[string]bool{}
	for _, t := range tasks {
		for _, s := range t.Steps {
			needed[s.Tool] = true
		}
	}
	keep := make([]bool, len(tools))
	var others []int
	kept := 0
	for i, t := range tools {
		if needed[t.Name] {
			keep[i] = true
			kept++
		} else {
			others = append(others, i)
		}
	}
	if kept > n {
		return nil, &AgentTooSmallError{Size: n, Called: kept}
	}
	draw := rand.New(rand.NewPCG(1, 2))
	draw.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	for _, i := range others[:n-kept] {
		keep[i] = true
	}
	out := make([]rewrite.Tool, 0, n)
	for i, t := range tools {
		if keep[i] {
			out = append(out, t)
		}
	}
	return out, nil
}

// nameWords spells a tool name as the words a model would search with:
// "filesystem__write_file" -> "write file", "getBaziDetail" -> "get bazi
// detail". A server prefix (before "__") is dropped.
func nameWords(name string) string {
	if i := strings.LastIndex(name, "__"); i >= 0 {
		name = name[i+2:]
	}
	var b strings.Builder
	prev := ' '
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || r == '.':
			r = ' '
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			b.WriteByte(' ')
		}
		b.WriteRune(unicode.ToLower(r))
		prev = r
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// ToolsArray returns tools as the JSON array they came from.
func ToolsArray(tools []rewrite.Tool) []byte {
	raws := make([]string, len(tools))
	for i, t := range tools {
		raws[i] = t.Raw
	}
	return []byte("[" + strings.Join(raws, ",") + "]")
}
