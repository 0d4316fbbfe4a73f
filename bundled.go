// Package toolgate holds the sample data bundled into the binary: the
// 183-tool catalog and the scripted agent tasks under testdata/, which
// `gateway demo` replays. It lives at the module root because go:embed
// cannot reach a parent directory and the sample files stay at testdata/,
// the path that docs, tests and flags name; it holds no logic and must not
// grow any.
package toolgate

import "embed"

//go:embed testdata/catalog.json testdata/tasks.json
var bundled embed.FS

// SampleCatalog returns testdata/catalog.json: a JSON array of Chat
// Completions function tools. Each call returns a fresh copy.
func SampleCatalog() []byte { return mustRead("testdata/catalog.json") }

// SampleTasks returns testdata/tasks.json: a JSON array of fakellm tasks.
// Each call returns a fresh copy.
func SampleTasks() []byte { return mustRead("testdata/tasks.json") }

// mustRead reads an embedded file; the names are fixed above and checked at
// build time, so a failure is impossible.
func mustRead(name string) []byte {
	b, err := bundled.ReadFile(name)
	if err != nil {
		panic("toolgate: embedded " + name + " missing: " + err.Error())
	}
	return b
}
