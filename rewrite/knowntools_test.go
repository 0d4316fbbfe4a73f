package rewrite

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// mapCache is a ToolCache for tests: exact text to parsed tools, looked
// up by trying every entry as a prefix.
type mapCache struct {
	mu sync.Mutex
	m  map[string][]Tool
}

func (c *mapCache) Lookup(s string) (KnownTools, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for raw, tools := range c.m {
		if strings.HasPrefix(s, raw) {
			return KnownTools{Raw: raw, Tools: tools, Key: uint64(len(raw))}, true
		}
	}
	return KnownTools{}, false
}

func (c *mapCache) Add(raw string, tools []Tool) KnownTools {
	c.mu.Lock()
	defer c.mu.Unlock()
	own := strings.Clone(raw)
	c.m[own] = tools
	return KnownTools{Raw: own, Tools: tools, Key: uint64(len(raw))}
}

func (c *mapCache) has(raw string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[raw]
	return ok
}

func bigTools(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"function","function":{"name":"tool_` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `","description":"Does thing number ` + strings.Repeat("y", 40) + `","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}`)
	}
	b.WriteByte(']')
	return b.String()
}

// TestAResentCatalogIsValidatedOnceAndReadTheSame: the fast path for a
// cached tools array must read what the full parse reads, and must still
// refuse a body whose other parts are bad.
func TestAResentCatalogIsValidatedOnceAndReadTheSame(t *testing.T) {
	tools := bigTools(60)
	good := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"hello"}],"tools":` + tools + `,"stream":true}`
	cache := &mapCache{m: map[string][]Tool{}}
	if _, err := ParseRequestCached([]byte(good), cache); err != nil {
		t.Fatal(err)
	}
	if !cache.has(tools) {
		t.Fatal("the first parse did not fill the cache")
	}
	t.Run("a resent catalog reads the same as a full parse", func(t *testing.T) {
		fast, err := ParseRequestCached([]byte(good), cache)
		if err != nil {
			t.Fatal(err)
		}
		full, err := ParseRequest([]byte(good))
		if err != nil {
			t.Fatal(err)
		}
		if len(fast.Tools) != len(full.Tools) || fast.ToolsRaw.Index != full.ToolsRaw.Index || fast.ToolsRaw.Raw != full.ToolsRaw.Raw ||
			fast.LastUser != full.LastUser || fast.System != full.System || fast.Stream != full.Stream || string(fast.Original()) != good {
			t.Errorf("fast path read %+v, full parse %+v", fast, full)
		}
		if !fast.Detached() || full.Detached() || fast.ToolsKey == 0 {
			t.Errorf("detached: fast %v, full %v; key %d", fast.Detached(), full.Detached(), fast.ToolsKey)
		}
		for _, tools := range [][]string{{searchDef}, nil} {
			a, errA := Chat{}.Build(fast, tools, nil)
			b, errB := Chat{}.Build(full, tools, nil)
			if errA != nil || errB != nil || string(a) != string(b) {
				t.Errorf("Chat.Build(%d tools): fast path wrote %q (%v), full parse %q (%v)", len(tools), a, errA, b, errB)
			}
		}
	})
	t.Run("nothing the fast path returns aliases the body it parsed", func(t *testing.T) {
		body := []byte(good)
		fast, err := ParseRequestCached(body, cache)
		if err != nil {
			t.Fatal(err)
		}
		for i := range body {
			body[i] = 'x'
		}
		if string(fast.Original()) != good || fast.LastUser != "hello" || fast.Tools[0].Name != "tool_aa" {
			t.Errorf("the request changed with its body: user %q, first tool %q", fast.LastUser, fast.Tools[0].Name)
		}
	})
	for _, tc := range []struct {
		name, body string
	}{
		{"bad JSON outside the catalog is still refused", `{"model":"m","messages":[{"role":"user","content":"hi"],"tools":` + tools + `}`},
		{"invalid UTF-8 outside the catalog is still refused", "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}],\"tools\":" + tools + `}`},
		{"deep nesting outside the catalog is still refused", `{"model":"m","messages":[],"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `,"tools":` + tools + `}`},
		{"missing messages is still refused", `{"model":"m","tools":` + tools + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseRequestCached([]byte(tc.body), cache); !errors.Is(err, ErrBadRequest) {
				t.Errorf("err = %v, want ErrBadRequest", err)
			}
		})
	}
	t.Run("a catalog that differs from the cached one by a byte is checked in full", func(t *testing.T) {
		// Emptying the second tool's name makes a tool without one:
		// only a full parse of the array can see it.
		parts := strings.SplitN(tools, `"name":"`, 3)
		second := strings.SplitN(parts[2], `"`, 2)
		unnamed := parts[0] + `"name":"` + parts[1] + `"name":"` + `"` + second[1]
		body := `{"model":"m","messages":[],"tools":` + unnamed + `}`
		if _, err := ParseRequestCached([]byte(body), cache); !errors.Is(err, ErrToolNoName) {
			t.Errorf("err = %v, want a no-name error", err)
		}
	})
}
