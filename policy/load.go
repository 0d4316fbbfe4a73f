package policy

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/goccy/go-yaml/ast"
)

// Load reads, decodes, validates and compiles the policy file at path. An
// empty path means no file: Load returns Default(). On failure the error is
// an *Errors listing every problem found as FILE:LINE:COL: message; Load
// never returns a partially applied policy. A file that sets nothing (empty,
// or only comments) or is larger than 1 MiB is a problem too; {} asks for
// the defaults. It does not watch the file (Live does).
func Load(path string) (*Snapshot, error) {
	return load(path, newGeneration())
}

// newGeneration returns a fresh base generation: random, so independent
// loads never collide without package state, with the top bit set so it is
// never Default's 0, and the low bits free for profile indexes.
func newGeneration() uint64 {
	return (rand.Uint64() | 1<<63) &^ maxProfiles
}

// maxPolicyBytes bounds the policy file: go-yaml takes about 240 times a
// file's size in memory to decode it, and 1 MiB is generous for a policy
// people write by hand.
const maxPolicyBytes = 1 << 20

func load(path string, gen uint64) (*Snapshot, error) {
	snap, _, err := loadSource(path, gen)
	return snap, err
}

// loadSource is load that also returns the bytes it parsed, so Live can
// tell a reload of unchanged content from a change.
func loadSource(path string, gen uint64) (*Snapshot, []byte, error) {
	if path == "" {
		return Default(), nil, nil
	}
	src, err := readPolicy(path)
	if err != nil {
		return nil, nil, &Errors{Problems: []Problem{{File: path, Msg: err.Error()}}}
	}
	snap, err := parse(path, src, gen)
	if err != nil {
		return nil, nil, err
	}
	return snap, src, nil
}

// readPolicy reads path, refusing it past maxPolicyBytes and refusing
// anything but a regular file (openRegular). It reads through a limit
// rather than trusting the size a stat gave, so a file that grows costs no
// more than a file at the limit.
func readPolicy(path string) ([]byte, error) {
	src, err := readCapped(path, maxPolicyBytes)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", errNoPath(err))
	}
	if len(src) > maxPolicyBytes {
		return nil, fmt.Errorf("the policy file is over %d MiB; at most %d bytes are allowed", maxPolicyBytes>>20, maxPolicyBytes)
	}
	return src, nil
}

// readCapped reads path, opened with openRegular, through a limit one
// byte past limit: a longer file reads as limit+1 bytes, for the caller
// to refuse, and a file that grows after a stat costs no more.
func readCapped(path string, limit int) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)+1))
}

// openRegular opens path for reading if, symlinks followed, it is a
// regular file. Anything else is refused before it is opened: opening a
// FIFO blocks until a writer comes, which would hang the reloader for good
// (a good file restored and SIGHUP would queue behind it), and a
// directory or a device is no policy. The open does not block either
// (O_NONBLOCK, which reads of a regular file ignore), and the open file is
// checked again, so a FIFO renamed over the path after the stat is refused
// too.
func openRegular(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close() // read-only; nothing to flush
		if err != nil {
			return nil, err
		}
		return nil, notRegular(fi.Mode())
	}
	return f, nil
}

// notRegular says what a file that is not a regular file is.
func notRegular(m fs.FileMode) error {
	kind := "a special file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	}
	return fmt.Errorf("it is %s, not a regular file", kind)
}

// utf8BOM is the byte-order mark some Windows editors put before UTF-8
// text. YAML allows it; go-yaml reads it as part of the first key.
var utf8BOM = []byte("\xef\xbb\xbf")

// parse is Load after the file is read; the fuzz target drives it directly.
func parse(path string, src []byte, gen uint64) (*Snapshot, error) {
	src = bytes.TrimPrefix(src, utf8BOM) // columns of line 1 then count as an editor shows them
	probs := &problems{file: path}
	body, anchors, ok := parseFile(src, probs)
	if !ok || len(probs.list) > 0 {
		return nil, probs.err()
	}
	// A file that sets nothing is refused rather than read as the
	// defaults: it is what a truncated or half-written save looks like,
	// and the hot reload would otherwise drop every deny rule with it.
	if _, null := body.(*ast.NullNode); body == nil || null {
		msg := "the policy file is empty; write {} for the built-in defaults"
		if len(bytes.TrimSpace(src)) > 0 {
			msg = "the policy file is empty (it sets nothing); write {} for the built-in defaults"
		}
		probs.add(Pos{}, "%s", msg)
		return nil, probs.err()
	}
	d := &decoder{probs: probs, anchors: anchors, pos: map[string]Pos{}, nodes: map[string]ast.Node{}}
	doc := defaultDocument()
	d.decode(body, reflect.ValueOf(&doc).Elem(), "")
	elementDefaults(&doc, d.pos, "")
	dir := filepath.Dir(path)
	v := &validator{probs: probs, pos: d.pos, dir: dir, hints: map[string]string{}}
	baseBundles := map[string]bool{}
	for name := range doc.Bundles {
		baseBundles[name] = true
	}
	v.document(&doc, "", baseBundles)
	for i := range doc.Profiles {
		names := maps(baseBundles, doc.Profiles[i].Bundles)
		v.profile(i, &doc.Profiles[i], names)
		// A null item (a stray "-", or ~) decodes to an empty match, which
		// matches every request and shadows every later profile while
		// looking like nothing at all. {} says that on purpose.
		path := "profiles[" + strconv.Itoa(i) + "]"
		if isNull(d.nodes[path], anchors) {
			probs.add(d.pos[path], "%s is empty (a stray '-' or null), which would match every request and shadow the profiles after it; remove it, or write {} for a profile that matches every request", path)
		}
	}
	if err := probs.err(); err != nil {
		return nil, err
	}

	profiles := doc.Profiles
	doc.Profiles = nil
	env := compileEnv{source: path, dir: dir, gen: gen, hints: v.hints}
	snap, err := compile(doc, env)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", path, err)
	}
	for p := range d.pos {
		if strings.HasPrefix(p, "gateway.") {
			if snap.written == nil {
				snap.written = map[string]bool{}
			}
			snap.written[p] = true
		}
	}
	for i, ps := range profiles {
		eff, err := overlayProfile(doc, d, i, anchors)
		if err != nil {
			return nil, fmt.Errorf("applying profiles[%d] of %s: %w", i, path, err)
		}
		penv := env
		penv.gen = gen | uint64(i+1)
		penv.profile = ps.Name
		if penv.profile == "" {
			penv.profile = "profiles[" + strconv.Itoa(i) + "]"
		}
		psnap, err := compile(eff, penv)
		if err != nil {
			return nil, fmt.Errorf("compiling profiles[%d] of %s: %w", i, path, err)
		}
		snap.profiles = append(snap.profiles, profileRule{
			name:   penv.profile,
			key:    optionalGlob(ps.Match.Key),
			model:  optionalGlob(ps.Match.Model),
			header: headerGlobs(ps.Match.Header),
			snap:   psnap,
		})
	}
	return snap, nil
}

// overlayProfile decodes profiles[i] again, this time onto a copy of the
// base document, so that settings merge field by field and maps by key. Its
// problems were reported by the first pass; this pass discards them.
func overlayProfile(base Document, first *decoder, i int, anchors map[string]ast.Node) (Document, error) {
	node, ok := first.nodes["profiles["+strconv.Itoa(i)+"]"]
	if !ok {
		return Document{}, fmt.Errorf("profile node not found")
	}
	ps := ProfileSpec{Document: cloneValue(reflect.ValueOf(base)).Interface().(Document)}
	d := &decoder{probs: &problems{}, anchors: anchors, pos: map[string]Pos{}}
	d.decode(node, reflect.ValueOf(&ps).Elem(), "")
	eff := ps.Document
	elementDefaults(&eff, d.pos, "")
	// A category's hints and text are one setting written two ways: the
	// one the profile writes replaces the base's, however the base wrote
	// it. Merged field by field, both stayed set and the base's text won
	// over the profile's file.
	for name, c := range eff.Categories {
		_, hints := d.pos[join("categories", name)+".hints"]
		_, text := d.pos[join("categories", name)+".text"]
		switch {
		case hints && !text:
			c.Text = ""
		case text && !hints:
			c.Hints = ""
		default:
			continue
		}
		eff.Categories[name] = c
	}
	// deny only grows: a profile must not be able to expose what the base
	// policy forbids.
	if _, set := d.pos["deny"]; set {
		eff.Deny = append(slices.Clone(base.Deny), eff.Deny...)
	}
	eff.Profiles = nil
	return eff, nil
}

// isNull reports whether n, its anchors and aliases followed, is a YAML
// null. An unknown alias is not one; the decode reported it.
func isNull(n ast.Node, anchors map[string]ast.Node) bool {
	quiet := &decoder{probs: &problems{}, anchors: anchors}
	_, null := quiet.resolve(n).(*ast.NullNode)
	return null
}

func maps(a map[string]bool, b map[string]BundleSpec) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// elementDefaults fills defaults inside the list items this decode wrote,
// which start from zero values because a list replaces the list it
// overrides. Items it did not write are left alone: a profile that does not
// set anchors holds the base's, boosts already filled, and resetting them
// to 1 changed its ranking and gave it a catalog key of its own.
func elementDefaults(doc *Document, pos map[string]Pos, prefix string) {
	for i := range doc.Anchors {
		item := fmt.Sprintf("%s[%d]", join(prefix, "anchors"), i)
		if _, written := pos[item]; !written {
			continue
		}
		if _, set := pos[item+".boost"]; !set {
			doc.Anchors[i].Boost = 1
		}
	}
	for i := range doc.Profiles {
		elementDefaults(&doc.Profiles[i].Document, pos, "profiles["+strconv.Itoa(i)+"]")
	}
}
