package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a policy file, located where a user can
// jump to it. Line and Col are 1-based; 0 means the problem concerns the file
// as a whole (it cannot be read, say).
type Problem struct {
	File string
	Line int
	Col  int
	Msg  string
}

// String formats the problem as FILE:LINE:COL: message, the shape editors and
// CI logs link to.
func (p Problem) String() string {
	if p.Line <= 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Msg)
}

// Errors is every problem Load found in one policy; it is the error Load
// returns, so callers reach it with errors.As. It never holds zero problems.
type Errors struct {
	Problems []Problem
}

// Error prints one FILE:LINE:COL: message per line, in file order.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects Problems while a file is decoded and validated.
type problems struct {
	file string
	list []Problem
}

func (ps *problems) add(pos Pos, format string, args ...any) {
	ps.list = append(ps.list, Problem{File: ps.file, Line: pos.Line, Col: pos.Col, Msg: fmt.Sprintf(format, args...)})
}

// err returns nil when nothing was found, else an *Errors sorted by
// position so the output reads top to bottom.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := slices.Clone(ps.list)
	slices.SortStableFunc(list, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	list = slices.Compact(list)
	return &Errors{Problems: list}
}

// Pos is a 1-based line and column in a policy file.
type Pos struct {
	Line, Col int
}
