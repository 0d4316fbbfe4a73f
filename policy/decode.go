package policy

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// decoder walks the YAML syntax tree into a Document so that every unknown
// key and every wrongly typed value is reported with its own position, not
// only the first. Scalars and their type errors are decoded by go-yaml
// (strict); the walk only steers it field by field and remembers where each
// value was written, so validation can point at it.
type decoder struct {
	probs   *problems
	anchors map[string]ast.Node
	// pos maps a value's path ("gateway.mode", "deny[2]", "tools.x.risk")
	// to where it was written. A path is present only if the file set it.
	pos map[string]Pos
	// nodes maps a list item's path to its node, so profiles can be
	// decoded a second time onto the base document.
	nodes map[string]ast.Node
}

// parseFile parses src and returns the body of its only document, nil for
// a file without one (empty, or only comments).
func parseFile(src []byte, probs *problems) (ast.Node, map[string]ast.Node, bool) {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		var ye yaml.Error
		if errors.As(err, &ye) {
			probs.add(tokenPos(ye), "%s", ye.GetMessage())
		} else {
			probs.add(Pos{}, "parsing YAML: %v", err)
		}
		return nil, nil, false
	}
	var body ast.Node
	n := 0
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if _, isComment := d.Body.(*ast.CommentGroupNode); isComment {
			continue
		}
		n++
		if n == 1 {
			body = d.Body
			continue
		}
		probs.add(nodePos(d.Body), "only one YAML document is allowed; remove this one or the '---' before it")
	}
	anchors := map[string]ast.Node{}
	if body != nil {
		ast.Walk(anchorCollector(anchors), body)
	}
	return body, anchors, n <= 1
}

type anchorCollector map[string]ast.Node

func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

func tokenPos(ye yaml.Error) Pos {
	if tk := ye.GetToken(); tk != nil && tk.Position != nil {
		return Pos{Line: tk.Position.Line, Col: tk.Position.Column}
	}
	return Pos{}
}

func nodePos(n ast.Node) Pos {
	if n == nil {
		return Pos{}
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return Pos{Line: tk.Position.Line, Col: tk.Position.Column}
	}
	return Pos{}
}

// resolve strips anchors, tags and aliases so the walk sees the value.
func (d *decoder) resolve(n ast.Node) ast.Node {
	for range 32 { // bounds alias chains, including cyclic ones
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			target, ok := d.anchors[v.Value.GetToken().Value]
			if !ok {
				d.probs.add(nodePos(v), "unknown alias %q", v.Value.GetToken().Value)
				return nil
			}
			n = target
		default:
			return n
		}
	}
	return n
}

// pairs returns the key/value pairs of a mapping node, or ok=false after
// reporting that the node is not a mapping.
// entry is one key of a mapping, once, with its node.
type entry struct {
	key string
	kv  *ast.MappingValueNode
}

// entries returns a mapping's keys in order, reporting (and skipping) merge
// keys and duplicates, so structs and maps apply the same rules.
func (d *decoder) entries(n ast.Node, path string) ([]entry, bool) {
	var pairs []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		pairs = m.Values
	case *ast.MappingValueNode:
		pairs = []*ast.MappingValueNode{m}
	default:
		d.probs.add(nodePos(n), "%s must be a mapping (key: value), not %s", describe(path), kindOf(n))
		return nil, false
	}
	out := make([]entry, 0, len(pairs))
	seen := map[string]bool{}
	for _, kv := range pairs {
		if kv.Key.IsMergeKey() {
			d.probs.add(nodePos(kv.Key), "merge keys (<<) are not supported; write the keys out")
			continue
		}
		key := keyString(kv.Key)
		if seen[key] {
			d.probs.add(nodePos(kv.Key), "duplicate key %q in %s", key, describe(path))
			continue
		}
		seen[key] = true
		out = append(out, entry{key, kv})
	}
	return out, true
}

func keyString(k ast.MapKeyNode) string {
	var n ast.Node = k
	if mk, ok := n.(*ast.MappingKeyNode); ok {
		n = mk.Value
	}
	if s, ok := n.(*ast.StringNode); ok {
		return s.Value
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return n.String()
}

// decode sets dst (addressable) from n. Struct fields and map entries not
// in n keep their current values, which is how defaults and profile
// overrides layer.
func (d *decoder) decode(n ast.Node, dst reflect.Value, path string) {
	n = d.resolve(n)
	if n == nil {
		return
	}
	if path != "" {
		d.pos[path] = nodePos(n)
	}
	if _, isNull := n.(*ast.NullNode); isNull {
		return // "key:" with nothing after it keeps the default
	}
	switch dst.Kind() {
	case reflect.Struct:
		if dst.Type().PkgPath() == "time" {
			d.leaf(n, dst, path)
			return
		}
		d.decodeStruct(n, dst, path)
	case reflect.Map:
		d.decodeMap(n, dst, path)
	case reflect.Slice:
		d.decodeSlice(n, dst, path)
	default:
		d.leaf(n, dst, path)
	}
}

func (d *decoder) decodeStruct(n ast.Node, dst reflect.Value, path string) {
	entries, ok := d.entries(n, path)
	if !ok {
		return
	}
	fields := yamlFields(dst.Type())
	for _, e := range entries {
		idx, ok := fields[e.key]
		if !ok {
			d.probs.add(nodePos(e.kv.Key), "unknown key %q in %s (known keys: %s)", e.key, describe(path), knownKeys(fields))
			continue
		}
		d.decode(e.kv.Value, dst.FieldByIndex(idx), join(path, e.key))
	}
}

func (d *decoder) decodeMap(n ast.Node, dst reflect.Value, path string) {
	entries, ok := d.entries(n, path)
	if !ok {
		return
	}
	if dst.IsNil() {
		dst.Set(reflect.MakeMap(dst.Type()))
	}
	folds := foldsKeys(dst.Type())
	var spelled map[string]string // a folded key -> the key as the map holds it
	var written map[string]entry  // a folded key -> its entry in this mapping
	if folds {
		spelled, written = make(map[string]string, dst.Len()), make(map[string]entry, len(entries))
		for _, k := range dst.MapKeys() {
			spelled[strings.ToLower(k.String())] = k.String()
		}
	}
	for _, e := range entries {
		key, kv := e.key, e.kv
		if key == "" {
			d.probs.add(nodePos(kv.Key), "empty key in %s", describe(path))
			continue
		}
		stored := key
		if folds {
			lower := strings.ToLower(key)
			if first, dup := written[lower]; dup {
				d.probs.add(nodePos(kv.Key), "%s key %q differs from %q (line %d) only in case, and tools keys match names case-insensitively; merge the two",
					describe(path), key, first.key, nodePos(first.kv.Key).Line)
				continue
			}
			written[lower] = e
			// A profile's key spelled otherwise than the base's names the
			// same tools: it merges onto the base's entry and replaces it.
			if s, ok := spelled[lower]; ok {
				stored = s
			}
		}
		// Decode onto a copy of the existing entry so a profile's
		// tools.x.hint keeps the base's tools.x.keywords.
		elem := reflect.New(dst.Type().Elem()).Elem()
		if old := dst.MapIndex(reflect.ValueOf(stored)); old.IsValid() {
			elem.Set(cloneValue(old))
			dst.SetMapIndex(reflect.ValueOf(stored), reflect.Value{})
		}
		p := join(path, key)
		d.pos[p+keySuffix] = nodePos(kv.Key)
		d.decode(kv.Value, elem, p)
		dst.SetMapIndex(reflect.ValueOf(key), elem)
	}
}

// foldsKeys reports whether a map of type t is keyed case-insensitively:
// tools.<name>, whose keys match tool names as globs do. Two keys of one
// mapping that differ only in case are refused, and a profile's key merges
// onto the base's entry however either spells it.
func foldsKeys(t reflect.Type) bool { return t == reflect.TypeFor[map[string]ToolSpec]() }

func (d *decoder) decodeSlice(n ast.Node, dst reflect.Value, path string) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.probs.add(nodePos(n), "%s must be a list, not %s", describe(path), kindOf(n))
		return
	}
	out := reflect.MakeSlice(dst.Type(), len(seq.Values), len(seq.Values))
	for i, v := range seq.Values {
		p := path + "[" + strconv.Itoa(i) + "]"
		if d.nodes != nil {
			d.nodes[p] = v
		}
		d.decode(v, out.Index(i), p)
	}
	dst.Set(out) // a list replaces, never appends to, the list it overrides
}

// leaf decodes a scalar with go-yaml's strict decoder.
func (d *decoder) leaf(n ast.Node, dst reflect.Value, path string) {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode, *ast.SequenceNode:
		d.probs.add(nodePos(n), "%s must be a single value, not %s", describe(path), kindOf(n))
		return
	}
	if isInteger(dst.Type()) && !wholeNumber(n) {
		d.probs.add(nodePos(n), "%s: want a whole number, got %s", describe(path), n.GetToken().Value)
		return
	}
	tmp := reflect.New(dst.Type())
	if err := yaml.NodeToValue(n, tmp.Interface(), yaml.Strict()); err != nil {
		d.probs.add(nodePos(n), "%s: %s", describe(path), typeError(dst.Type(), n, err))
		return
	}
	dst.Set(tmp.Elem())
}

// keySuffix marks, in the decoder's positions, where a map key itself is
// written, apart from its value: "tools.x#key". It never reaches a message.
const keySuffix = "#key"

// typeError says what a scalar of type t should have been written as. A
// duration or a bool gets words of its own: go-yaml's "cannot unmarshal
// uint64 into Go value of type time.Duration" tells no one to write 10s,
// and one that reads "yes" as a string does not say that YAML 1.2 has only
// true and false.
func typeError(t reflect.Type, n ast.Node, err error) string {
	got := strings.TrimSpace(n.String())
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return fmt.Sprintf("want a duration such as \"10s\" (a number and a unit: ms, s, m or h), got %s", got)
	case t.Kind() == reflect.Bool:
		return fmt.Sprintf("want true or false (YAML 1.2: yes, no, on and off are not booleans), got %s", got)
	}
	var ye yaml.Error
	if errors.As(err, &ye) {
		return ye.GetMessage()
	}
	return err.Error()
}

// isInteger reports whether t is an integer setting; durations are int64
// too, but go-yaml reads them from strings such as 10s.
func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t.PkgPath() != "time"
	}
	return false
}

// wholeNumber reports whether a scalar bound for an integer setting is
// free of a fraction. go-yaml converts a float, or a string that parses as
// one, to an integer by truncating it (20.9 becomes 20, -.inf the smallest
// int64); 20.0 and 1e6 are whole and stay accepted. Anything else is left to
// go-yaml's own type errors.
func wholeNumber(n ast.Node) bool {
	var v any
	if err := yaml.NodeToValue(n, &v); err != nil {
		return true
	}
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case string:
		parsed, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return true
		}
		f = parsed
	default:
		return true
	}
	return !math.IsInf(f, 0) && f == math.Trunc(f)
}

// yamlFields maps yaml key -> field index, flattening ",inline" fields.
func yamlFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			for k, idx := range yamlFields(f.Type) {
				if _, shadowed := out[k]; !shadowed {
					out[k] = append([]int{i}, idx...)
				}
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		out[name] = []int{i}
	}
	return out
}

func knownKeys(fields map[string][]int) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

func kindOf(n ast.Node) string {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.NullNode:
		return "null"
	}
	return fmt.Sprintf("the value %s", strings.TrimSpace(n.String()))
}

// cloneValue deep-copies maps and slices so decoding a profile onto the
// base never writes through into the base.
func cloneValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			out.SetMapIndex(it.Key(), cloneValue(it.Value()))
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(cloneValue(v.Index(i)))
		}
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(cloneValue(v.Field(i)))
			}
		}
		return out
	}
	return v
}
