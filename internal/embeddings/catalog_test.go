package embeddings

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/selector"
)

// TestAHangingEndpointHoldsUpASearchOnce: under a selector catalog, a
// query whose endpoint hangs keeps a search waiting for the query timeout,
// not longer, and the turn's next search for the same text does not wait
// on the endpoint again.
func TestAHangingEndpointHoldsUpASearchOnce(t *testing.T) {
	var queries atomic.Int32
	f := newFakeEndpoint(t, func(texts []string) fakeAnswer {
		if len(texts) > 1 {
			return letters(26)(texts) // the catalog's batch
		}
		queries.Add(1)
		return fakeAnswer{block: make(chan struct{})} // hangs until the client leaves
	})
	e, err := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, Model: "m", QueryTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tools := []selector.Tool{
		{Name: "merge_pull_request", Description: "Merge a pull request into its base branch."},
		{Name: "create_issue", Description: "Open a new issue in a repository."},
		{Name: "read_file", Description: "Read a file from the workspace."},
		{Name: "send_message", Description: "Post a message to a chat channel."},
	}
	ctx := context.Background()
	cat, err := selector.Compile(ctx, tools, selector.Config{Embedder: e})
	if err != nil {
		t.Fatal(err)
	}
	search := func(t *testing.T) time.Duration {
		t.Helper()
		start := time.Now()
		res, err := cat.Search(ctx, selector.Query{Text: "merge pull request"})
		if err != nil || len(res.Items) == 0 {
			t.Fatalf("Search = %v, %v", res.Items, err)
		}
		return time.Since(start)
	}
	// The catalog's vectors arrive in the background, and a search asks
	// for its query's vector only once they are in: search until one
	// does.
	var first time.Duration
	for deadline := time.Now().Add(5 * time.Second); queries.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no search ever asked for its query's vector")
		}
		first = search(t)
	}
	t.Run("a search with a hanging endpoint answers after the query timeout", func(t *testing.T) {
		if first > time.Second {
			t.Errorf("search took %v, want at most 1s", first)
		}
	})
	t.Run("the turn's second search for the same text does not wait on the endpoint again", func(t *testing.T) {
		if d := search(t); d > 100*time.Millisecond {
			t.Errorf("search took %v, want at most 100ms", d)
		}
		if got := queries.Load(); got != 1 {
			t.Errorf("%d query calls, want 1", got)
		}
	})
}
