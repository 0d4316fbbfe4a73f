package policy

// TEMPORARY stand-in until the policy branch lands; replaced at merge.

import (
	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

type Request struct {
	Key    string
	Model  string
	Header func(name string) string
}

type Decision struct {
	Visible, Core bool
	Rule          string
}

func (s *Snapshot) ForRequest(r Request) *Snapshot          { return s }
func (s *Snapshot) Decide(name, userText string) Decision { return Decision{Visible: true} }
func (s *Snapshot) Generation() uint64                     { return 0 }
func (s *Snapshot) Hints(category string) string           { return "" }
func (s *Snapshot) Catalog(tools []rewrite.Tool) ([]selector.Tool, selector.Config) {
	out := make([]selector.Tool, len(tools))
	for i, t := range tools {
		out[i] = selector.Tool{Name: t.Name, Description: t.Description}
	}
	return out, selector.Config{}
}
