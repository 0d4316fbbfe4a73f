package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// Step queries for episodes: what the scripted model searches for a step
// whose tool it is not offered.
const (
	// stepPrompt searches with the task's own text: all a model knows before
	// it plans, so the result is a lower bound.
	stepPrompt = "prompt"
	// stepName searches with the words of the needed tool's name: a model
	// that knows exactly what it wants, so the result is an upper bound.
	stepName = "name"
)

// episodes turns eval queries (the shared format) into scripted agent
// tasks for the demo: each query whose subset starts with subset becomes a
// task whose prompt is the query and whose steps are its gold tools in
// order. It returns the tasks and the tools array of their catalog.
func episodes(qs []selector.EvalQuery, defs map[string][]rewrite.Tool, subset, stepQuery string) (tasks, catalog []byte, err error) {
	if stepQuery != stepPrompt && stepQuery != stepName {
		return nil, nil, fmt.Errorf("%w: --step-query is %q; want prompt or name", errUsage, stepQuery)
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
			if stepQuery == stepName {
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
	raws := make([]string, len(tools))
	for i, t := range tools {
		raws[i] = t.Raw
	}
	tasks, err = json.Marshal(out)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding episodes: %w", err)
	}
	return tasks, []byte("[" + strings.Join(raws, ",") + "]"), nil
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
