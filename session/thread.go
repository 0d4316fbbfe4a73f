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
	// Pending answer the gateway's own calls the turn's last round ended
	// with (a search next to a client call, or a round with none left):
	// the upstream holds those calls without outputs, and a request that
	// continues from the turn must send them.
	Pending []Output `json:"pending,omitempty"`
	// HiddenTokens estimates the tokens the gateway's own items (its
	// tool_search calls and their outputs, refusals of denied tools) add
	// to the context the upstream keeps for this response, this turn's and
	// every earlier turn's of the chain. A request that continues from it
	// pays for them; a direct conversation would not have them, so the
	// estimate of what it would have cost direct leaves them out.
	HiddenTokens int64 `json:"hidden_tokens,omitempty"`
	// Tools are the client tools the turn had active or called, the
	// policy's core tools aside (every turn joins those), at most
	// MaxThreadTools. A request that continues from the response holds
	// only the outputs of the calls, which name no tool, so when the
	// session is gone (expired, evicted) these are what it rejoins:
	// without them it would lose even the tool it had just called.
	Tools []string `json:"tools,omitempty"`
}

// MaxThreadTools bounds the tool names a thread keeps, whatever
// max_active allows: a thread is written for every response id, and the
// names are what it costs besides the ids (32 names of 20 bytes add
// about 750 bytes to a record of about 150).
const MaxThreadTools = 64

// MaxPendingOutput bounds the bytes of one pending output a thread keeps.
const MaxPendingOutput = 2 << 10

// Output answers a call by its id.
type Output struct {
	CallID string `json:"call_id"`
	Output string `json:"output"`
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
