package proxy

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the gateway's Prometheus metrics in a registry of its own
// (never the global default one, so two gateways in a process or a test do
// not collide). Create one with NewMetrics and set it on Gateway.Metrics;
// the gateway then serves it on GET /metrics. All methods are no-ops on a
// nil *Metrics.
type Metrics struct {
	reg *prometheus.Registry

	requests      *prometheus.CounterVec
	passthrough   *prometheus.CounterVec
	rounds        prometheus.Histogram
	searches      prometheus.Counter
	searchSeconds prometheus.Histogram
	addedSeconds  *prometheus.HistogramVec
	toolTokens    *prometheus.CounterVec
	inputTokens   *prometheus.CounterVec
	cachedTokens  prometheus.Counter
	misses        prometheus.Counter
	reloads       *prometheus.CounterVec
	policyFileOK  prometheus.Gauge
	storeErrors   *prometheus.CounterVec
	retries       prometheus.Counter

	decisionLogErrors *prometheus.CounterVec

	bindOnce sync.Once
}

// NewMetrics returns metrics registered in a fresh registry, with the Go
// runtime and process collectors (heap, RSS) alongside.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_requests_total",
			Help: "Requests served, by route (chat, responses, messages; passthrough for the other /v1 routes), mode (the policy mode, also for a request refused before the gateway decided anything; passthrough for chat requests sent upstream unchanged and for the passthrough route) and status.",
		}, []string{"route", "mode", "status"}),
		passthrough: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_passthrough_total",
			Help: "Chat requests sent upstream unchanged, by reason (no tools, fewer than min_tools, n > 1, legacy functions, long conversation, a custom tool, duplicate tool names, the client defers its own tools, the client uses the provider's tool search, client tools take both search names, mode passthrough, ...): why a client saves nothing.",
		}, []string{"reason"}),
		rounds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "toolgate_upstream_rounds",
			Help: "Upstream calls per rewritten chat request (1 when no tool_search was answered); an attempt retried after a 5xx or a 429 is one call, its retries are in toolgate_upstream_retries_total.",
			// max_rounds is at most 32, and a round per search plus one.
			Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 33},
		}),
		searches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_tool_search_calls_total",
			Help: "tool_search calls the gateway answered, those it refused without searching included (past the calls one round may make, or after the searches are spent).",
		}),
		searchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "toolgate_search_duration_seconds",
			Help:    "Time to rank the catalog for one tool_search call.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 10),
		}),
		addedSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_added_latency_seconds",
			Help:    "Time a rewritten chat request spent in the gateway: total minus the time waiting on the upstream and on the client (its body arriving, writes to it blocking on a slow reader).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2.5, 12),
		}, []string{"stream"}),
		toolTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_tokens_total",
			Help: "Tokens of tool definitions: side=client counts the client's tools array once per chat request, side=upstream the tools sent on every upstream call; requests passed through count both sides (equal unless the policy removed tools).",
		}, []string{"side"}),
		inputTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_input_tokens_total",
			Help: "Upstream input tokens of chat requests with tools: path=gateway is the upstream usage over all calls; path=direct_estimate is each request's first call with the full tools array instead (search rounds excluded, and the gateway's own items of earlier turns a Responses request chains from). Requests passed through count on both paths when their answer reports usage (a stream's when the client asked for stream_options.include_usage).",
		}, []string{"path"}),
		cachedTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_input_tokens_cached_total",
			Help: "Of the gateway's upstream input tokens (toolgate_input_tokens_total{path=\"gateway\"}), those the upstream reported as prompt-cache hits (usage.prompt_tokens_details.cached_tokens, or input_tokens_details.cached_tokens); 0 with upstreams that report none.",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_tool_misses_total",
			Help: "Calls of a client tool that was not in the tools array of the upstream call that made them.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_upstream_retries_total",
			Help: "Upstream calls of the gateway's rounds sent again after a 5xx, or a 429 that names a wait of at most 20 s (gateway.retries); requests passed through are sent once.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_policy_reloads_total",
			Help: "Policy reload attempts by result (ok, error); a failed reload keeps the last good policy.",
		}, []string{"result"}),
		policyFileOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolgate_policy_file_ok",
			Help: "1 when the last load or reload of the policy file succeeded, 0 while the file on disk is broken (the last good policy keeps serving).",
		}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_session_store_errors_total",
			Help: "Session store failures by operation (get, put, and thread_get, thread_put for the Responses route's response ids). Requests still succeed; a lost session costs a repeated search.",
		}, []string{"op"}),
	}
	m.reg.MustRegister(m.requests, m.passthrough, m.rounds, m.searches, m.searchSeconds, m.addedSeconds,
		m.toolTokens, m.inputTokens, m.cachedTokens, m.misses, m.reloads, m.policyFileOK, m.storeErrors, m.retries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.decisionLogErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_decision_log_errors_total",
		Help: "Decision records lost, by reason: write (the file refused it: a full disk, a closed pipe) or dropped (never written: the queue of records waiting for the file was full, as when a FIFO's reader stops reading or a disk hangs, or shutdown gave up on a write that did not return). The gateway's log warns at most once a minute per reason while they are lost.",
	}, []string{"reason"})
	m.reg.MustRegister(m.decisionLogErrors)
	// Both results exist from the start: a series that appears with its
	// first increment is missed by rate() and increase(), which then never
	// see the first failed reload after a restart.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	m.decisionLogErrors.WithLabelValues(lostWrite) // and both reasons of a lost decision record
	m.decisionLogErrors.WithLabelValues(lostDropped)
	// The gateway does not start on a policy it cannot load, so the file
	// is good until a reload says otherwise (and with no file, nothing is
	// broken).
	m.policyFileOK.Set(1)
	return m
}

// Registry returns the registry, to add collectors or gather in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// PolicyReloaded counts a policy reload attempt and records whether the
// file on disk is good; set it as policy.Live.OnReload before Watch.
func (m *Metrics) PolicyReloaded(err error) {
	if m == nil {
		return
	}
	result, ok := "ok", 1.0
	if err != nil {
		result, ok = "error", 0
	}
	m.reloads.WithLabelValues(result).Inc()
	m.policyFileOK.Set(ok)
}

// retried counts an upstream call sent again (retryWait).
func (m *Metrics) retried() {
	if m == nil {
		return
	}
	m.retries.Inc()
}

// sessionStoreFailed counts a failed session Get or Put.
func (m *Metrics) sessionStoreFailed(op string) {
	if m == nil {
		return
	}
	m.storeErrors.WithLabelValues(op).Inc()
}

// bind adds the gauges read from the gateway's stores: sessions held, and
// the hits and misses of the tools parse cache and the catalog cache.
// Only the first gateway bound is read.
func (m *Metrics) bind(g *Gateway) {
	if m == nil {
		return
	}
	m.bindOnce.Do(func() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "toolgate_inflight_request_bytes",
			Help: "Request body bytes the gateway holds now, against its in-flight limit (--max-inflight-mb).",
		}, func() float64 { return float64(g.inflight.held.Load()) }))
		if s, ok := g.Sessions.(interface{ Len() int }); ok {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "toolgate_sessions",
				Help: "Sessions held by the in-process store.",
			}, func() float64 { return float64(s.Len()) }))
		}
		if p := g.parsed; p != nil {
			m.reg.MustRegister(
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "toolgate_tools_parse_cache_hits_total",
					Help: "Tools arrays (512 bytes or more) found parsed in the parse cache: the turn compared the array instead of parsing it.",
				}, func() float64 { h, _ := p.Stats(); return float64(h) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "toolgate_tools_parse_cache_misses_total",
					Help: "Tools arrays (512 bytes or more) parsed because the parse cache did not hold them.",
				}, func() float64 { _, n := p.Stats(); return float64(n) }),
			)
		}
		if c := g.Catalogs; c != nil {
			m.reg.MustRegister(
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "toolgate_catalog_cache_hits_total",
					Help: "Compiled catalogs found in the cache.",
				}, func() float64 { return float64(c.Stats().Hits) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "toolgate_catalog_cache_misses_total",
					Help: "Catalog lookups that compiled (or waited on a compile).",
				}, func() float64 { return float64(c.Stats().Misses) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "toolgate_catalog_compiles_refused_total",
					Help: "Catalog compiles given up for want of room among the compiles running (--max-compile-mb): each request was answered 503 gateway_overloaded.",
				}, func() float64 { return float64(c.Stats().Refused) }),
				prometheus.NewGaugeFunc(prometheus.GaugeOpts{
					Name: "toolgate_catalog_cache_bytes",
					Help: "Estimated heap of the compiled catalogs held, against --catalog-cache-mb.",
				}, func() float64 { return float64(c.Stats().Bytes) }),
				prometheus.NewCounterFunc(prometheus.CounterOpts{
					Name: "toolgate_catalogs_too_large_total",
					Help: "Catalogs compiled but not kept, each larger than --catalog-cache-mb alone: their clients compile them with every request.",
				}, func() float64 { return float64(c.Stats().TooLarge) }),
			)
		}
	})
}

// observe records one finished request.
func (m *Metrics) observe(tr *tracker, total time.Duration) {
	if m == nil {
		return
	}
	// 0 when nothing was written (the client left first), as the decision
	// record says: one value to match a record to its series.
	status := strconv.Itoa(tr.status)
	// Counted last: a scrape that sees the request sees all it recorded.
	defer m.requests.WithLabelValues(tr.route, tr.rep.mode, status).Inc()
	if tr.rep.reason != "" {
		m.passthrough.WithLabelValues(tr.rep.reason).Inc()
	}
	if tr.rep.mode == modePassthrough {
		m.observePassthrough(&tr.rep)
		return
	}
	t := tr.turn
	if t == nil {
		return
	}
	rep := &tr.rep
	if rep.calls > 0 {
		m.rounds.Observe(float64(rep.calls))
	}
	m.searches.Add(float64(t.searches))
	for _, s := range rep.searches {
		if s.took >= 0 { // the catalog was searched
			m.searchSeconds.Observe(s.took.Seconds())
		}
	}
	m.addedSeconds.WithLabelValues(strconv.FormatBool(t.req.Stream)).Observe(rep.added(total).Seconds())
	if rep.tokErr == nil {
		m.toolTokens.WithLabelValues("client").Add(float64(rep.tokIn))
		up := 0
		for _, r := range rep.rounds {
			up += r.tokens
		}
		m.toolTokens.WithLabelValues("upstream").Add(float64(up))
	}
	if gw, direct, ok := t.inputTokens(); ok {
		m.inputTokens.WithLabelValues("gateway").Add(float64(gw))
		m.inputTokens.WithLabelValues("direct_estimate").Add(float64(direct))
		if c, ok := t.cachedInputTokens(); ok {
			m.cachedTokens.Add(float64(c))
		}
	}
	m.misses.Add(float64(t.misses))
}

// observePassthrough records a passed-through chat request's tokens: the
// tool tokens of both sides and, when known, its input tokens on both
// paths.
func (m *Metrics) observePassthrough(rep *report) {
	if rep.toolsIn == 0 || rep.tokErr != nil {
		return
	}
	m.toolTokens.WithLabelValues("client").Add(float64(rep.tokIn))
	m.toolTokens.WithLabelValues("upstream").Add(float64(rep.passSent))
	if gw, direct, ok := rep.passInput(); ok {
		m.inputTokens.WithLabelValues("gateway").Add(float64(gw))
		m.inputTokens.WithLabelValues("direct_estimate").Add(float64(direct))
		// Counted with the prompt they are part of, as for a turn: the
		// cached total is a share of toolgate_input_tokens_total{path="gateway"}.
		if rep.passCached >= 0 {
			m.cachedTokens.Add(float64(rep.passCached))
		}
	}
}

// EmbeddingMetrics counts the calls of the embeddings client
// (search.embeddings.provider: openai); it implements
// selector.EmbedObserver. All methods are no-ops on a nil
// *EmbeddingMetrics.
type EmbeddingMetrics struct {
	calls   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// Embeddings returns the embeddings client's metrics, registered in m's
// registry (once: a second call returns the same series), or nil for a
// nil m.
func (m *Metrics) Embeddings() *EmbeddingMetrics {
	if m == nil {
		return nil
	}
	return &EmbeddingMetrics{
		calls: registerOnce(m.reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_embedding_calls_total",
			Help: "Calls of the embeddings endpoint by kind (query: a request's text, which the request waits on; catalog: a batch of tool texts, in the background) and outcome (ok, timeout, network_error, rate_limited, unauthorized, status_4xx, status_5xx, bad_response, canceled; skipped: a query, or the rest of a catalog, not sent while the endpoint cools down after a failure). Any outcome but ok means that ranking used the offline word vectors.",
		}, []string{"kind", "outcome"})),
		seconds: registerOnce(m.reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_embedding_call_duration_seconds",
			Help:    "Duration of the embeddings endpoint's calls by kind (query, catalog), whatever their outcome; skipped calls are not observed.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10),
		}, []string{"kind"})),
	}
}

// registerOnce registers c in reg, or returns the collector registered
// before under the same description.
func registerOnce[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
		// Start-up only: two metrics of one name and different shapes
		// are a programming error, as in NewMetrics' MustRegister.
		panic(err)
	}
	return c
}

// EmbeddingCall counts one call (see selector.EmbedObserver).
func (e *EmbeddingMetrics) EmbeddingCall(kind, outcome string, d time.Duration) {
	if e == nil {
		return
	}
	e.calls.WithLabelValues(kind, outcome).Inc()
	if outcome != "skipped" {
		e.seconds.WithLabelValues(kind).Observe(d.Seconds())
	}
}
