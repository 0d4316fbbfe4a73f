package proxy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/rewrite"
	"github.com/toolgate/toolgate/selector"
)

// Bounds on what a client's tools array may make the gateway index. Tool
// names, descriptions and schemas are untrusted data: they are only ever
// indexed and echoed as text, and these caps keep a hostile catalog from
// turning a 32 MiB body into a far larger index held in the catalog cache.
const (
	// maxCatalogTools is the most tools one request may bring; more is a 400.
	maxCatalogTools = 4096
	// maxToolName is the longest tool name accepted (OpenAI allows 64).
	maxToolName = 256
	// maxToolText is how much of one description is indexed.
	maxToolText = 4 << 10
	// maxParamText is how much of one parameter description is indexed.
	maxParamText = 512
	// maxToolParams is how many parameters of one tool are indexed.
	maxToolParams = 64
	// maxCatalogText is the text budget of one catalog; tools past it are
	// indexed by name only.
	maxCatalogText = 4 << 20
)

// checkCatalog refuses a tools array the gateway will not index: too many
// tools or a name too long to be one. The error wraps rewrite.ErrBadRequest.
func checkCatalog(tools []rewrite.Tool) error {
	if len(tools) > maxCatalogTools {
		return rewrite.WithParam("tools", fmt.Errorf("%w: %d tools; the gateway accepts at most %d", rewrite.ErrBadRequest, len(tools), maxCatalogTools))
	}
	for i, t := range tools {
		if len(t.Name) > maxToolName {
			return rewrite.WithParam("tools", fmt.Errorf("%w: tools[%d]: name is %d bytes; at most %d", rewrite.ErrBadRequest, i, len(t.Name), maxToolName))
		}
	}
	return nil
}

// capCatalog trims the text the selector indexes to the caps above and
// copies every string, so a cached catalog never pins the request body the
// strings were read from. It changes tools in place and returns it.
func capCatalog(tools []selector.Tool) []selector.Tool {
	budget := maxCatalogText
	take := func(s string, max int) string {
		s = clip(s, min(max, budget))
		budget -= len(s)
		return strings.Clone(s)
	}
	for i := range tools {
		t := &tools[i]
		t.Name = strings.Clone(t.Name)
		t.Description = take(t.Description, maxToolText)
		if len(t.Params) > maxToolParams {
			t.Params = t.Params[:maxToolParams]
		}
		params := make([]selector.Param, len(t.Params))
		for j, p := range t.Params {
			params[j] = selector.Param{Name: take(p.Name, maxToolName), Description: take(p.Description, maxParamText)}
		}
		t.Params = params
	}
	return tools
}

// clip cuts s to at most n bytes at a rune boundary.
func clip(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
