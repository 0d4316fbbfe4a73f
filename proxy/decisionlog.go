package proxy

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The decision log: one structured record per chat request saying what the
// gateway decided and why, for an operator asking "why did the model not
// see tool X". It names the session by its store key (a hash of the
// client's credential, then the client's X-Session-ID or a hash of the
// conversation's opening), which GET /debug/sessions/{id} accepts; it never
// holds a credential or message text other than the search queries.

// hiddenLogged bounds how many policy-hidden tools one record lists.
const hiddenLogged = 32

// modelLogged bounds the model name a record repeats, as long as a tool
// name may be: the client sends any string, and the upstream refuses one
// it does not serve only after the gateway has logged it.
const modelLogged = maxToolName

// activeTool is one tool of the active set and why it is there.
type activeTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
	Rule   string `json:"rule,omitempty"` // the policy rule, for core tools
}

// hiddenTool is a client tool the policy kept from the upstream.
type hiddenTool struct {
	Name string `json:"name"`
	Rule string `json:"rule"`
}

// logDecision writes the request's record to g.DecisionLog, if set, for
// chat and responses requests only: a GET /v1/models or an embeddings call had no
// decision to record, and a client polling the model list would fill the
// log with records that say nothing (the metrics still count them). ctx
// is the request's; the record is written even when its client has left.
func (g *Gateway) logDecision(ctx context.Context, tr *tracker, total time.Duration) {
	if g.DecisionLog == nil || tr.route == routePassthrough {
		return
	}
	rep := &tr.rep
	attrs := make([]slog.Attr, 0, 24)
	attrs = append(attrs,
		slog.String("route", tr.route),
		slog.String("mode", rep.mode),
		slog.Int("status", tr.status),
		slog.Float64("duration_ms", ms(total)),
	)
	if rep.reason != "" {
		attrs = append(attrs, slog.String("passthrough_reason", rep.reason))
	}
	if t := tr.turn; t != nil {
		attrs = append(attrs, turnAttrs(t, total)...)
	} else if rep.toolsIn > 0 && rep.tokErr == nil {
		attrs = append(attrs, slog.Int("tools_client", rep.toolsIn), slog.String("encoding", string(rep.enc)),
			slog.Int("tool_tokens_client", rep.tokIn), slog.Int("tool_tokens_upstream", rep.passSent))
		if rep.catTok != nil && rep.catTok.estimated {
			attrs = append(attrs, slog.Bool("tool_tokens_estimated", true))
		}
		if gw, direct, ok := rep.passInput(); ok {
			attrs = append(attrs, slog.Int64("input_tokens", gw), slog.Int64("input_tokens_direct_estimate", direct))
			if rep.passCached >= 0 {
				attrs = append(attrs, slog.Int64("input_tokens_cached", rep.passCached))
			}
		}
	}
	g.writeDecision(context.WithoutCancel(ctx), attrs)
}

// writeDecision writes one record through the decision log's handler,
// not its Logger, whose methods drop the write's error: a record lost to
// a full disk must be counted and said. A DecisionWriter behind the
// handler takes the record without waiting and accounts for it itself.
// ctx carries the request's values (a handler may read a trace id from
// it), not its cancellation: a record is written once the request ends.
func (g *Gateway) writeDecision(ctx context.Context, attrs []slog.Attr) {
	h := g.DecisionLog.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	now := time.Now()
	r := slog.NewRecord(now, slog.LevelInfo, "decision", 0)
	r.AddAttrs(attrs...)
	if err := h.Handle(ctx, r); err != nil {
		recordLost(ctx, g.Metrics, g.logger(), &g.dlogFails, lostWrite, err, now)
	}
}

// Why a decision record was lost, the reason label of
// toolgate_decision_log_errors_total.
const (
	lostWrite   = "write"   // the sink refused it
	lostDropped = "dropped" // never written: the queue was full, or shutdown gave up
)

// recordLost counts a decision record lost for reason and says so on
// logger, at most once a minute as pace allows. ctx is the request's
// whose record it was, when the loss is known on its goroutine.
func recordLost(ctx context.Context, m *Metrics, logger *slog.Logger, pace *writeFailures, reason string, err error, now time.Time) {
	m.decisionRecordLost(reason)
	warn, n := pace.fail(now)
	if !warn {
		return
	}
	switch reason {
	case lostDropped:
		logger.WarnContext(ctx, "the decision log is not keeping up; records are dropped (toolgate_decision_log_errors_total{reason=\"dropped\"} counts them)",
			"err", err, "dropped", n)
	default:
		logger.WarnContext(ctx, "writing the decision log failed; records are lost (toolgate_decision_log_errors_total{reason=\"write\"} counts them)",
			"err", err, "failures", n)
	}
}

// decisionRecordLost counts a decision record lost for reason.
func (m *Metrics) decisionRecordLost(reason string) {
	if m == nil {
		return
	}
	m.decisionLogErrors.WithLabelValues(reason).Inc()
}

// writeFailures paces the warnings about lost decision records to one a
// minute: a full disk fails every request's record, and a warning for
// each would flood the gateway's own log, likely on the same disk.
type writeFailures struct {
	mu     sync.Mutex
	warned time.Time // when the last warning was logged
	since  int       // failures since then, the one that warned included
}

// fail notes a failure at now and reports whether to warn, and how many
// failures the warning covers.
func (w *writeFailures) fail(now time.Time) (warn bool, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since++
	if !w.warned.IsZero() && now.Sub(w.warned) < time.Minute {
		return false, 0
	}
	n, w.since, w.warned = w.since, 0, now
	return true, n
}

func turnAttrs(t *turn, total time.Duration) []slog.Attr {
	rep := t.rep
	active := make([]activeTool, 0, len(t.reasons))
	for _, n := range t.activeNames() {
		a := activeTool{Name: n, Reason: t.reasons[n]}
		if a.Reason == reasonCore {
			a.Rule = t.policy.Decide(n).Rule
		}
		active = append(active, a)
	}
	var hidden []hiddenTool
	at := t.policy.Hidden()
	hiddenN := len(at)
	for _, i := range at[:min(len(at), hiddenLogged)] {
		name, d := t.policy.At(i)
		hidden = append(hidden, hiddenTool{Name: name, Rule: d.Rule})
	}
	upTokens := make([]int, 0, len(rep.rounds))
	upTools := make([]int, 0, len(rep.rounds))
	for _, r := range rep.rounds {
		upTokens = append(upTokens, r.tokens)
		upTools = append(upTools, r.tools)
	}
	attrs := []slog.Attr{
		slog.String("session", t.key),
		slog.String("model", clipMarked(t.req.Model, modelLogged)),
		slog.Bool("stream", t.req.Stream),
		slog.Any("active", active),
		slog.Any("dropped_guesses", t.dropped),
		slog.Int("hidden_count", hiddenN),
		slog.Any("hidden", hidden),
		slog.Any("searches", rep.searches),
		slog.Int("upstream_calls", rep.calls),
		slog.Int("tool_misses", t.misses),
		slog.Int("tools_client", rep.toolsIn),
		slog.Any("tools_upstream", upTools),
		slog.Float64("upstream_ms", ms(rep.upstream)),
		slog.Float64("added_ms", ms(rep.added(total))),
	}
	if rep.tokErr == nil {
		attrs = append(attrs, slog.String("encoding", string(rep.enc)),
			slog.Int("tool_tokens_client", rep.tokIn), slog.Any("tool_tokens_upstream", upTokens))
		if rep.catTok != nil && rep.catTok.estimated {
			attrs = append(attrs, slog.Bool("tool_tokens_estimated", true))
		}
	}
	if gw, direct, ok := t.inputTokens(); ok {
		attrs = append(attrs, slog.Int64("input_tokens", gw), slog.Int64("input_tokens_direct_estimate", direct))
		if c, ok := t.cachedInputTokens(); ok {
			attrs = append(attrs, slog.Int64("input_tokens_cached", c))
		}
	}
	return attrs
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
