package selector

import (
	"context"
	"slices"
	"testing"
)

func TestDonePartOfARequestGivesWayToTheRest(t *testing.T) {
	const ask = "Read the file notes.txt and share what the file says with the team."
	tools := []Tool{
		{Name: "fs_read_file", Description: "Read the contents of a text file."},
		{Name: "fs_read_pdf", Description: "Read the text of a PDF file, page by page."},
		{Name: "fs_file_info", Description: "Show a file's size, owner and dates."},
		{Name: "chat_send_message", Description: "Send a message to the team's chat channel."},
	}
	preselected := func(t *testing.T, w Weights) []string {
		t.Helper()
		c := compileTest(t, tools, Config{Weights: w})
		read, _ := c.Position("fs_read_file")
		q := Query{
			Done: []string{"fs_read_file"},
			Skip: func(p int) bool { return p == read },
		}
		res, err := c.Preselect(context.Background(), []string{ask}, 3, q)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range res.Items {
			names = append(names, it.Name)
		}
		return names
	}
	off := DefaultWeights()
	off.Done = 0
	without, with := preselected(t, off), preselected(t, DefaultWeights())
	t.Run("without the discount, the file tools lead after the file was read", func(t *testing.T) {
		if i := slices.Index(without, "chat_send_message"); i == 0 {
			t.Fatalf("ranking without the discount %v: the test needs a file tool first", without)
		}
	})
	t.Run("with it, the chat tool the rest of the request asks for rises", func(t *testing.T) {
		before, after := slices.Index(without, "chat_send_message"), slices.Index(with, "chat_send_message")
		if after < 0 || (before >= 0 && after >= before) {
			t.Errorf("ranking %v; without the discount %v: want chat_send_message higher", with, without)
		}
	})
	t.Run("a conversation that has called nothing ranks as before", func(t *testing.T) {
		c := compileTest(t, tools, Config{Weights: DefaultWeights()})
		a, _ := c.Preselect(context.Background(), []string{ask}, 5, Query{})
		c0 := compileTest(t, tools, Config{Weights: off})
		b, _ := c0.Preselect(context.Background(), []string{ask}, 5, Query{})
		if !slices.EqualFunc(a.Items, b.Items, func(x, y Result) bool { return x.Name == y.Name }) {
			t.Errorf("with %v, without %v", a.Items, b.Items)
		}
	})
}
