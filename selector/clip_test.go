package selector

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClipKeepsTheHeadAndTailOfALongText(t *testing.T) {
	long := strings.Repeat("日本語のログ ", 2000) // 3-byte runes: cuts must not split one
	tests := []struct {
		name, in         string
		keepsHead, keeps string
	}{
		{"a short text is kept whole", "send the report", "send", "report"},
		{"a long text keeps its first and last words", "please send " + long + " to maria", "please send", "to maria"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clip(tt.in)
			if len(got) > maxTextBytes+1 || !utf8.ValidString(got) || !strings.HasPrefix(got, tt.keepsHead) || !strings.HasSuffix(got, tt.keeps) {
				t.Errorf("clip gave %d bytes (valid UTF-8: %v), %q...%q", len(got), utf8.ValidString(got), got[:min(20, len(got))], got[max(0, len(got)-20):])
			}
		})
	}
}

// TestALongMessageIsRankedByItsAsk: a message of pasted material with the
// ask at its end still finds what the ask alone ranks first: the clip
// keeps the tail.
func TestALongMessageIsRankedByItsAsk(t *testing.T) {
	c, err := Compile(context.Background(), syntheticTools(200), Config{})
	if err != nil {
		t.Fatal(err)
	}
	ask := "Please upload the cover image to the cms page and publish the draft."
	pasted := strings.Repeat("2026-11-24T10:00:00Z 世界 request served in 12ms status 200 ", 20000) // ~1.2 MB
	short, err := c.Preselect(context.Background(), []string{ask}, 5, Query{})
	if err != nil {
		t.Fatal(err)
	}
	long, err := c.Preselect(context.Background(), []string{pasted + "\n" + ask}, 5, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(short.Items) == 0 || !slices.ContainsFunc(long.Items, func(r Result) bool { return r.Name == short.Items[0].Name }) {
		t.Errorf("the ask alone ranks %v; behind a megabyte of logs, %v", names(short.Items), names(long.Items))
	}
}

func names(items []Result) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Name
	}
	return out
}

// BenchmarkPreselectLongMessage is a preselection for a user message of a
// megabyte of pasted CJK text with the ask at its end.
func BenchmarkPreselectLongMessage(b *testing.B) {
	c, err := Compile(context.Background(), syntheticTools(200), Config{})
	if err != nil {
		b.Fatal(err)
	}
	msg := strings.Repeat("日志：请求已处理，状态正常。", 25000) + "\nPlease publish the draft page."
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Preselect(context.Background(), []string{msg}, 7, Query{}); err != nil {
			b.Fatal(err)
		}
	}
}
