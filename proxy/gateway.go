// Package proxy owns the HTTP side of toolgate: the server's routes, the
// upstream client, the tool_search loop and the stream relay. It must not
// parse request or response JSON by hand (rewrite does), rank tools
// (selector does) or read YAML (policy does).
package proxy

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolgate/toolgate/policy"
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
	"github.com/toolgate/toolgate/session"
)

// Gateway is the tool-routing reverse proxy. Set its fields, then serve
// Handler(); fields must not change once it serves.
type Gateway struct {
	// Upstream is the API base URL, ending in /v1 (required).
	Upstream *url.URL

	// Policy returns the policy in force; it is called once per request, so
	// a request finishes on the policy it started with. nil means
	// policy.Default().
	Policy func() *policy.Snapshot

	// Sessions keeps session state (required; see session.NewMemory).
	Sessions session.Store

	// Catalogs caches compiled catalogs (required; see selector.NewCache).
	Catalogs *selector.Cache

	// Transport sends upstream requests. nil means http.DefaultTransport.
	Transport http.RoundTripper

	// Logger receives operational logs. nil means slog.Default().
	Logger *slog.Logger

	// Ready reports whether /healthz should answer 200. nil means always.
	Ready func() bool

	// Embedder computes tool and query vectors when the policy's embeddings
	// provider is "openai". nil means the offline word vectors.
	Embedder selector.Embedder

	// Learned keeps the tool transitions observed per tenant (required; see
	// NewLearned).
	Learned *Learned

	// Metrics records Prometheus metrics and serves them on GET /metrics.
	// nil means no metrics and no /metrics route.
	Metrics *Metrics

	// DecisionLog receives one record per chat request: the session, the
	// active set and why each tool is in it, the searches with their top
	// results, the upstream calls and the token accounting. nil means none.
	// Records are written on the request's goroutine once the client has
	// its answer: behind a file, put a DecisionWriter under the logger's
	// handler, so that no request waits on the file's I/O.
	DecisionLog *slog.Logger

	// AdminToken enables GET /debug/sessions/{id} for requests that carry it
	// in X-Toolgate-Admin-Token. "" means the route does not exist (404).
	AdminToken string

	// MaxInflightBytes bounds the request bodies the gateway holds at
	// once, all requests together: those it reads whole (chat
	// completions, passthrough bodies up to 1 MiB) are held for the
	// request's life. A request that would pass it is refused at once
	// with a 503 gateway_overloaded and Retry-After, before its body is
	// read when its length is declared; one request alone is always
	// admitted. 0 means DefaultMaxInflightBytes; below 0, no bound.
	MaxInflightBytes int64

	// BodyTimeout bounds how long a request body the gateway reads itself
	// (chat completions, small passthrough bodies) may take to arrive; a
	// client that stops mid-body otherwise holds its connection for good.
	// 0 means two minutes.
	BodyTimeout time.Duration

	// HeldKeepAlive bounds how long a stream leaves its client without a
	// byte while the gateway holds the upstream's events back (a round's
	// reasoning, until what it led to shows: an item the client sees,
	// or a Chat delta's text or call): past it a
	// comment line goes out, which SSE parsers skip, so that an idle
	// timeout between (60 s on ALB and nginx) does not cut a stream that
	// is in fact busy. 0 means 15 seconds.
	HeldKeepAlive time.Duration

	// MaxThreads bounds the response ids the gateway remembers in process
	// (what a Responses API chain by previous_response_id, or a delete,
	// needs that the upstream does not keep), in each of two parts: those
	// that name other rounds of the turn, and those that name only its
	// session, so that no number of the latter evicts the former. 0 means
	// DefaultMaxThreads.
	MaxThreads int

	once       sync.Once
	pass       *httputil.ReverseProxy
	handler    http.Handler
	basePath   string
	tokens     *tokenCounter
	parsed     *toolCache
	bodies     bodyPool                           // request body buffers
	sse        sseReaders                         // upstream stream readers
	searchDefs *lru.Cache[string, string]         // tool_search definitions by catalog
	tables     *weighedLRU[string, *catalogRules] // policy decisions by catalog, in each array's order
	tableSets  *weighedLRU[string, *policy.Table] // policy decisions by tool set, for its other orders
	sets       *toolSets                          // each tools array's tool set (toolset.go)
	shapes     *lru.Cache[uint64, arrayShape]     // what passthrough asks of a tools array, by its key
	noUsage    *lru.Cache[string, struct{}]       // models whose upstream refused stream_options
	noExtras   *lru.Cache[string, struct{}]       // models whose upstream refused its messages' extras
	threads    *threadStore                       // what the response ids clients were given lead to
	dlogFails  writeFailures                      // paces the warnings about decision-log writes
	inflight   inflight                           // request bytes held, against MaxInflightBytes
}

func (g *Gateway) init() {
	g.once.Do(func() {
		g.basePath = strings.TrimRight(g.Upstream.Path, "/")
		g.pass = g.newPassthrough()
		g.tokens = newTokenCounter()
		g.parsed = newToolCache(256)
		g.searchDefs, _ = lru.New[string, string](256) // errors only on size <= 0
		g.tables = newWeighedLRU[string, *catalogRules](256, tablesBytes)
		g.tableSets = newWeighedLRU[string, *policy.Table](256, tablesBytes)
		g.sets = newToolSets(256)
		g.shapes, _ = lru.New[uint64, arrayShape](256)
		g.noUsage, _ = lru.New[string, struct{}](256)
		g.noExtras, _ = lru.New[string, struct{}](256)
		g.threads = newThreadStore(g.MaxThreads)
		g.inflight.max = cmp.Or(g.MaxInflightBytes, DefaultMaxInflightBytes)
		g.Metrics.bind(g)
		g.handler = g.routes()
	})
}

// Handler returns the gateway's HTTP handler. It is a gin router, built
// in the mode gin is in: gin's mode is process-wide, so the program sets
// it, and in its default debug mode gin prints every route and a warning
// to stdout (cmd/gateway runs it in release mode).
func (g *Gateway) Handler() http.Handler {
	g.init()
	return g.handler
}

// ServeHTTP serves one request; it is Handler().ServeHTTP.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.Handler().ServeHTTP(w, r)
}

func (g *Gateway) logger() *slog.Logger {
	if g.Logger != nil {
		return g.Logger
	}
	return slog.Default()
}

func (g *Gateway) policy() *policy.Snapshot {
	if g.Policy != nil {
		if p := g.Policy(); p != nil {
			return p
		}
	}
	return policy.Default()
}

func (g *Gateway) transport() http.RoundTripper {
	if g.Transport != nil {
		return g.Transport
	}
	return http.DefaultTransport
}

// routes wires the gin router: health, chat completions under /v1 and under
// the upstream's own prefix, and a plain reverse proxy for the rest of /v1.
func (g *Gateway) routes() http.Handler {
	r := gin.New()
	r.Use(g.recoverPanics)
	health := func(c *gin.Context) {
		if g.Ready != nil && !g.Ready() {
			c.String(http.StatusServiceUnavailable, "not ready\n") // starting or draining
			return
		}
		c.String(http.StatusOK, "ok\n")
	}
	r.GET("/healthz", health)
	r.HEAD("/healthz", health) // wget --spider and curl -I probe with HEAD
	if g.Metrics != nil {
		r.GET("/metrics", gin.WrapH(g.Metrics.Handler()))
	}
	if g.AdminToken != "" {
		r.GET(debugSessionsPrefix+"*id", func(c *gin.Context) { g.serveDebugSession(c.Writer, c.Request) })
		r.GET(debugPprofPrefix+"*name", func(c *gin.Context) { g.servePprof(c.Writer, c.Request) })
		r.POST(debugPprofPrefix+"symbol", func(c *gin.Context) { g.servePprof(c.Writer, c.Request) })
	}
	r.NoRoute(func(c *gin.Context) { g.dispatch(c.Writer, c.Request) })
	return r
}

// recoverPanics turns a handler's panic into a 500 in the shape of the
// route's errors while nothing of the response has gone out. Once some
// has, and for http.ErrAbortHandler (the reverse proxy panics with it when
// an answer breaks off mid-body), it panics with http.ErrAbortHandler,
// which net/http recovers, over HTTP/1 and HTTP/2, by closing the
// connection without a stack trace, so the client sees the answer cut: an
// error body written then would land inside the answer, after a stream's
// events or within a JSON body, and the answer would end as if whole.
func (g *Gateway) recoverPanics(c *gin.Context) {
	clearWriteDeadline(c.Writer) // every route's first step: see there
	defer func() {
		rec := recover()
		if rec == nil {
			return
		}
		if aborts(rec) {
			panic(rec)
		}
		r := c.Request
		if c.Writer.Written() {
			g.logger().ErrorContext(r.Context(), "handler panicked after its response began; cutting the connection", "path", r.URL.Path, "panic", rec)
			panic(http.ErrAbortHandler)
		}
		g.logger().ErrorContext(r.Context(), "handler panicked", "path", r.URL.Path, "panic", rec)
		writeRouteError(c.Writer, g.errorRoute(r), http.StatusInternalServerError, apiError{Message: "internal gateway error", Type: "gateway_error", Code: "internal_error"})
		c.Abort()
	}()
	c.Next()
}

// errorRoute is the route whose error shape r's client reads, as dispatch
// routes r: only the Messages route's differs from OpenAI's (errorBodyOn).
func (g *Gateway) errorRoute(r *http.Request) string {
	if rest, ok := g.apiPath(r.URL.Path); ok && r.Method == http.MethodPost && rest == "/messages" {
		return routeMessages
	}
	return ""
}

// aborts reports whether a recovered panic is http.ErrAbortHandler.
func aborts(rec any) bool {
	err, ok := rec.(error)
	return ok && errors.Is(err, http.ErrAbortHandler)
}

// dispatch routes what gin's static routes do not: the turns of the three
// APIs (chat completions, responses, messages) under any accepted prefix,
// and the passthrough.
func (g *Gateway) dispatch(w http.ResponseWriter, r *http.Request) {
	rest, ok := g.apiPath(r.URL.Path)
	if ok && hasDotSegment(r.URL.Path) {
		// /v1/../admin passes the prefix check and would reach the
		// upstream as is; a server that resolves it serves a path outside
		// its API base.
		writeJSONError(w, http.StatusBadRequest, apiError{Message: "the path has a . or .. segment: " + r.URL.Path, Type: "invalid_request_error", Code: "invalid_path"})
		return
	}
	if !ok {
		writeJSONError(w, http.StatusNotFound, apiError{Message: "unknown path " + r.URL.Path, Type: "invalid_request_error", Code: "not_found"})
		return
	}
	// The routes the gateway serves itself are matched on the path
	// without empty segments: a client that joins a base URL ending in
	// /v1/ with /chat/completions asks for /v1//chat/completions, and
	// matched as written, its turns would go upstream raw, past the
	// policy.
	clean := cleanAPIPath(rest)
	if d, route := turnRoute(clean); d != nil && r.Method == http.MethodPost {
		if clean != rest {
			r = withAPIPath(r, rest, clean)
		}
		g.serveTurn(w, r, clean, d, route)
		return
	}
	tr := g.track(w, routePassthrough)
	defer tr.done(r.Context())
	if g.serveStoredResponse(tr, r, clean) {
		return
	}
	r, held, err := g.passBody(tr, r)
	if err != nil {
		g.writeError(tr, r, err)
		return
	}
	defer g.inflight.release(held)
	g.pass.ServeHTTP(tr, r)
}

// turnRoute returns the dialect and the route name of a turn's API path,
// or a nil dialect for any other path.
func turnRoute(rest string) (rewrite.Dialect, string) {
	switch {
	case isChatPath(rest):
		return rewrite.Chat{}, routeChat
	case rest == "/responses":
		return rewrite.Responses{}, routeResponses
	case rest == "/messages":
		return rewrite.Messages{}, routeMessages
	}
	return nil, ""
}

// cleanAPIPath returns an API path without its empty segments: repeated
// slashes collapse and a trailing one goes ("//chat/completions/" is
// "/chat/completions"). Dot segments are left to hasDotSegment.
func cleanAPIPath(rest string) string {
	if !strings.Contains(rest, "//") && !strings.HasSuffix(rest, "/") {
		return rest
	}
	var b strings.Builder
	for seg := range strings.SplitSeq(rest, "/") {
		if seg != "" {
			b.WriteByte('/')
			b.WriteString(seg)
		}
	}
	return b.String()
}

// withAPIPath returns a shallow copy of r whose URL has the API path clean
// in place of rest, its prefix kept: the upstream gets the canonical path
// of the route the gateway served (upstreamURL reads the client's).
func withAPIPath(r *http.Request, rest, clean string) *http.Request {
	r = r.WithContext(r.Context())
	u := *r.URL
	u.Path, u.RawPath = strings.TrimSuffix(u.Path, rest)+clean, ""
	r.URL = &u
	return r
}

// isChatPath reports whether an API path is a chat completion's:
// /chat/completions, or Azure OpenAI's deployment form
// /deployments/{deployment}/chat/completions, which its SDKs (openai's
// AzureOpenAI, openai-go's azure package) send under an endpoint's
// /openai. With the upstream at a resource's /openai, every deployment's
// turns are rewritten, as /chat/completions' are.
func isChatPath(rest string) bool {
	if rest == "/chat/completions" {
		return true
	}
	dep, ok := strings.CutPrefix(rest, "/deployments/")
	if !ok {
		return false
	}
	name, tail, ok := strings.Cut(dep, "/")
	return ok && name != "" && tail == "chat/completions"
}

// hasDotSegment reports whether the decoded path p has a "." or ".."
// segment (%2e%2e decodes to one).
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// apiPath strips the API prefix the client used (/v1, or the upstream's own
// base path) and returns the rest, e.g. "/chat/completions".
func (g *Gateway) apiPath(p string) (string, bool) {
	for _, prefix := range []string{g.basePath, "/v1"} {
		if prefix == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(p, prefix); ok && (rest == "" || rest[0] == '/') {
			return rest, true
		}
	}
	return "", false
}

// upstreamURL joins the upstream base with an API path such as "/models"
// of the client's request in. The path keeps the client's escaping, as a
// reverse proxy does: a model id such as meta-llama%2FLlama-3.1-8B names
// one resource, and decoded it would name another. The query is the base
// URL's own (an Azure-style ?api-version=) followed by the client's.
func (g *Gateway) upstreamURL(rest string, in *url.URL) *url.URL {
	u := *g.Upstream
	u.Path = g.basePath + rest
	u.RawPath = ""
	if raw, ok := g.apiPath(in.EscapedPath()); ok && raw != rest {
		// url.URL uses RawPath only while it is an encoding of Path, so a
		// prefix the client escaped falls back to the decoded path.
		u.RawPath = strings.TrimRight(g.Upstream.EscapedPath(), "/") + raw
	}
	u.RawQuery = joinQueries(g.Upstream.RawQuery, in.RawQuery)
	return &u
}

// joinQueries is the base URL's query followed by the client's, without
// the base's parameters the client sets itself: the AzureOpenAI SDK always
// sends ?api-version=, and the upstream would get two of them (two
// different versions when they differ). The client's query goes as it came.
func joinQueries(base, client string) string {
	switch {
	case base == "":
		return client
	case client == "":
		return base
	}
	cq, err := url.ParseQuery(client)
	if err != nil {
		return base + "&" + client
	}
	var kept []string
	for kv := range strings.SplitSeq(base, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if name, err := url.QueryUnescape(k); err == nil && cq.Has(name) {
			continue
		}
		kept = append(kept, kv)
	}
	if len(kept) == 0 {
		return client
	}
	return strings.Join(kept, "&") + "&" + client
}
