package selector

import (
	"context"
	"math"
	"testing"
)

func TestRemoveCommonLetsContentOutweighSharedBoilerplate(t *testing.T) {
	// Most tools carry the same docstring boilerplate, which dominates
	// their averaged vectors; an "album tracks" query then lands on a
	// tool by its boilerplate. With part of the common direction removed,
	// the song tool's own words decide.
	bp := " Args: id (str): the identifier of the record. limit (int): maximum number of results to return. Returns: dict: the response object with the result fields and status."
	tools := []Tool{
		{Name: "get_forecast", Description: "Get the forecast for a city." + bp},
		{Name: "get_quote", Description: "Get a share quote." + bp},
		{Name: "get_message", Description: "Get a mail message." + bp},
		{Name: "list_records", Description: "List records of a table." + bp},
		{Name: "get_song", Description: "Get a song by title." + bp},
		{Name: "get_recipe", Description: "Get a recipe." + bp},
		{Name: "holiday_ideas", Description: "Ideas for a sunny beach holiday and summer travel."},
		{Name: "kitchen_tips", Description: "Tips for cooking dinner in your kitchen."},
		{Name: "market_chat", Description: "Chat about the economy and money."},
		{Name: "concert_finder", Description: "Find concerts and live shows near you."},
	}
	c := compileTest(t, tools, Config{})
	wv, err := DefaultWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	qv := c.sem.query(context.Background(), "album tracks", []string{"album", "tracks"})
	best := func(vecs [][]float32) string { // vecs in the catalog's order (canonical.go)
		b, bs := "", math.Inf(-1)
		for i, v := range vecs {
			if v != nil && float64(dot(qv, v)) > bs {
				b, bs = c.tools[i].Name, float64(dot(qv, v))
			}
		}
		return b
	}
	vecs := c.toolVectors(wv, nil)
	if got := best(vecs); got == "get_song" {
		t.Fatalf("raw vectors already rank get_song first; the test means nothing")
	}
	removeCommon(vecs, commonShare)
	if got := best(vecs); got != "get_song" {
		t.Errorf("after removeCommon the best tool for 'album tracks' is %s, want get_song", got)
	}
	if got := best(*c.sem.vecs.Load()); got != "get_song" {
		t.Errorf("the compiled catalog's best tool is %s, want get_song (removeCommon applied at compile)", got)
	}
	for i, v := range vecs {
		if n := float64(dot(v, v)); math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d has squared norm %.6f, want 1", i, n)
		}
	}
	vecs = append(vecs, nil)
	removeCommon(vecs, commonShare)
	if vecs[len(vecs)-1] != nil {
		t.Error("a nil vector got a value")
	}
}
