package selector

import (
	"context"
	"fmt"
)

// Warm loads what the first catalog compiled in a process would otherwise
// load while its client waits: the embedded word vectors, the neighbour
// table, bleve's analysers and the stemmer. It compiles and ranks a
// catalog of two tools once; a caller runs it before it reports ready, so
// the first request costs what every later new catalog does (about 90 ms
// more otherwise, at 20 tools).
func Warm(ctx context.Context) error {
	tools := []Tool{
		{Name: "read_file", Description: "Read a text file from the workspace.", Params: []Param{{Name: "path", Description: "The file's path."}}},
		{Name: "send_message", Description: "Send a message to a chat channel."},
	}
	c, err := Compile(ctx, tools, Config{Weights: DefaultWeights()})
	if err != nil {
		return fmt.Errorf("warming the selector: %w", err)
	}
	if _, err := c.Preselect(ctx, []string{"Read the notes file, then post a summary"}, 1, Query{}); err != nil {
		return fmt.Errorf("warming the selector: %w", err)
	}
	if _, err := c.Search(ctx, Query{Text: "send message"}); err != nil {
		return fmt.Errorf("warming the selector: %w", err)
	}
	return nil
}
