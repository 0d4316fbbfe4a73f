package proxy

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tiktoken-go/tokenizer"

	"github.com/toolgate/toolgate/rewrite"
)

// A round's tools are counted by their positions in the client's catalog,
// never re-hashed: each position must give exactly what counting the same
// text does, whichever tools the round sends and in whatever order, with
// or without tool_search, compact or indented.
// mixedTools returns testCatalog(n) as parsed tools, those at the
// positions indented picks indented as a pretty-printing client sends
// them, the others compact: their separators count differently.
func mixedTools(n int, indented func(i int) bool) []rewrite.Tool {
	var tools []rewrite.Tool
	for i, tl := range testCatalog(n) {
		var raw []byte
		if indented(i) {
			raw, _ = json.MarshalIndent(tl, "", "  ")
		} else {
			raw, _ = json.Marshal(tl)
		}
		tools = append(tools, rewrite.Tool{Name: tl["function"].(map[string]any)["name"].(string), Raw: string(raw)})
	}
	return tools
}

func TestRoundTokensByPositionMatchCountingTheText(t *testing.T) {
	const searchDef = `{"type":"function","function":{"name":"tool_search","description":"Find tools by what they do.","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}`
	tools := mixedTools(40, func(i int) bool { return i%3 == 0 })
	rounds := []struct {
		name string
		pos  []int
	}{
		{"the first tools in order count as their text does", []int{0, 1, 2, 3}},
		{"the last tools out of order count as their text does", []int{39, 12, 38, 0, 27}},
		{"tool_search and one tool count as their text does", []int{-1, 17}},
		{"tool_search alone counts as its text does", []int{-1}},
		{"tool_search and indented tools count as their text does", []int{-1, 3, 6, 9, 30}},
	}
	for _, enc := range []tokenizer.Encoding{encO200k, encCl100k} {
		c := newTokenCounter()
		ct, err := c.catalog(enc, "k", "", tools)
		if err != nil {
			t.Fatal(err)
		}
		for _, rd := range rounds {
			t.Run("in "+string(enc)+", "+rd.name, func(t *testing.T) {
				raws := make([]string, len(rd.pos))
				want := 0
				for i, p := range rd.pos {
					raws[i] = searchDef
					if p >= 0 {
						raws[i] = tools[p].Raw
					}
					n, err := newTokenCounter().tool(enc, raws[i])
					if err != nil {
						t.Fatal(err)
					}
					want += n + boundary(enc, i, raws[i])
				}
				got, err := c.round(enc, ct, raws, rd.pos)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("counted %d tokens by position, %d by text", got, want)
				}
				if !strings.Contains(raws[len(raws)-1], "function") || want < 10*len(raws) {
					t.Errorf("a round of %d tools counts %d tokens: the tools are not real", len(raws), want)
				}
			})
		}
	}
}

func TestTheDirectEstimateIsLeftOutWhenTheUpstreamCountsOtherwise(t *testing.T) {
	tests := []struct {
		name       string
		usage      string
		rounds     []roundNote
		tokIn      int
		wantOK     bool
		wantDirect int64
	}{
		{"one call: its prompt with the client's tools for the gateway's", `{"prompt_tokens":1000}`, []roundNote{{tokens: 300}}, 5000, true, 5700},
		{"two calls: the first call's prompt stands for the turn", `{"prompt_tokens":2100}`, []roundNote{{tokens: 300}, {tokens: 400, promptBefore: 1000}}, 5000, true, 5700},
		{"an upstream that counts fewer tokens than the tools it was sent gives no estimate", `{"prompt_tokens":1}`, []roundNote{{tokens: 300}}, 200, false, 0},
		{"an upstream that reports no usage gives no estimate", `{}`, []roundNote{{tokens: 300}}, 5000, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := &turn{usage: []byte(tt.usage), rep: &report{rounds: tt.rounds, tokIn: tt.tokIn}}
			_, direct, ok := tn.inputTokens()
			if ok != tt.wantOK || direct != tt.wantDirect {
				t.Errorf("direct %d, ok %v; want %d, %v", direct, ok, tt.wantDirect, tt.wantOK)
			}
		})
	}
}

// countingCodec is a codec that adds up the bytes it is asked to count.
type countingCodec struct {
	tokenizer.Codec
	bytes *int
}

func (c countingCodec) Count(s string) (int, error) {
	*c.bytes += len(s)
	return c.Codec.Count(s)
}

func TestAToolsTokensAreCountedFromAtMostItsFirst16KB(t *testing.T) {
	tool := func(name string, desc int) rewrite.Tool {
		raw := `{"type":"function","function":{"name":"` + name + `","description":"` + strings.Repeat("Reads the file. ", desc/16) + `","parameters":{"type":"object","properties":{}}}}`
		return rewrite.Tool{Name: name, Raw: raw}
	}
	for _, tc := range []struct {
		name      string
		tool      rewrite.Tool
		estimated bool
	}{
		{"a tool of a few KB is counted exactly", tool("small", 3<<10), false},
		{"a tool of 16 KB and more is counted from its first 16 KB", tool("large", 256<<10), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exact, err := newTokenCounter().text(encO200k, tc.tool.Raw)
			if err != nil {
				t.Fatal(err)
			}
			counted := 0
			c := newTokenCounter()
			c.o200k = func() (tokenizer.Codec, error) {
				cd, err := tokenizer.Get(encO200k)
				return countingCodec{cd, &counted}, err
			}
			ct, err := c.catalog(encO200k, "k", "", []rewrite.Tool{tc.tool})
			if err != nil {
				t.Fatal(err)
			}
			if ct.estimated != tc.estimated {
				t.Errorf("estimated %v, want %v", ct.estimated, tc.estimated)
			}
			// The JSON text and the rendered declaration, each once.
			if limit := 2 * min(len(tc.tool.Raw), maxCountedText); counted > limit {
				t.Errorf("tokenized %d bytes of a %d-byte tool, want at most %d", counted, len(tc.tool.Raw), limit)
			}
			n := ct.per[0]
			if !tc.estimated && n != exact {
				t.Errorf("counted %d tokens, the tokenizer counts %d", n, exact)
			}
			if tc.estimated && (n < exact*95/100 || n > exact*105/100) {
				t.Errorf("estimated %d tokens, more than 5%% off the %d the tokenizer counts", n, exact)
			}
		})
	}
}

// blockingCodec blocks its first Count until release closes, and counts
// its calls.
type blockingCodec struct {
	tokenizer.Codec
	started chan struct{}
	release chan struct{}
	calls   *atomic.Int32
}

func (c blockingCodec) Count(s string) (int, error) {
	if c.calls.Add(1) == 1 {
		close(c.started)
		<-c.release
	}
	return c.Codec.Count(s)
}

// panickingCodec panics on every Count.
type panickingCodec struct{ tokenizer.Codec }

func (panickingCodec) Count(string) (int, error) { panic("tokenizer broke") }

// TestACatalogIsCountedOnceHoweverManyTurnsAskAtOnce: a new catalog's
// count runs beside its compile (newTurn) and again in the turn's report;
// the second asker waits for the first count instead of counting again,
// and a count that panics releases its waiters with an error.
func TestACatalogIsCountedOnceHoweverManyTurnsAskAtOnce(t *testing.T) {
	base, err := tokenizer.Get(encO200k)
	if err != nil {
		t.Fatal(err)
	}
	tools := []rewrite.Tool{
		{Name: "a", Raw: `{"type":"function","function":{"name":"a","description":"Read a file."}}`},
		{Name: "b", Raw: `{"type":"function","function":{"name":"b","description":"Send a message."}}`},
	}
	t.Run("a second asker waits for the first count and gets its result", func(t *testing.T) {
		var calls atomic.Int32
		bc := blockingCodec{Codec: base, started: make(chan struct{}), release: make(chan struct{}), calls: &calls}
		c := newTokenCounter()
		c.o200k = func() (tokenizer.Codec, error) { return bc, nil }
		first := make(chan *catalogTokens)
		go func() {
			ct, _ := c.catalog(encO200k, "k", "", tools)
			first <- ct
		}()
		<-bc.started
		second := make(chan *catalogTokens)
		go func() {
			ct, _ := c.catalog(encO200k, "k", "", tools)
			second <- ct
		}()
		select {
		case <-second:
			t.Fatal("the second asker returned while the first count was under way: it counted again")
		case <-time.After(100 * time.Millisecond):
		}
		close(bc.release)
		a, b := <-first, <-second
		if a == nil || a != b {
			t.Fatalf("counts %p and %p, want one shared count", a, b)
		}
		if n := calls.Load(); n != int32(2*len(tools)) { // each tool's JSON text and its rendered form
			t.Errorf("%d texts counted, want %d", n, 2*len(tools))
		}
	})
	t.Run("a count that panics is an error and a later turn counts again", func(t *testing.T) {
		c := newTokenCounter()
		c.o200k = func() (tokenizer.Codec, error) { return panickingCodec{base}, nil }
		if _, err := c.catalog(encO200k, "k", "", tools); err == nil || !strings.Contains(err.Error(), "tokenizer broke") {
			t.Fatalf("err = %v, want the panic as an error", err)
		}
		c.o200k = func() (tokenizer.Codec, error) { return base, nil }
		if ct, err := c.catalog(encO200k, "k", "", tools); err != nil || ct == nil || ct.total == 0 {
			t.Fatalf("after a failed count: %+v, %v; want a count", ct, err)
		}
	})
}
