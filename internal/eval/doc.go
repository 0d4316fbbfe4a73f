// Package eval holds what `gateway eval` and `gateway demo --queries`
// measure with, beyond the selector's own recall arithmetic
// (selector.Evaluate): reading a queries file (the shared JSONL format)
// and checking its gold tools against a catalog file before anything
// runs; turning queries into scripted multi-step agent tasks (episodes)
// over the whole catalog or an agent-sized draw of it; and ranking each
// query through an in-process gateway in front of a scripted model
// (HTTPRanker), so recall is measured on what the model is offered.
//
// It must not parse flags, read catalog files or print reports (that is
// cmd/gateway's wiring), and it must never be wired into serve: its
// gateway and model listen on loopback and exist for one measurement.
package eval
