package proxy

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// report is what one chat request did. The turn fills it as it runs (the
// hooks below are the only places the search loop touches it); the tracker
// emits it once when the request ends, to the metrics and the decision log,
// and the response headers read it when they are committed.
type report struct {
	start    time.Time
	mode     string // the policy mode, or "passthrough"
	reason   string // why a chat request passed through, if it did
	upstream time.Duration
	// client is the time spent waiting on the client: its body arriving,
	// and writes and flushes to it blocking on a slow reader.
	client time.Duration
	calls  int // upstream calls made

	enc     tokenizer.Encoding
	toolsIn int            // tools in the client's array
	tokIn   int            // their tokens
	catTok  *catalogTokens // their tokens per tool
	tokErr  error          // set when counting failed: token figures are then absent

	rounds   []roundNote
	searches []searchNote

	// hiddenBefore is Thread.HiddenTokens of the response the request
	// continues from: tokens in its first prompt that a direct
	// conversation would not send. hidden is what this turn's own items
	// add (noteHidden).
	hiddenBefore, hidden int64

	// A chat request passed through: the tokens of the tools it forwarded,
	// its answer's prompt tokens (0: unknown) and of them those served
	// from the upstream's prompt cache (-1: not reported).
	passSent   int
	passPrompt int64
	passCached int64
}

// roundNote is one upstream call of a turn.
type roundNote struct {
	tools  int // tools sent, tool_search included
	tokens int // their tokens
	// promptBefore is the upstream prompt tokens of the earlier calls, so
	// the difference to the next note is this call's prompt.
	promptBefore int64
}

// searchNote is one tool_search the gateway answered: Results are the
// first searchHitsLogged tools its answer offered, ResultsTotal how many
// it offered, so a record whose list was cut says so. Error says why a
// call found nothing without a search, or with one that failed.
type searchNote struct {
	Query        string        `json:"query"`
	TookMS       float64       `json:"took_ms"`
	Results      []searchHit   `json:"results"`
	ResultsTotal int           `json:"results_total"`
	Error        string        `json:"error,omitempty"`
	took         time.Duration // -1: the catalog was not searched
}

// Why a tool_search call offered nothing, in its searchNote.
const (
	searchEmptyQuery = "empty query"   // answered without searching
	searchFailed     = "search failed" // the catalog's search returned an error
	// answered without searching: the tools never evicted and this round's
	// earlier finds fill max_active, so nothing found could be kept
	searchListFull = "tool list full"
	// refused without searching: past maxSearchesPerRound calls in one
	// round, or in a round after the turn's searches were spent
	searchTooMany = "too many searches in one step"
	searchSpent   = "searches spent"
)

type searchHit struct {
	Name  string  `json:"name"`
	Score float64 `json:"score"`
}

// searchHitsLogged bounds the results kept per search for the decision log.
const searchHitsLogged = 8

// noteClient counts the client's tools array, once per catalog; ctx is
// the request's.
func (t *turn) noteClient(ctx context.Context, rep *report) {
	t.rep = rep
	rep.mode = string(t.snap.Gateway.Mode)
	rep.countClient(ctx, t.g, t.req, t.textKey, t.setKey)
}

// countClient counts req's tools array in its model's encoding, cached
// under key (once per array), laid out from the count of another order
// of its tools under set when there is one ("": none): the tokens a
// direct request would send.
func (rep *report) countClient(ctx context.Context, g *Gateway, req *rewrite.Request, key, set string) {
	rep.enc = encodingFor(req.Model)
	rep.toolsIn = len(req.Tools)
	rep.catTok, rep.tokErr = g.tokens.catalog(rep.enc, key, set, req.Tools)
	if rep.tokErr == nil {
		rep.tokIn = rep.catTok.total
	} else {
		g.logger().WarnContext(ctx, "counting tool tokens", "err", rep.tokErr)
	}
}

// notePassthroughTools counts the client's tools array (once per array,
// as a turn does) and the tools forwarded (raws, at positions pos of the
// client's array) of a chat request sent upstream without the search
// loop. Such a request saves nothing (or only the tools the policy
// hides), and the token metrics must count it too: a savings ratio read
// from metrics that left it out would claim the gateway's share of the
// traffic for all of it.
func (tr *tracker) notePassthroughTools(ctx context.Context, req *rewrite.Request, raws []string, pos []int) {
	rep := &tr.rep
	// The key serveTurn made sure of: the array's text and dialect.
	if rep.countClient(ctx, tr.g, req, strconv.FormatUint(req.ToolsKey, 36), ""); rep.tokErr != nil {
		return
	}
	if rep.passSent, rep.tokErr = tr.g.tokens.round(rep.enc, rep.catTok, raws, pos); rep.tokErr != nil {
		tr.g.logger().WarnContext(ctx, "counting tool tokens", "err", rep.tokErr)
	}
}

// noteRound notes the size and tokens of a round's tools array, tools as
// turn.tools gives them with their catalog positions pos.
func (t *turn) noteRound(tools []string, pos []int) {
	if t.rep == nil {
		return
	}
	n := roundNote{tools: len(tools), promptBefore: promptTokens(t.usage)}
	if t.rep.tokErr == nil {
		n.tokens, t.rep.tokErr = t.g.tokens.round(t.rep.enc, t.rep.catTok, tools, pos)
	}
	t.rep.rounds = append(t.rep.rounds, n)
}

// noteHidden counts an item the gateway answered one of its own calls
// with, and the call, into the tokens this turn adds to a context the
// upstream keeps (report.hidden): only for an API whose responses are
// continued by id, where the next turn's first prompt carries them. The
// count is the calls' names and arguments and the outputs' text, without
// the few tokens of each item's framing, so the direct estimate that
// leaves it out stays on the high side by those.
func (t *turn) noteHidden(ctx context.Context, c rewrite.Call, output string) {
	rep := t.rep
	if rep == nil || rep.tokErr != nil || !t.req.ChainsByID {
		return
	}
	n, err := t.g.tokens.text(rep.enc, c.Name+c.Arguments+output)
	if err != nil {
		t.g.logger().WarnContext(ctx, "counting tool_search tokens", "err", err)
		return
	}
	rep.hidden += int64(n)
}

// added is what of a request's total time the gateway added itself: not
// waiting on the upstream, nor on the client. A slow upload or a slow
// reader is the client's network, which a direct call would wait on too.
func (rep *report) added(total time.Duration) time.Duration {
	return max(total-rep.upstream-rep.client, 0)
}

// noteSearch records one search for the decision log and the metrics:
// offered is what its answer listed as callable, in its order; took is
// -1 for a call answered without searching, failure why it offered none.
// Every call is noted, as the metrics count every call: a model sending
// empty queries is what an operator reading the log needs to see.
func (t *turn) noteSearch(query string, offered []selector.Result, took time.Duration, failure string) {
	if t.rep == nil {
		return
	}
	hits := make([]searchHit, 0, min(len(offered), searchHitsLogged))
	for _, it := range offered[:min(len(offered), searchHitsLogged)] {
		hits = append(hits, searchHit{Name: it.Name, Score: it.Score})
	}
	t.rep.searches = append(t.rep.searches, searchNote{
		// The model wrote the query, often from the user's message: a
		// record repeating megabytes of it would be the log's bulk.
		Query: shortened(query), Results: hits, ResultsTotal: len(offered), Error: failure, took: took,
		TookMS: float64(max(took, 0).Microseconds()) / 1000,
	})
}

// inputTokens returns the upstream prompt tokens of all the turn's calls
// and an estimate of what the same client turn would have cost direct: its
// first call's prompt with the client's full tools array in place of the
// gateway's. The extra search rounds are the gateway's cost and are not in
// the estimate. ok is false when the upstream reported no usage, tokens
// could not be counted, or the upstream's count of the first prompt is
// below the gateway's count of the tools in it: its usage does not count
// the way the gateway does (a test server's, or a provider that renders
// tools far more tightly), and the estimate would mean nothing, or be
// negative.
func (t *turn) inputTokens() (gateway, direct int64, ok bool) {
	rep := t.rep
	if rep == nil || rep.tokErr != nil || len(rep.rounds) == 0 {
		return 0, 0, false
	}
	gateway = promptTokens(t.usage)
	if gateway <= 0 {
		return 0, 0, false
	}
	first := gateway
	if len(rep.rounds) > 1 {
		first = rep.rounds[1].promptBefore
	}
	direct, ok = rep.directFor(first, int64(rep.rounds[0].tokens))
	return gateway, direct, ok
}

// directFor estimates what a call whose prompt counted first tokens, sent
// of them (counted as JSON text) the tools it carried, would have counted
// with the client's whole array instead; ok is false when first is below
// what the tools sent count (see inputTokens). first is the upstream's
// count, which reads tools as the model does, so the tools held back are
// added as the model reads them too: counted as JSON they were about 30 %
// more (tokenrender.go), and the estimate overstated the saving.
//
// A request that continues an earlier response by its id carries that
// chain's hidden items (hiddenBefore) in its first prompt; they are the
// gateway's cost, not the direct conversation's, and are taken out.
func (rep *report) directFor(first, sent int64) (direct int64, ok bool) {
	first -= rep.hiddenBefore
	if first < rep.catTok.renderedShare(sent) {
		return 0, false
	}
	return first + rep.catTok.renderedShare(int64(rep.tokIn)-sent), true
}

// passInput returns a passed-through request's input tokens and what
// they would have been direct: its prompt with the client's whole array
// in place of what was forwarded, as for a turn's first call. ok is false
// when its answer's usage was not read, or counts below the gateway's
// count of the tools in the prompt (see turn.inputTokens).
func (rep *report) passInput() (gateway, direct int64, ok bool) {
	if rep.toolsIn == 0 || rep.tokErr != nil || rep.passPrompt <= 0 {
		return 0, 0, false
	}
	direct, ok = rep.directFor(rep.passPrompt, int64(rep.passSent))
	return rep.passPrompt, direct, ok
}

func promptTokens(usage []byte) int64 {
	if len(usage) == 0 {
		return 0
	}
	prompt, _ := rewrite.UsageTokens(gjson.ParseBytes(usage))
	return prompt
}

// cachedInputTokens returns how many of the turn's upstream input tokens
// the upstream reported as served from its prompt cache, summed over the
// calls (usage.prompt_tokens_details.cached_tokens, billed at a fraction
// of the input price); ok is false when it reported none. A turn whose
// tools array changed pays for its whole conversation again: this is
// where that shows.
func (t *turn) cachedInputTokens() (int64, bool) {
	return rewrite.CachedTokens(gjson.ParseBytes(t.usage))
}

// setToolgateHeaders reports what the gateway did, on every rewritten
// response: tools and tool tokens the client sent -> the upstream received
// in the call whose answer the client gets, and the upstream calls so far.
// Once the whole turn's usage is known (non-streamed responses) it adds the
// input tokens: the direct estimate -> the real sum over all calls.
func setToolgateHeaders(h http.Header, t *turn) { setToolgateFields(h, t, !t.req.Stream) }

// toolgateTrailer declares the X-Toolgate-* fields as trailers of a
// streamed response too: its headers leave before the turn's later rounds
// and its usage are known, so the trailers carry the whole turn's numbers
// (set by relay.end once the turn is done; net/http sends a declared
// trailer's value as it is when the handler returns). Declaring them also
// keeps the response chunked, which trailers need, when the whole stream
// fits in the server's buffer. Clients that read trailers (Go's
// resp.Trailer, curl --raw) get the final numbers; the others ignore them.
const toolgateTrailer = "X-Toolgate-Tools, X-Toolgate-Tool-Tokens, X-Toolgate-Rounds, X-Toolgate-Input-Tokens"

// setToolgateFields sets the X-Toolgate-* fields for t as it stands, the
// input tokens only when final (the turn's usage is summed).
func setToolgateFields(h http.Header, t *turn, final bool) {
	rep := t.rep
	if rep == nil || len(rep.rounds) == 0 {
		h.Set("X-Toolgate-Tools", strconv.Itoa(len(t.req.Tools))+"->"+strconv.Itoa(len(t.activeNames())+1))
		h.Set("X-Toolgate-Rounds", strconv.Itoa(len(t.rounds)+1))
		return
	}
	last := rep.rounds[len(rep.rounds)-1]
	h.Set("X-Toolgate-Tools", strconv.Itoa(rep.toolsIn)+"->"+strconv.Itoa(last.tools))
	if rep.tokErr == nil {
		h.Set("X-Toolgate-Tool-Tokens", strconv.Itoa(rep.tokIn)+"->"+strconv.Itoa(last.tokens))
	}
	h.Set("X-Toolgate-Rounds", strconv.Itoa(len(rep.rounds)))
	if final {
		if gw, direct, ok := t.inputTokens(); ok {
			h.Set("X-Toolgate-Input-Tokens", strconv.FormatInt(direct, 10)+"->"+strconv.FormatInt(gw, 10))
		}
	}
}
