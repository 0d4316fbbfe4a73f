package proxy

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/tidwall/gjson"
)

// BenchmarkTurnReordered200Tools is BenchmarkChatTurn200Tools's new turn
// with its tools array in a new order every time, as a client that builds
// it by map iteration sends it: the parse misses (its cache is keyed by
// the text), the catalog must not.
//
// Measured (two test binaries alternated six times, 100 turns each, on
// the shared 2-core VM, medians): 22.2 ms, 12.0 MB and 109,600
// allocations a turn when each order compiled its catalog (18.9-25.5 ms),
// 2.85 ms, 1.26 MB and 618 allocations since every order shares one
// (2.29-3.37 ms): what is left is mostly the parse of a text the parse
// cache has not seen, and keeping it there.
func BenchmarkTurnReordered200Tools(b *testing.B) {
	g, bodies := benchGateway(b, 200)
	serve := benchServe(b, g.Handler(), "/v1/chat/completions", "bench")
	serve(bodies[0])
	perms := newPermuter(b, bodies)
	b.Run("new order each turn", func(b *testing.B) {
		b.SetBytes(int64(len(bodies[0])))
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			body := perms.next()
			b.StartTimer()
			serve(body)
		}
	})
}

// permuter makes request bodies whose tools array is a new random order
// of the same tools each time, the user's message rotating.
type permuter struct {
	heads, tails [][]byte // each body's text before and after its tools array
	tools        [][]byte
	r            *rand.Rand
	i            int
}

func newPermuter(tb testing.TB, bodies [][]byte) *permuter {
	tb.Helper()
	p := &permuter{r: rand.New(rand.NewPCG(1, 2))}
	for _, body := range bodies {
		arr := gjson.GetBytes(body, "tools")
		if !arr.IsArray() {
			tb.Fatal("a body without a tools array")
		}
		p.heads = append(p.heads, body[:arr.Index])
		p.tails = append(p.tails, body[arr.Index+len(arr.Raw):])
	}
	for _, t := range gjson.GetBytes(bodies[0], "tools").Array() {
		p.tools = append(p.tools, []byte(t.Raw))
	}
	return p
}

// next returns the next body: the next user message, the tools shuffled.
func (p *permuter) next() []byte {
	p.r.Shuffle(len(p.tools), func(i, j int) { p.tools[i], p.tools[j] = p.tools[j], p.tools[i] })
	k := p.i % len(p.heads)
	p.i++
	var buf bytes.Buffer
	buf.Write(p.heads[k])
	buf.WriteByte('[')
	buf.Write(bytes.Join(p.tools, []byte(",")))
	buf.WriteByte(']')
	buf.Write(p.tails[k])
	return buf.Bytes()
}
