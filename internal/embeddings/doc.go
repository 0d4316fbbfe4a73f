// Package embeddings is the gateway's client for an OpenAI-compatible
// POST /embeddings endpoint, the remote implementation of selector's
// Embedder and QueryEmbedder. It owns everything about that endpoint:
// the requests and their batching, status errors and Retry-After, the
// retries of catalog batches, the cooldown that keeps queries off a
// failing endpoint, and the caches of the endpoint's answers (an
// in-memory LRU, and vector files on disk keyed by endpoint, model and
// text).
//
// It must not rank: what a vector means for a search, and what happens
// when none comes (the offline word vectors), is selector's. It must not
// read the policy either: cmd/gateway turns the policy's
// search.embeddings settings into OpenAIOptions.
package embeddings
