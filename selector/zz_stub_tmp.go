package selector

// TEMPORARY stand-in until the selector branch lands; replaced at merge.

import (
	"context"
	"sort"
	"strings"
	"sync"
)

type Catalog struct {
	tools []Tool
	cfg   Config
}

func Compile(ctx context.Context, tools []Tool, cfg Config) (*Catalog, error) {
	return &Catalog{tools: tools, cfg: cfg}, nil
}

func (c *Catalog) Len() int { return len(c.tools) }

func (c *Catalog) Tool(name string) (Tool, bool) {
	for _, t := range c.tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

func (c *Catalog) Areas(max int) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range c.tools {
		p := strings.SplitN(t.Name, "_", 2)[0]
		if !seen[p] && len(out) < max {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
}

func (c *Catalog) Search(ctx context.Context, q Query) (Results, error) {
	qw := words(q.Text)
	type sc struct {
		t Tool
		s float64
	}
	var all []sc
	for _, t := range c.tools {
		if q.Exclude != nil && q.Exclude(t.Name) {
			continue
		}
		doc := " " + strings.Join(words(t.Name+" "+t.Description+" "+strings.Join(t.Meta.Keywords, " ")), " ") + " "
		s := 0.0
		for _, w := range qw {
			if len(w) > 2 && strings.Contains(doc, " "+w) {
				s++
			}
		}
		if s > 0 {
			all = append(all, sc{t, s})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].s > all[j].s })
	lim := q.Limit
	if lim <= 0 {
		lim = 5
	}
	var r Results
	for i := 0; i < len(all) && i < lim; i++ {
		r.Items = append(r.Items, Result{Name: all[i].t.Name, Description: all[i].t.Description, Category: all[i].t.Meta.Category, Hint: all[i].t.Meta.Hint, Score: all[i].s})
	}
	if len(r.Items) > 0 {
		r.Confidence = 0.8
	}
	return r, nil
}

type Cache struct {
	mu sync.Mutex
	m  map[string]*Catalog
}

func NewCache(size int) *Cache { return &Cache{m: map[string]*Catalog{}} }

func (c *Cache) Get(ctx context.Context, key string, build func() ([]Tool, Config)) (*Catalog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cat, ok := c.m[key]; ok {
		return cat, nil
	}
	t, cfg := build()
	cat, _ := Compile(ctx, t, cfg)
	c.m[key] = cat
	return cat, nil
}
