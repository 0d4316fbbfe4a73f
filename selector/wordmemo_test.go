package selector

import (
	"sync"
	"testing"
)

// forget drops every remembered word, for benchmarks that measure a cold
// memo.
func (m *wordMemo[V]) forget() { m.lru.Purge() }

func TestWordMemoKeepsWordsInUse(t *testing.T) {
	computed := map[int32]int{}
	compute := func(r int32) func() int32 {
		return func() int32 { computed[r]++; return r * 10 }
	}
	m := newWordMemo[int32](8, nil)
	t.Run("a word's first sighting is only noted", func(t *testing.T) {
		if _, ok := m.get(1, compute(1)); ok || computed[1] != 0 {
			t.Fatalf("first sighting: ok = %v, computed %d times", ok, computed[1])
		}
	})
	t.Run("its second sighting computes the value and later ones reuse it", func(t *testing.T) {
		for range 3 {
			if v, ok := m.get(1, compute(1)); !ok || v != 10 {
				t.Fatalf("get = %d, %v; want 10, true", v, ok)
			}
		}
		if computed[1] != 1 {
			t.Errorf("computed %d times, want once", computed[1])
		}
	})
	t.Run("a word used every few new words is never evicted", func(t *testing.T) {
		for r := int32(100); r < 300; r++ {
			m.get(r, compute(r))
			if r%3 == 0 {
				if _, ok := m.get(1, compute(1)); !ok {
					t.Fatalf("word 1 forgotten after word %d", r)
				}
			}
		}
		if computed[1] != 1 {
			t.Errorf("word 1 computed %d times, want once: it was evicted while in use", computed[1])
		}
	})
	t.Run("a word not used again is evicted once enough others came", func(t *testing.T) {
		if _, ok := m.get(100, compute(100)); ok {
			t.Error("word 100 still remembered after 200 other words in a memo of 8")
		}
	})
}

// TestWordMemoCountsEachWordOnceUnderConcurrentRequests: requests of one
// catalog note and compute the same words at once; the bytes the memo
// counts (which the catalog cache bounds) must stay what its entries hold,
// not grow with every race.
func TestWordMemoCountsEachWordOnceUnderConcurrentRequests(t *testing.T) {
	m := newWordMemo(64, sliceBytes[float32])
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 20000 {
				r := int32((i * 7919) % 97) // 97 words through a 64-word memo
				m.get(r, func() []float32 { return make([]float32, 64) })
			}
		})
	}
	wg.Wait()
	var held int64
	for _, k := range m.lru.Keys() {
		e, _ := m.lru.Peek(k)
		held += memoEntryBytes + m.valueBytes(e)
	}
	if got := m.bytes.Load(); got != held {
		t.Errorf("the memo counts %d bytes, its entries hold %d", got, held)
	}
}
