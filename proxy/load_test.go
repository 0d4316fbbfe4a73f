package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/toolgate/toolgate/internal/fakellm"
)

// episodeSteps are the step lists episodes rotate through; every tool is in
// testCatalog and every query finds it.
var episodeSteps = [][]fakellm.Step{
	{{Tool: "repo_create_issue", Query: "create issue repository"}, {Tool: "chat_post_message", Query: "send message chat channel"}},
	{{Tool: "chat_post_message", Query: "send message chat channel"}},
	{{Tool: "mail_send", Query: "send email"}},
	{{Tool: "calendar_create_event", Query: "create calendar event"}},
	{{Tool: "repo_create_issue", Query: "create issue repository"}},
}

// episodeTask is task i: its own prompt, its own arguments and its own
// answer, so an answer that reaches the wrong client shows.
func episodeTask(i int) fakellm.Task {
	steps := append([]fakellm.Step(nil), episodeSteps[i%len(episodeSteps)]...)
	for j := range steps {
		steps[j].Args = json.RawMessage(fmt.Sprintf(`{"id":"ep-%d-%d"}`, i, j))
	}
	return fakellm.Task{
		Name:   fmt.Sprintf("episode %d", i),
		Prompt: fmt.Sprintf("Episode %d: please take care of the usual chores.", i),
		Steps:  steps,
		Answer: fmt.Sprintf("Episode %d is done.", i),
	}
}

func newEpisodeModel(n int) *fakellm.Model {
	m := &fakellm.Model{MaxTools: 40}
	for i := 0; i < n; i++ {
		m.Tasks = append(m.Tasks, episodeTask(i))
	}
	return m
}

// episode is what one agent saw: its calls (name and arguments) and its
// final answer.
type episode struct {
	calls  []string
	answer string
}

// runEpisode plays an unchanged agent until it gets text, like runAgent but
// safe to run on many goroutines: it returns errors instead of failing t
// (readStream only fails t on a read error, which a bytes.Reader never has).
func runEpisode(t *testing.T, ctx context.Context, client *http.Client, base string, task fakellm.Task, tools []map[string]any, stream bool, hdr map[string]string) (episode, error) {
	msgs := []map[string]any{{"role": "system", "content": "You are an agent."}, {"role": "user", "content": task.Prompt}}
	var ep episode
	for turn := 0; turn < 8; turn++ {
		body, err := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": tools, "stream": stream})
		if err != nil {
			return ep, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return ep, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return ep, err
		}
		if resp.StatusCode != http.StatusOK {
			return ep, fmt.Errorf("turn %d: status %d: %s", turn, resp.StatusCode, b)
		}
		var content string
		type call struct{ id, name, args string }
		var calls []call
		if stream {
			rep := readStream(t, bytes.NewReader(b))
			if rep.dones != 1 || rep.errorEvent || len(rep.finishes) != 1 {
				return ep, fmt.Errorf("turn %d: stream with %d [DONE], error event %v, finishes %v", turn, rep.dones, rep.errorEvent, rep.finishes)
			}
			content = rep.content
			for _, c := range rep.calls {
				calls = append(calls, call{c.Get("id").String(), c.Get("name").String(), c.Get("arguments").String()})
			}
		} else {
			msg := gjson.GetBytes(b, "choices.0.message")
			content = msg.Get("content").String()
			msg.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
				calls = append(calls, call{c.Get("id").String(), c.Get("function.name").String(), c.Get("function.arguments").String()})
				return true
			})
		}
		if len(calls) == 0 {
			ep.answer = content
			return ep, nil
		}
		var tcs []map[string]any
		for _, c := range calls {
			ep.calls = append(ep.calls, c.name+c.args)
			tcs = append(tcs, map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": tcs})
		for _, c := range calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.id, "content": `{"ok":true}`})
		}
	}
	return ep, errors.New("no answer after 8 turns")
}

// wantEpisode says what episode i must have seen.
func wantEpisode(task fakellm.Task) episode {
	var ep episode
	for _, s := range task.Steps {
		ep.calls = append(ep.calls, s.Tool+string(s.Args))
	}
	ep.answer = task.Answer
	return ep
}

func newLoadClient() (*http.Client, *http.Transport) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr}, tr
}

func TestTwoHundredConcurrentEpisodesEachGetTheirOwnAnswer(t *testing.T) {
	const n = 200
	model := newEpisodeModel(n)
	upstream := http.DefaultTransport.(*http.Transport).Clone()
	upstream.MaxIdleConnsPerHost = 256
	base := newTestGateway(t, model, func(g *Gateway) { g.Transport = upstream })
	client, tr := newLoadClient()
	defer tr.CloseIdleConnections()
	tools := testCatalog(30)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := model.Tasks[i]
			hdr := map[string]string{
				"Authorization": fmt.Sprintf("Bearer sk-tenant-%d", i%7),
				"X-Session-ID":  fmt.Sprintf("session-%d", i%13), // shared within a tenant on purpose
			}
			got, err := runEpisode(t, context.Background(), client, base, task, tools, i%2 == 0, hdr)
			want := wantEpisode(task)
			switch {
			case err != nil:
				errs[i] = err
			case got.answer != want.answer || strings.Join(got.calls, "|") != strings.Join(want.calls, "|"):
				errs[i] = fmt.Errorf("got calls %v and answer %q; want %v and %q", got.calls, got.answer, want.calls, want.answer)
			}
		}()
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("episode %d (stream=%v): %v", i, i%2 == 0, err)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d episodes failed", failed, n)
	}
	resp, err := client.Get(strings.TrimSuffix(base, "/v1") + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz answered %d after the episodes; want 200", resp.StatusCode)
	}
}

// TestLoad sends rounds of concurrent requests, streamed and not, some
// abandoned by their clients mid-way, and checks that every request that was
// not abandoned got its answer, and that goroutines and the heap do not grow
// from round to round.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped in -short")
	}
	rounds, perRound, workers := 6, 1500, 64
	if raceDetector {
		perRound = 300 // the race detector slows every request several times
	}
	const tasks = 40
	model := newEpisodeModel(tasks)
	model.ChunkDelay = time.Millisecond
	upstream := http.DefaultTransport.(*http.Transport).Clone()
	upstream.MaxIdleConnsPerHost = 256
	base := newTestGateway(t, model, func(g *Gateway) { g.Transport = upstream })
	client, tr := newLoadClient()
	tools := testCatalog(30)
	rng := rand.New(rand.NewPCG(1, 2))
	var goroutines []int
	var heaps []uint64
	start := time.Now()
	for round := 0; round < rounds; round++ {
		jobs := make(chan int)
		var failed, cancelled, ok atomic.Int32
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range jobs {
					task := model.Tasks[j%tasks]
					ctx, cancel := context.WithCancel(context.Background())
					abandon := j%10 == 3
					if abandon {
						time.AfterFunc(time.Duration(j%7)*time.Millisecond, cancel)
					}
					hdr := map[string]string{"Authorization": fmt.Sprintf("Bearer sk-%d", j%5)}
					got, err := runEpisode(t, ctx, client, base, task, tools, j%2 == 0, hdr)
					cancel()
					switch {
					case abandon:
						cancelled.Add(1)
					case err != nil:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					case got.answer != task.Answer:
						failed.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Errorf("answer %q, want %q", got.answer, task.Answer))
					default:
						ok.Add(1)
					}
				}
			}()
		}
		for j := 0; j < perRound; j++ {
			jobs <- rng.IntN(1 << 20)
		}
		close(jobs)
		wg.Wait()
		if failed.Load() > 0 {
			t.Fatalf("round %d: %d of %d requests failed; first: %v", round, failed.Load(), perRound, firstErr.Load())
		}
		tr.CloseIdleConnections()
		upstream.CloseIdleConnections()
		model.Reset() // the fake model keeps a record per request; the gateway must not
		g, h := settle()
		goroutines, heaps = append(goroutines, g), append(heaps, h)
		t.Logf("round %d: %d episodes ok, %d abandoned, %d goroutines, heap %.1f MiB, %s", round, ok.Load(), cancelled.Load(), g, float64(h)/(1<<20), time.Since(start).Round(time.Millisecond))
	}
	// Round 0 warms the caches; from round 1 on nothing may grow.
	if last := goroutines[len(goroutines)-1]; last > goroutines[1]+10 {
		t.Errorf("goroutines grew from %d to %d over the rounds: %v", goroutines[1], last, goroutines)
	}
	if last := heaps[len(heaps)-1]; last > heaps[1]+heaps[1]/2+8<<20 {
		t.Errorf("the heap grew from %d to %d bytes over the rounds: %v", heaps[1], last, heaps)
	}
}

// settle waits for goroutines to wind down and returns their number and
// the live heap after a GC.
func settle() (int, uint64) {
	n := runtime.NumGoroutine()
	for i := 0; i < 50; i++ {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n && i > 5 {
			break
		}
		n = m
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return runtime.NumGoroutine(), ms.HeapAlloc
}
