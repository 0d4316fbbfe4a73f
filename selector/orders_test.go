package selector

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
)

// namesOf yields tools' names in order.
func namesOf(tools []Tool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, t := range tools {
			if !yield(t.Name) {
				return
			}
		}
	}
}

// A catalog compiled in one order answers another order of its tools as
// a catalog compiled in that order does: the same rankings, positions
// the order's own.
func TestInOrderAnswersAsACatalogCompiledInThatOrder(t *testing.T) {
	base := loadCatalogFile(t, "../testdata/catalog.json")[""]
	c := compileTest(t, base, Config{})
	ctx := context.Background()
	for i, order := range []struct {
		name  string
		tools []Tool
	}{
		{"reversed", reversedTools(base)},
		{"shuffled", shuffledTools(base, 4)},
	} {
		view, err := c.InOrder(uint64(i+1), namesOf(order.tools))
		if err != nil {
			t.Fatal(err)
		}
		own := compileTest(t, order.tools, Config{})
		t.Run("Names lists the tools in the "+order.name+" order", func(t *testing.T) {
			if got, want := view.Names(), own.Names(); !slices.Equal(got, want) {
				t.Errorf("Names: got %v, want %v", got, want)
			}
		})
		t.Run("Position is a tool's index in the "+order.name+" order", func(t *testing.T) {
			for p, tl := range order.tools {
				if got, ok := view.Position(tl.Name); !ok || got != p {
					t.Fatalf("Position(%s) = %d, %v; want %d", tl.Name, got, ok, p)
				}
			}
		})
		t.Run("a search skipping the "+order.name+" order's positions ranks as its own catalog", func(t *testing.T) {
			skip := func(p int) bool { return p%3 == 0 }
			for _, q := range []Query{
				{Text: "delete the branch", Limit: 10, Skip: skip},
				{Text: "send a message to the team", Limit: 10, Skip: skip},
			} {
				got, err := view.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				want, err := own.Search(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(want.Items) == 0 || !reflect.DeepEqual(got, want) {
					t.Errorf("%q:\n%s", q.Text, sideBySide(want, got))
				}
			}
		})
		t.Run("the compiled order still speaks in its own positions after the "+order.name+" one", func(t *testing.T) {
			if !slices.Equal(c.Names(), compileTest(t, base, Config{}).Names()) {
				t.Error("InOrder changed the positions of the catalog it was called on")
			}
		})
	}
}

func TestInOrderRemembersAFewOrders(t *testing.T) {
	base := loadCatalogFile(t, "../testdata/catalog.json")[""]
	c := compileTest(t, base, Config{})
	held := c.heldBytes()
	t.Run("the compiled order is the catalog itself", func(t *testing.T) {
		if v, err := c.InOrder(1, namesOf(base)); err != nil || v != c {
			t.Errorf("got %p, %v; want the catalog %p", v, err, c)
		}
	})
	rev := reversedTools(base)
	first, err := c.InOrder(2, namesOf(rev))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("an order asked for again by its key is the same view, its names unread", func(t *testing.T) {
		v, err := c.InOrder(2, func(func(string) bool) { t.Error("names were read for a remembered key") })
		if err != nil || v != first {
			t.Errorf("got %p, %v; want %p", v, err, first)
		}
	})
	for i := range 40 {
		if _, err := c.InOrder(uint64(100+i), namesOf(shuffledTools(base, uint64(i)))); err != nil {
			t.Fatal(err)
		}
	}
	list := *c.orders.list.Load()
	t.Run("a new order every time keeps only the latest few", func(t *testing.T) {
		if len(list) != maxOrders || list[0].key != 139 {
			t.Errorf("remembers %d orders, the newest %d; want %d, 139", len(list), list[0].key, maxOrders)
		}
	})
	t.Run("what the remembered orders hold is counted in the catalog's heap, no more", func(t *testing.T) {
		want := listBytes(len(list))
		for _, v := range list {
			want += roundAlloc(sizeOf[Catalog]()) + sliceBytes(v.cat.pos)
		}
		if got := c.heldBytes() - held; got != want || want < int64(maxOrders*4*len(base)) {
			t.Errorf("held %d bytes more, want %d", got, want)
		}
	})
	t.Run("an order let go is laid out again when asked for", func(t *testing.T) {
		v, err := c.InOrder(2, namesOf(rev))
		if err != nil || v == first || !slices.Equal(v.Names(), first.Names()) {
			t.Errorf("got %p (%v), want a new view in the reversed order", v, err)
		}
	})
}

func TestInOrderRefusesNamesThatAreNotTheCatalogs(t *testing.T) {
	base := loadCatalogFile(t, "../testdata/catalog.json")[""][:20]
	c := compileTest(t, base, Config{})
	// extra names go first, so that passing over them shifts every
	// position.
	names := func(tools []Tool, extra ...string) []Tool {
		var out []Tool
		for _, n := range extra {
			out = append(out, Tool{Name: n})
		}
		return append(out, tools...)
	}
	for i, tc := range []struct {
		name  string
		tools []Tool
		ok    bool
	}{
		{"names the catalog lacks are passed over, as tools its policy hid", names(reversedTools(base), "hidden_a", "hidden_b"), true},
		{"a tool missing is refused", base[1:], false},
		{"a tool named twice is refused", names(base, base[3].Name), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := c.InOrder(uint64(i+10), namesOf(tc.tools))
			if tc.ok {
				if err != nil || !slices.Equal(v.Names(), compileTest(t, reversedTools(base), Config{}).Names()) {
					t.Errorf("got %v, %v", v, err)
				}
				return
			}
			if !errors.Is(err, ErrNotTheCatalog) {
				t.Errorf("err = %v, want ErrNotTheCatalog", err)
			}
		})
	}
}

// Requests of many orders at once share the catalog, each with its own
// positions (run with -race).
func TestInOrderIsSafeForConcurrentUse(t *testing.T) {
	base := loadCatalogFile(t, "../testdata/catalog.json")[""]
	c := compileTest(t, base, Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := shuffledTools(base, uint64(i%12))
			v, err := c.InOrder(uint64(i%12), namesOf(order))
			if err != nil {
				errs <- err
				return
			}
			for p, tl := range order {
				if got, _ := v.Position(tl.Name); got != p {
					errs <- fmt.Errorf("order %d: Position(%s) = %d, want %d", i%12, tl.Name, got, p)
					return
				}
			}
			if _, err := v.Search(context.Background(), Query{Text: "read a file", Limit: 5}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
