package selector

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// compileGate counts the compiles a Cache runs through it and holds each
// until open is closed.
type compileGate struct {
	live, peak, runs atomic.Int64
	open             chan struct{}
}

func newCompileGate(c *Cache) *compileGate {
	g := &compileGate{open: make(chan struct{})}
	c.compile = func(ctx context.Context, tools []Tool, cfg Config) (*Catalog, error) {
		l := g.live.Add(1)
		defer g.live.Add(-1)
		for p := g.peak.Load(); l > p && !g.peak.CompareAndSwap(p, l); p = g.peak.Load() {
		}
		g.runs.Add(1)
		<-g.open
		return Compile(ctx, tools, cfg)
	}
	return g
}

// waitFor polls cond for up to a few seconds: the tests synchronise on
// counters, they do not time anything.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func TestCacheBoundsTheCompilesRunningAtOnce(t *testing.T) {
	tools := syntheticTools(50)
	w := compileWeight(tools)
	tests := []struct {
		name     string
		room     int64 // CompileBytes
		slots    int   // Compiles
		gets     int
		wantPeak int64
	}{
		{"eight different catalogs with room for two compile two at a time", 2 * w, -1, 8, 2},
		{"catalogs heavier than the whole room compile one at a time", w / 2, -1, 4, 1},
		{"eight different catalogs with room for all and three slots compile three at a time", -1, 3, 8, 3},
		{"with room for two and three slots, the room decides", 2 * w, 3, 8, 2},
		{"without a bound every catalog compiles at once", -1, -1, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCacheWith(CacheOptions{Catalogs: 16, CompileBytes: tt.room, Compiles: tt.slots, CompileWait: time.Minute})
			gate := newCompileGate(c)
			var builds atomic.Int64
			var wg sync.WaitGroup
			for i := range tt.gets {
				wg.Go(func() {
					_, err := c.Get(context.Background(), fmt.Sprint("k", i), func() ([]Tool, Config) {
						builds.Add(1)
						return syntheticTools(50), Config{}
					})
					if err != nil {
						t.Error(err)
					}
				})
			}
			// Every Get has built its tools and asked for room: the ones
			// admitted are compiling, the others waiting. Those past the
			// bound, had they been let in, would start within this grace.
			waitFor(t, "every get has built its tools", func() bool { return builds.Load() == int64(tt.gets) })
			waitFor(t, "the admitted compiles run", func() bool { return gate.live.Load() >= tt.wantPeak })
			time.Sleep(20 * time.Millisecond)
			close(gate.open)
			wg.Wait()
			if p := gate.peak.Load(); p != tt.wantPeak {
				t.Errorf("at most %d compiles ran at once, want %d", p, tt.wantPeak)
			}
			if r := gate.runs.Load(); r != int64(tt.gets) {
				t.Errorf("%d compiles, want %d", r, tt.gets)
			}
		})
	}
}

// TestASmallCompileDoesNotWaitBehindALargeOneQueuedForRoom: a weighted
// semaphore's strict order made a 50-tool catalog that fit in the free
// half of the room wait for two large compiles (1.9 s in a review's run).
func TestASmallCompileDoesNotWaitBehindALargeOneQueuedForRoom(t *testing.T) {
	small := syntheticTools(50)
	w := compileWeight(small)
	large := func(name string) []Tool {
		return []Tool{{Name: name, Description: strings.Repeat("word ", int(4*w)/5)}}
	}
	c := NewCacheWith(CacheOptions{Catalogs: 16, CompileBytes: 4 * w, Compiles: -1, CompileWait: time.Minute})
	gate := newCompileGate(c)
	get := func(key string, tools []Tool) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Get(context.Background(), key, func() ([]Tool, Config) { return tools, Config{} })
			done <- err
		}()
		return done
	}
	first := get("half", []Tool{{Name: "half", Description: strings.Repeat("word ", int(2*w)/5)}})
	waitFor(t, "the first large compile runs", func() bool { return gate.live.Load() == 1 })
	whole := get("whole", large("whole"))
	waitFor(t, "the whole-room compile queues", func() bool {
		c.queue.mu.Lock()
		defer c.queue.mu.Unlock()
		return len(c.queue.queue) == 1
	})
	third := get("small", small)
	waitFor(t, "the small compile runs beside the first", func() bool { return gate.live.Load() == 2 })
	close(gate.open)
	for _, done := range []<-chan error{first, whole, third} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestATenantsFirstCatalogCompilesBeforeAnotherTenantsNext: with one
// compile slot, a tenant that has compiled goes after one that has not,
// whatever order they asked in.
func TestATenantsFirstCatalogCompilesBeforeAnotherTenantsNext(t *testing.T) {
	c := NewCacheWith(CacheOptions{Catalogs: 16, Compiles: 1, CompileWait: time.Minute})
	open := make(chan struct{})
	var mu sync.Mutex
	var order []int
	c.compile = func(ctx context.Context, tools []Tool, cfg Config) (*Catalog, error) {
		mu.Lock()
		order = append(order, len(tools))
		mu.Unlock()
		<-open
		return Compile(ctx, tools, cfg)
	}
	started := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(order)
	}
	var wg sync.WaitGroup
	get := func(tenant string, n int) {
		wg.Go(func() {
			if _, err := c.GetFor(context.Background(), tenant, fmt.Sprint("k", n), func() ([]Tool, Config) { return syntheticTools(n), Config{} }); err != nil {
				t.Error(err)
			}
		})
	}
	get("busy", 10)
	waitFor(t, "the busy tenant's first compile runs", func() bool { return started() == 1 })
	get("busy", 11)
	waitFor(t, "the busy tenant's second compile queues", func() bool {
		c.queue.mu.Lock()
		defer c.queue.mu.Unlock()
		return len(c.queue.queue) == 1
	})
	get("quiet", 12)
	waitFor(t, "the quiet tenant's compile queues", func() bool {
		c.queue.mu.Lock()
		defer c.queue.mu.Unlock()
		return len(c.queue.queue) == 2
	})
	close(open)
	wg.Wait()
	if want := []int{10, 12, 11}; !slices.Equal(order, want) {
		t.Errorf("compiled in the order %v (tools), want %v: the quiet tenant's first before the busy one's second", order, want)
	}
}

// TestAGetWaitsForRoomNoLongerThanTheWaitWhenItsStarterLeaves: a Get
// that joined a compile whose starter left waits for room in its own
// name, with what is left of its wait, not a whole new one.
func TestAGetWaitsForRoomNoLongerThanTheWaitWhenItsStarterLeaves(t *testing.T) {
	const wait = time.Second
	c := NewCacheWith(CacheOptions{Catalogs: 16, Compiles: 1, CompileWait: wait})
	block := make(chan struct{})
	c.compile = func(ctx context.Context, tools []Tool, cfg Config) (*Catalog, error) {
		if len(tools) == 5 {
			<-block
		}
		return Compile(ctx, tools, cfg)
	}
	defer close(block)
	go func() {
		_, _ = c.GetFor(context.Background(), "x", "blocker", func() ([]Tool, Config) { return syntheticTools(5), Config{} })
	}()
	waitFor(t, "the blocking compile runs", func() bool {
		c.queue.mu.Lock()
		defer c.queue.mu.Unlock()
		return c.queue.running == 1
	})
	starter, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	go func() {
		_, _ = c.GetFor(starter, "a", "k", func() ([]Tool, Config) { return syntheticTools(20), Config{} })
	}()
	waitFor(t, "the starter waits for room", func() bool {
		c.queue.mu.Lock()
		defer c.queue.mu.Unlock()
		return len(c.queue.queue) == 1
	})
	t0 := time.Now()
	_, err := c.GetFor(context.Background(), "b", "k", func() ([]Tool, Config) { return syntheticTools(20), Config{} })
	took := time.Since(t0)
	if !errors.Is(err, ErrCompileBusy) || took > wait+350*time.Millisecond {
		t.Errorf("the Get that joined got %v after %v; want ErrCompileBusy after the wait, %v (its starter left after 700ms)", err, took.Round(time.Millisecond), wait)
	}
}

func TestCacheGivesUpWhenThereIsNoRoomToCompile(t *testing.T) {
	tools := syntheticTools(50)
	w := compileWeight(tools)
	build := func() ([]Tool, Config) { return syntheticTools(50), Config{} }
	// hold starts a compile of "held" that takes the whole room until the
	// returned func lets it finish.
	hold := func(t *testing.T, c *Cache) (finish func()) {
		gate := newCompileGate(c)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := c.Get(context.Background(), "held", build); err != nil {
				t.Error(err)
			}
		}()
		waitFor(t, "the held compile runs", func() bool { return gate.live.Load() == 1 })
		return func() { close(gate.open); <-done }
	}
	t.Run("a get that finds no room within the wait fails with ErrCompileBusy and compiles nothing", func(t *testing.T) {
		c := NewCacheWith(CacheOptions{CompileBytes: w, CompileWait: 10 * time.Millisecond})
		finish := hold(t, c)
		defer finish()
		_, err := c.Get(context.Background(), "other", build)
		if !errors.Is(err, ErrCompileBusy) {
			t.Fatalf("err = %v, want ErrCompileBusy", err)
		}
		if s := c.Stats(); s.Refused != 1 || s.Len != 0 {
			t.Errorf("stats %+v, want 1 refused and nothing cached yet", s)
		}
	})
	t.Run("a get whose ctx ends while it waits for room stops waiting with its ctx's error", func(t *testing.T) {
		c := NewCacheWith(CacheOptions{CompileBytes: w, CompileWait: time.Minute})
		finish := hold(t, c)
		defer finish()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := c.Get(ctx, "other", build)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrCompileBusy) {
			t.Errorf("err = %v, want the ctx's deadline", err)
		}
	})
	t.Run("gets that joined a compile whose starter left still get the catalog", func(t *testing.T) {
		c := NewCacheWith(CacheOptions{CompileBytes: w, CompileWait: time.Minute})
		finish := hold(t, c)
		var builds atomic.Int64
		counted := func() ([]Tool, Config) { builds.Add(1); return build() }
		ctx, cancel := context.WithCancel(context.Background())
		starter := make(chan error, 1)
		go func() { _, err := c.Get(ctx, "shared", counted); starter <- err }()
		waitFor(t, "the starter waits for room", func() bool { return builds.Load() == 1 })
		joined := make(chan error, 1)
		go func() { _, err := c.Get(context.Background(), "shared", counted); joined <- err }()
		waitFor(t, "the second get asked", func() bool { return c.Stats().Misses == 3 })
		time.Sleep(10 * time.Millisecond) // into the shared flight
		cancel()
		if err := <-starter; !errors.Is(err, context.Canceled) {
			t.Errorf("the starter's err = %v, want context.Canceled", err)
		}
		finish()
		if err := <-joined; err != nil {
			t.Errorf("the get that joined failed: %v", err)
		}
		if _, err := c.Get(context.Background(), "shared", build); err != nil || c.Stats().Hits != 1 {
			t.Errorf("shared is not cached: %v, %+v", err, c.Stats())
		}
	})
}

// BenchmarkFreshCatalogsAtOnce compiles eight catalogs no cache holds,
// all at once, as eight clients that each send a new 2,048-tool catalog
// of some 2 MB of text: peak-heap-MB is the heap in use at its highest
// (sampled every 10 ms), with the default compile room and without one.
func BenchmarkFreshCatalogsAtOnce(b *testing.B) {
	const n, size = 8, 2048
	cats := make([][]Tool, n)
	for i := range cats {
		cats[i] = syntheticTools(size)
		for j := range cats[i] {
			t := &cats[i][j]
			t.Name = fmt.Sprintf("%s_r%d", t.Name, i)
			for len(t.Description) < 1000 {
				t.Description += fmt.Sprintf(" token%d_%d", i, len(t.Description)+j)
			}
		}
	}
	for _, room := range []struct {
		name  string
		bytes int64
	}{{"room=default", 0}, {"room=none", -1}} {
		b.Run(room.name, func(b *testing.B) {
			var peak uint64
			for b.Loop() {
				c := NewCacheWith(CacheOptions{CompileBytes: room.bytes, CompileWait: time.Minute})
				runtime.GC()
				stop := make(chan struct{})
				sampled := make(chan uint64)
				go func() {
					var ms runtime.MemStats
					var top uint64
					for {
						runtime.ReadMemStats(&ms)
						top = max(top, ms.HeapInuse)
						select {
						case <-stop:
							sampled <- top
							return
						case <-time.After(10 * time.Millisecond):
						}
					}
				}()
				var wg sync.WaitGroup
				for i := range cats {
					wg.Go(func() {
						tools := slices.Clone(cats[i])
						if _, err := c.Get(context.Background(), fmt.Sprint(i), func() ([]Tool, Config) { return tools, Config{} }); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				close(stop)
				peak = max(peak, <-sampled)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}
