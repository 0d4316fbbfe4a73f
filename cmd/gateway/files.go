package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/toolgate/toolgate/internal/eval"
	"github.com/toolgate/toolgate/internal/fakellm"
	"github.com/toolgate/toolgate/rewrite"
)

// readCatalog reads a catalog file: {catalog id: [tools]} or a plain tools
// array (under the id ""). Every error names the file, and FILE:LINE:COL
// where the JSON is broken. A catalog without tools is refused here, where
// the file is known: the selector's own "catalog has no tools" names an
// id, which for a plain array is "".
func readCatalog(path string) (map[string][]rewrite.Tool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading catalog: %w", err)
	}
	if err := syntaxError(path, data); err != nil {
		return nil, fmt.Errorf("reading catalog %w", err)
	}
	defs, err := rewrite.ParseCatalog(data)
	if err != nil {
		return nil, fmt.Errorf("reading catalog %s: %w", path, err)
	}
	if len(defs) == 0 {
		return nil, fmt.Errorf("reading catalog %s: the object holds no catalogs; want a tools array or {catalog id: [tools]}", path)
	}
	for id, tools := range defs {
		switch {
		case len(tools) > 0:
		case id == "" && len(defs) == 1:
			return nil, fmt.Errorf("reading catalog %s: the tools array is empty", path)
		default:
			return nil, fmt.Errorf("reading catalog %s: catalog %q has no tools", path, id)
		}
	}
	return defs, nil
}

// readDemoCatalog reads demo's --catalog: a tools array, or a catalog file
// of one catalog, which the demo replays over; both are checked as eval's
// are (a duplicate name would pass every task through unsearched, and the
// table would compare nothing). It returns the tools array.
func readDemoCatalog(path string) ([]byte, error) {
	defs, err := readCatalog(path)
	if err != nil {
		return nil, err
	}
	if len(defs) > 1 {
		return nil, fmt.Errorf("catalog %s holds %d catalogs (%s); the demo replays over one: give it a tools array or a file of one catalog",
			path, len(defs), eval.CatalogIDs(defs))
	}
	var tools []byte
	for _, only := range defs {
		tools = eval.ToolsArray(only)
	}
	return tools, nil
}

// readTasks reads demo's --tasks, a JSON array of scripted tasks, and
// returns its bytes once they decode as tasks.
func readTasks(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading tasks: %w", err)
	}
	if err := syntaxError(path, data); err != nil {
		return nil, fmt.Errorf("reading tasks %w", err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
		return nil, fmt.Errorf("reading tasks %s: want a JSON array of tasks ({name, prompt, steps: [{tool, query, args}], answer})", path)
	}
	var tasks []fakellm.Task
	if err := json.Unmarshal(data, &tasks); err != nil {
		return nil, fmt.Errorf("reading tasks %w", jsonAt(path, data, err))
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("reading tasks %s: the array holds no tasks", path)
	}
	// The scripted model finds a task by its prompt, so a task without one
	// can only be answered as unknown: a tools array given as --tasks ran
	// as that many empty tasks.
	for i, t := range tasks {
		if strings.TrimSpace(t.Prompt) == "" {
			return nil, fmt.Errorf("reading tasks %s: task %d (%q) has no prompt; want {name, prompt, steps: [{tool, query, args}], answer}", path, i+1, t.Name)
		}
	}
	return data, nil
}

// syntaxError returns nil when data, read from path, is JSON, and an error
// naming the file otherwise: as FILE:LINE:COL where the decoder says where.
func syntaxError(path string, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("%s: the file is empty", path)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return jsonAt(path, data, err)
	}
	return nil
}

// jsonAt prefixes err, from decoding path's data, with FILE:LINE:COL when the
// error carries an offset, and with FILE otherwise.
func jsonAt(path string, data []byte, err error) error {
	off := int64(-1)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset
	case errors.As(err, &typ):
		off = typ.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return fmt.Errorf("%s: %w", path, err)
	}
	before := data[:off]
	line := 1 + bytes.Count(before, []byte("\n"))
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("%s:%d:%d: %w", path, line, col, err)
}
