package selector

import (
	"context"
	"testing"
	"time"
)

func TestAnEmbedBudgetBoundsTheQueriesOfARequestTogether(t *testing.T) {
	// Every query's answer takes slow: slower than usual, yet it never
	// fails, so an embeddings client would never cool down.
	const slow = 150 * time.Millisecond
	queries := []string{"merge pull request", "read a file", "send a message", "create an issue"}
	tests := []struct {
		name               string
		budget             *EmbedBudget
		minCalls, maxCalls int32
	}{
		{"without a budget each of four searches waits for a query of its own", nil, 4, 4},
		{"with a budget under two queries' time four searches wait for two at most", NewEmbedBudget(slow * 5 / 3), 1, 2},
		{"with the budget spent no query is sent and the searches still answer", NewEmbedBudget(0), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &lettersEmbedder{queryDelay: slow}
			c := compileTest(t, testTools(t), Config{Embedder: e})
			waitRemote(t, c)
			for _, q := range queries {
				res, err := c.Search(context.Background(), Query{Text: q, EmbedBudget: tt.budget})
				if err != nil || len(res.Items) == 0 {
					t.Fatalf("Search(%q) = %v, %v", q, res.Items, err)
				}
			}
			if n := e.queries.Load(); n < tt.minCalls || n > tt.maxCalls {
				t.Errorf("%d query calls, want %d to %d", n, tt.minCalls, tt.maxCalls)
			}
		})
	}
}
