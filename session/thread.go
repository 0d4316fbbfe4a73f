package session

import "context"

// Thread is what the gateway remembers of a response id it gave a client
// of an API that continues a conversation by id (the Responses API's
// previous_response_id): the session of the turn the response ended, and
// the upstream's id that holds the turn's context when that is another
// (a streamed turn shows the client its first round's id, and its context
// is in its last round's).
type Thread struct {
	Session  string `json:"session"`
	Upstream string `json:"upstream,omitempty"`
	// Hidden are the ids of the turn's other upstream responses, which
	// the client never saw (its search rounds, and a stream's later
	// rounds): deleting the response the client saw deletes them too.
	Hidden []string `json:"hidden,omitempty"`
}

// Threads is implemented by a store shared among gateway replicas. Unlike
// a lost session, a lost thread is not a cache miss: a request that
// continues from a streamed turn's id on a replica that does not know it
// reaches the upstream at a round that ended in the gateway's own call,
// and the upstream refuses it for the call's missing output. So a shared
// store keeps threads too, for as long as it keeps sessions.
type Threads interface {
	// GetThread returns the thread under key, or ErrNotFound.
	GetThread(ctx context.Context, key string) (Thread, error)
	// PutThread stores th under key.
	PutThread(ctx context.Context, key string, th Thread) error
}
