package selector

import (
	"slices"
	"testing"
)

func TestMaxSimMatchesQueryWordsToToolWords(t *testing.T) {
	tools := []Tool{
		{Name: "city_guide", Description: "Describe a city: sights, museums, history and famous people."},
		{Name: "forecast_lookup", Description: "Forecast for a city, with rain and temperature."},
		{Name: "population_stats", Description: "Population of a city by year."},
		{Name: "hotel_search", Description: "Find a hotel in a city."},
	}
	c := compileTest(t, tools, Config{})
	// Documents by name: the catalog orders its tools by name.
	guide, forecast := int32(c.byName["city_guide"]), int32(c.byName["forecast_lookup"])
	t.Run("a query word's close relative in a tool's text scores", func(t *testing.T) {
		ms := c.maxSim(c.wv.rowsOf([]string{"weather"}, nil), []int32{guide, forecast}, c.scratch())
		if !(ms[1] > ms[0]) {
			t.Errorf("max-sim weather: city_guide %.3f, forecast_lookup %.3f; want forecast higher", ms[0], ms[1])
		}
	})
	t.Run("an exact word scores 1", func(t *testing.T) {
		if got := c.maxSim(c.wv.rowsOf([]string{"forecast"}, nil), []int32{forecast}, c.scratch())[0]; got < 0.999 {
			t.Errorf("max-sim forecast = %.3f, want 1", got)
		}
	})
	t.Run("max-sim lifts the forecast tool most for a weather query", func(t *testing.T) {
		// By score, not rank: every tool has "city", and its rank also
		// depends on how the lexical tie between hotel_search and
		// population_stats falls (to the name that sorts first,
		// canonical.go), which keeps forecast_lookup third either way.
		q := Query{Text: "weather city", Limit: len(tools)}
		off := compileTest(t, tools, Config{})
		off.toolRows = nil
		scores := func(c *Catalog) map[string]float64 {
			res, err := c.Search(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]float64{}
			for _, it := range res.Items {
				m[it.Name] = it.Score
			}
			return m
		}
		on, was := scores(c), scores(off)
		lift := on["forecast_lookup"] - was["forecast_lookup"]
		for _, tl := range tools {
			if other := on[tl.Name] - was[tl.Name]; tl.Name != "forecast_lookup" && other >= lift {
				t.Errorf("max-sim lifts %s by %.3f, forecast_lookup by %.3f; want forecast_lookup most", tl.Name, other, lift)
			}
		}
	})
}

// floorDot must give dot's exact value whenever the product reaches the
// floor, and cut only products that are below it.
func TestFloorDotIsDotAboveTheFloor(t *testing.T) {
	wv, err := DefaultWordVectors()
	if err != nil {
		t.Fatal(err)
	}
	if wv.dims < msCut2 {
		t.Skipf("word vectors have %d dimensions", wv.dims)
	}
	var cut, kept int
	for i := int32(0); i < 400; i++ {
		a := wv.rowF(i * 7)
		for j := int32(0); j < 400; j++ {
			b := wv.rowF(j*11 + 3)
			if j == 0 {
				b = a // identical: the largest product
			}
			want := dot(a, b)
			got := floorDot(a, b, tailNorms(a), tailNorms(b), maxSimFloor)
			if got == -1 {
				cut++
				if want >= maxSimFloor {
					t.Fatalf("rows %d, %d: cut a product of %v", i*7, j*11+3, want)
				}
				continue
			}
			kept++
			if got != want {
				t.Fatalf("rows %d, %d: %v, dot %v", i*7, j*11+3, got, want)
			}
		}
	}
	if cut == 0 || kept == 0 {
		t.Errorf("cut %d and kept %d products: the test exercises one path only", cut, kept)
	}
}

// The remembered rows must give exactly what comparing word by word gives:
// on a word's first sighting (compared with the candidates' words), its
// second (its row computed) and after (its row remembered), alone or mixed
// with words in other states.
func TestMaxSimRememberedRowsGiveTheDirectScores(t *testing.T) {
	c := compileTest(t, loadCatalogFile(t, "../testdata/catalog.json")[""], Config{})
	if c.msWords == nil {
		t.Fatal("the catalog's vocabulary is not remembered; the test needs it")
	}
	docs := make([]int32, 0, len(c.tools))
	for i := 0; i < len(c.tools); i += 3 { // candidates: a third of the catalog
		docs = append(docs, int32(i))
	}
	texts := []struct{ name, text string }{
		{"a request in the catalog's own words", "create an issue in the repository and comment on the pull request"},
		{"a request in other words", "jot down a memo about the weather forecast for the trip"},
		{"a request mixing known and new words", "comment on the memo about the repository"},
		{"a single word", "picture"},
	}
	memory := c.msWords
	for _, tt := range texts {
		t.Run(tt.name, func(t *testing.T) {
			var qrows []int32
			for _, w := range c.an.words(tt.text) {
				if r, ok := c.wv.index[w]; ok && !slices.Contains(qrows, r) {
					qrows = append(qrows, r)
				}
			}
			if len(qrows) == 0 {
				t.Fatal("no known words")
			}
			sims := func() []float32 {
				best := make([]float32, len(docs)*len(qrows))
				c.bestSims(qrows, docs, best, c.scratch())
				return best
			}
			c.msWords = nil
			want := sims()
			c.msWords = memory
			for _, sighting := range []string{"first", "second", "third"} {
				if got := sims(); !slices.Equal(got, want) {
					t.Fatalf("%s sighting: scores differ from the direct comparison", sighting)
				}
			}
			nonzero := 0
			for _, v := range want {
				if v > 0 {
					nonzero++
				}
			}
			if nonzero == 0 {
				t.Error("every score is 0: the comparison tests nothing")
			}
		})
	}
}
