package policy

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/session"
)

// maxProfiles bounds profiles; the low bits of a generation number index them.
const maxProfiles = 1023

// maxHintBytes bounds one hints file: its text goes into model context.
const maxHintBytes = 256 << 10

// validator checks a decoded Document. It checks only values the file set
// (their paths are in pos): defaults are valid by construction, and a
// profile's zero values mean "not overridden", not "zero".
type validator struct {
	probs *problems
	pos   map[string]Pos
	dir   string            // the config file's directory; hints are relative to it
	hints map[string]string // resolved hints path -> text, filled as files are read
}

// at returns where path was written, and whether it was written at all.
func (v *validator) at(path string) (Pos, bool) {
	p, ok := v.pos[path]
	return p, ok
}

func (v *validator) check(path string, ok bool, format string, args ...any) {
	if ok {
		return
	}
	if p, set := v.at(path); set {
		v.probs.add(p, "%s: %s", path, fmt.Sprintf(format, args...))
	}
}

// checkKey is check for a problem of a map key itself (a glob, a bundle
// name): it is reported where the key is written, under the key's path.
func (v *validator) checkKey(path string, ok bool, format string, args ...any) {
	if ok {
		return
	}
	if p, set := v.at(path + keySuffix); set {
		v.probs.add(p, "%s: %s", path, fmt.Sprintf(format, args...))
	}
}

// document validates doc written under prefix ("" or "profiles[3]").
// bundles are the bundle names visible to it, for pin.
func (v *validator) document(doc *Document, prefix string, bundles map[string]bool) {
	p := func(s string) string { return join(prefix, s) }
	g := doc.Gateway
	if err := CheckListen(g.Listen); err != nil {
		v.check(p("gateway.listen"), false, "want host:port such as 127.0.0.1:8080 (%v)", err)
	}
	v.httpURL(p("gateway.upstream"), g.Upstream)
	// An unset variable expands to "", which means "pass the client's key
	// through": every client's own key would go upstream while validate
	// said ok. An empty key is written as "".
	if name, ok := envName(g.UpstreamKey); ok && os.Getenv(name) == "" {
		v.check(p("gateway.upstream_key"), false, "environment variable %s is not set (or empty); write \"\" to pass clients' keys through", name)
	}
	v.check(p("gateway.mode"), validMode(g.Mode), "unknown mode %q; want search, preselect, hybrid or passthrough", g.Mode)
	v.check(p("gateway.min_tools"), g.MinTools >= 0, "must be >= 0")
	v.check(p("gateway.max_rounds"), g.MaxRounds >= 1 && g.MaxRounds <= 32, "must be between 1 and 32")
	v.check(p("gateway.max_active"), g.MaxActive >= 1, "must be >= 1")
	v.check(p("gateway.preselect"), g.Preselect >= 0, "must be >= 0")
	v.check(p("gateway.follow_up"), g.FollowUp >= 0, "must be >= 0")
	v.check(p("gateway.search_round"), g.SearchRound == SearchRoundFound || g.SearchRound == SearchRoundAll,
		"unknown search round %q; want found or all", g.SearchRound)
	v.check(p("gateway.usage"), g.Usage == UsageSummed || g.Usage == UsageContext,
		"unknown usage %q; want summed or context", g.Usage)
	v.check(p("gateway.passthrough_history_tokens"), g.PassthroughHistoryTokens >= 0, "must be >= 0 (0: never)")
	v.check(p("gateway.body_limit"), g.BodyLimit > 0, "must be > 0 bytes")
	v.check(p("gateway.retries"), g.Retries >= 0 && g.Retries <= 10, "must be between 0 and 10")
	for name, d := range map[string]time.Duration{
		"connect": g.Timeouts.Connect, "first_byte": g.Timeouts.FirstByte,
		"idle": g.Timeouts.Idle, "request": g.Timeouts.Request,
	} {
		v.check(p("gateway.timeouts."+name), d > 0, "must be a positive duration such as 30s")
	}

	s := doc.Search
	v.check(p("search.limit"), s.Limit >= 1 && s.Limit <= 50, "must be between 1 and 50")
	w := s.Weights
	for name, x := range map[string]float64{
		"lexical": w.Lexical, "semantic": w.Semantic, "focus": w.Focus, "transition": w.Transition,
		"recency": w.Recency, "anchor": w.Anchor, "avoid": w.Avoid, "related": w.Related,
		"decompose": w.Decompose, "done": w.Done, "doc_neighbours": w.DocNeighbours,
		"habit": w.Habit,
	} {
		v.check(p("search.weights."+name), x >= 0 && !math.IsInf(x, 0) && !math.IsNaN(x), "must be a number >= 0")
	}
	v.check(p("search.weights.done"), w.Done <= 1, "must be between 0 and 1")
	e := s.Embeddings
	v.check(p("search.embeddings.provider"), e.Provider == "offline" || e.Provider == "openai" || e.Provider == "off",
		"unknown provider %q; want offline, openai or off", e.Provider)
	if e.URL != "" {
		v.httpURL(p("search.embeddings.url"), e.URL)
	}
	// A minute is already a request stalled on a ranking signal it can do
	// without (the word vectors rank meanwhile).
	v.check(p("search.embeddings.query_timeout"), e.QueryTimeout > 0 && e.QueryTimeout <= time.Minute,
		"must be a duration above 0 and at most 1m, such as 2s")
	// The bound is in MiB: a value this large is bytes written by mistake,
	// which would leave the cache unbounded in practice.
	v.check(p("search.embeddings.cache_max_mb"), e.CacheMaxMB <= maxCacheMB,
		"must be at most %d (1 TiB); the value is in MiB", maxCacheMB)
	// An unset variable would send embeddings requests without a key,
	// every one refused, while validate said ok.
	if name, ok := envName(e.Key); ok && e.Provider == "openai" && os.Getenv(name) == "" {
		v.check(p("search.embeddings.key"), false, "environment variable %s is not set (or empty)", name)
	}

	ss := doc.Sessions
	// The memory store sweeps expired sessions every ttl/100, which must
	// be a positive interval: 50ns passed here and panicked serve.
	v.check(p("sessions.ttl"), ss.TTL >= time.Second, "must be a duration of at least 1s, such as 1h")
	v.check(p("sessions.max_entries"), ss.MaxEntries >= 1, "must be >= 1")
	if err := validStore(ss.Store); err != nil {
		v.check(p("sessions.store"), false, "%v", err)
	}

	v.globList(p("core"), doc.Core)
	v.globList(p("deny"), doc.Deny)
	v.globList(p("allow"), doc.Allow)
	for i, name := range doc.Pin {
		v.check(fmt.Sprintf("%s[%d]", p("pin"), i), bundles[name], "no bundle named %q", name)
	}

	r := doc.Risk
	v.check(p("risk.gate"), r.Gate == riskOff || r.Gate == RiskModerate || r.Gate == RiskDestructive,
		"unknown gate %q; want off, moderate or destructive", r.Gate)
	v.regex(p("risk.write_intent"), r.WriteIntent, true)
	v.regex(p("risk.destructive_names"), r.DestructiveNames, false)

	for name, b := range doc.Bundles {
		bp := join(p("bundles"), name)
		v.checkKey(bp, strings.IndexFunc(name, func(r rune) bool { return !QueryWordRune(r) }) < 0,
			"bundle name %q is not one word (letters, digits, _ and -), and a search finds a bundle by a word of its query", name)
		v.globList(bp+".tools", b.Tools)
		if len(b.Tools) == 0 {
			v.checkKey(bp, false, "bundle %q has no tools", name)
		}
	}
	for name, t := range doc.Tools {
		tp := join(p("tools"), name)
		if isGlob(name) {
			if _, err := compileGlob(name); err != nil {
				v.checkKey(tp, false, "%v", err)
			}
		}
		v.check(tp+".risk", t.Risk == "" || riskLevel(t.Risk) > 0,
			"unknown risk %q; want safe, moderate or destructive", t.Risk)
	}
	for i, a := range doc.Anchors {
		ap := fmt.Sprintf("%s[%d]", p("anchors"), i)
		if _, set := v.at(ap + ".pattern"); !set {
			v.check(ap, false, "anchor needs a pattern")
		}
		v.regex(ap+".pattern", a.Pattern, true)
		v.globList(ap+".tools", a.Tools)
		if len(a.Tools) == 0 {
			v.check(ap, false, "anchor needs tools")
		}
		v.check(ap+".boost", !math.IsInf(a.Boost, 0) && !math.IsNaN(a.Boost), "must be a finite number")
	}
	for from, next := range doc.Transitions {
		for to, prob := range next {
			v.check(join(join(p("transitions"), from), to), prob >= 0 && prob <= 1, "probability %v must be between 0 and 1", prob)
		}
	}
	for name, c := range doc.Categories {
		cp := join(p("categories"), name)
		if c.Hints != "" && c.Text != "" {
			v.check(cp+".text", false, "set hints (a file) or text, not both")
			continue
		}
		if c.Hints != "" {
			v.hintsFile(cp+".hints", c.Hints)
		}
	}
}

// maxCacheMB is the largest search.embeddings.cache_max_mb accepted.
const maxCacheMB = 1 << 20

// profile validates profiles[i] as decoded on its own (zero values mean not
// overridden); bundles are the names of the base and the profile's bundles.
func (v *validator) profile(i int, ps *ProfileSpec, bundles map[string]bool) {
	prefix := "profiles[" + strconv.Itoa(i) + "]"
	if i >= maxProfiles {
		v.check(prefix, false, "at most %d profiles are supported", maxProfiles)
	}
	v.check(prefix+".gateway.listen", false, "cannot be set per profile: the gateway listens once")
	v.check(prefix+".sessions", false, "cannot be set per profile: the session store is shared")
	// Settings read once, or before a request's profile is known: a
	// profile setting them would be silently ignored, and a per-model
	// upstream or key that is not used is a misrouted request.
	for _, s := range []struct{ path, why string }{
		{"gateway.upstream", "the upstream URL is read at start-up"},
		{"gateway.upstream_key", "the upstream key is the base policy's"},
		{"gateway.body_limit", "the body is read before a profile is chosen"},
		{"gateway.timeouts.connect", "the upstream transport is built at start-up"},
		{"gateway.timeouts.first_byte", "the upstream transport is built at start-up"},
		{"search.embeddings.url", "the embeddings client is built at start-up"},
		{"search.embeddings.model", "the embeddings client is built at start-up"},
		{"search.embeddings.key", "the embeddings client is built at start-up"},
		{"search.embeddings.cache_dir", "the embeddings client is built at start-up"},
		{"search.embeddings.cache_max_mb", "the embeddings client is built at start-up"},
		{"search.embeddings.query_timeout", "the embeddings client is built at start-up"},
	} {
		v.check(prefix+"."+s.path, false, "cannot be set per profile: %s", s.why)
	}
	v.check(prefix+".profiles", false, "profiles cannot nest")
	for _, k := range []string{"key", "model"} {
		val := ps.Match.Key
		if k == "model" {
			val = ps.Match.Model
		}
		if _, err := compileGlob(val); err != nil && val != "" {
			v.check(prefix+".match."+k, false, "%v", err)
		}
	}
	for h, val := range ps.Match.Header {
		if _, err := compileGlob(val); err != nil {
			v.check(prefix+".match.header."+h, false, "%v", err)
		}
	}
	v.document(&ps.Document, prefix, bundles)
}

// CheckListen returns why net.Listen would refuse addr as a TCP address
// (no port, a port out of range or an unknown service name), or nil. serve
// checks the address it will listen on with it and validation checks the
// policy's, so a file validate passes is never one serve refuses at start.
func CheckListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	return err
}

// httpURL checks an http(s) URL. Its errors print the URL through
// RedactURL, never as written: they are printed by validate, and so land
// in CI logs.
func (v *validator) httpURL(path, s string) {
	u, err := url.Parse(s)
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		v.check(path, false, "not a URL: %v", ue.Err) // ue.URL is the text as written
	case err != nil:
		v.check(path, false, "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		v.check(path, false, "want an http:// or https:// URL, got %q", RedactURL(s))
	case u.Host == "":
		v.check(path, false, "URL %q has no host", RedactURL(s))
	}
}

func (v *validator) globList(path string, list []string) {
	for i, s := range list {
		if _, err := compileGlob(s); err != nil {
			v.check(fmt.Sprintf("%s[%d]", path, i), false, "%v", err)
		}
	}
}

func (v *validator) regex(path, s string, required bool) {
	if s == "" {
		v.check(path, !required, "must not be empty")
		return
	}
	if _, err := regexp.Compile(s); err != nil {
		v.check(path, false, "bad regular expression: %v", err)
	}
}

// hintsFile reads a category's hints file now, so a missing file fails the
// load instead of a search later.
func (v *validator) hintsFile(path, file string) {
	full := resolvePath(v.dir, file)
	if _, done := v.hints[full]; done {
		return
	}
	fi, err := os.Stat(full)
	if err != nil {
		v.check(path, false, "hints file %s: %v", file, errNoPath(err))
		return
	}
	if !fi.Mode().IsRegular() {
		v.check(path, false, "hints file %s is not a regular file", file)
		return
	}
	if fi.Size() > maxHintBytes {
		v.check(path, false, "hints file %s is %d bytes; at most %d are allowed", file, fi.Size(), maxHintBytes)
		return
	}
	b, err := readCapped(full, maxHintBytes)
	if err != nil {
		v.check(path, false, "reading hints file %s: %v", file, errNoPath(err))
		return
	}
	if len(b) > maxHintBytes { // it grew since the stat
		v.check(path, false, "hints file %s is over %d bytes; at most %d are allowed", file, maxHintBytes, maxHintBytes)
		return
	}
	// A BOM would reach the model as the first character of the hints,
	// and a Windows editor's CRLFs as a token more per line.
	b = bytes.ReplaceAll(bytes.TrimPrefix(b, utf8BOM), []byte("\r\n"), []byte("\n"))
	v.hints[full] = string(b)
}

// errNoPath drops the path an *os.PathError repeats, since the message
// already names the file as written.
func errNoPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func resolvePath(dir, file string) string {
	if filepath.IsAbs(file) {
		return filepath.Clean(file)
	}
	return filepath.Join(dir, file)
}

func validMode(m Mode) bool {
	switch m {
	case ModeSearch, ModePreselect, ModeHybrid, ModePassthrough:
		return true
	}
	return false
}

// validStore checks a session store setting with the parser serve uses
// (session.ParseRedisURL), so validate refuses exactly what serve refuses;
// its errors never repeat the URL's password.
func validStore(s string) error {
	if s == "memory" {
		return nil
	}
	if !strings.Contains(s, "://") {
		return errors.New("want memory or a redis:// or rediss:// URL")
	}
	_, err := session.ParseRedisURL(s)
	return err
}

// riskLevel orders risks; 0 is unknown or unset.
func riskLevel(r string) int {
	switch r {
	case RiskSafe:
		return 1
	case RiskModerate:
		return 2
	case RiskDestructive:
		return 3
	}
	return 0
}
