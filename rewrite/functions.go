package rewrite

import (
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// KeepFunctions returns a Chat Completions body whose legacy functions
// array holds only the functions keep accepts, in order, each as the
// client wrote it; when it accepts none, the body goes without functions
// and function_call, as Build sends a body without tools. A body whose
// functions keep all accepts (or that has none) is returned as it is.
// It expects valid JSON; it does not validate.
func KeepFunctions(body []byte, keep func(name string) bool) ([]byte, error) {
	fns := gjson.GetBytes(body, pathFunctions)
	if !fns.IsArray() {
		return body, nil
	}
	var kept []byte
	all := true
	fns.ForEach(func(_, f gjson.Result) bool {
		if !keep(f.Get("name").String()) {
			all = false
			return true
		}
		if len(kept) > 0 {
			kept = append(kept, ',')
		}
		kept = append(kept, f.Raw...)
		return true
	})
	if all {
		return body, nil
	}
	var err error
	if len(kept) == 0 {
		for _, p := range [...]string{pathFunctions, pathFunctionCall} {
			if body, err = sjson.DeleteBytes(body, p); err != nil {
				return nil, fmt.Errorf("removing %s: %w", p, err)
			}
		}
		return body, nil
	}
	list := append(append([]byte{'['}, kept...), ']')
	if body, err = sjson.SetRawBytes(body, pathFunctions, list); err != nil {
		return nil, fmt.Errorf("setting functions: %w", err)
	}
	return body, nil
}
