package proxy

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/toolgate/toolgate/session"
)

// DefaultMaxThreads is Gateway.MaxThreads' default: the records of each
// kind the gateway keeps in process. A record that names other rounds is
// about 300 bytes with a hidden round (20 MB for all), 16 more a tool
// name (the names are the catalog's, which the sessions share: 32 MB for
// all at the default max_active of 32), and up to 2 KB more for each
// output of the gateway's own calls a mixed final round left pending
// (rememberThread copies what it keeps); one that names only a session is
// about 150 bytes and the tool names.
const DefaultMaxThreads = 1 << 16

// threadStore holds the thread records of this process in two parts, so
// that the records a chain cannot continue without are never let go for
// those that only link a session: chains holds the records that name
// other rounds (an upstream round to continue from, hidden rounds to
// delete, pending outputs to send), links those that name only the turn's
// session and tools, which every Responses turn that is stored makes. A
// chain whose link is gone costs a repeated search; one whose record
// naming other rounds is gone is refused by the upstream. So one client's
// flood of plain turns, under any number of credentials, lets go only of
// links. Each part holds at most its size, the least recently used going
// first. It is safe for concurrent use.
type threadStore struct {
	mu            sync.Mutex
	chains, links *simplelru.LRU[string, session.Thread]
}

// newThreadStore holds up to size records in each part (size <= 0 means
// DefaultMaxThreads).
func newThreadStore(size int) *threadStore {
	if size <= 0 {
		size = DefaultMaxThreads
	}
	// Errors only for a size <= 0.
	chains, _ := simplelru.NewLRU[string, session.Thread](size, nil)
	links, _ := simplelru.NewLRU[string, session.Thread](size, nil)
	return &threadStore{chains: chains, links: links}
}

// namesRounds reports whether th names rounds of the upstream's besides
// the id it is kept under: the records a chain or a delete needs.
func namesRounds(th session.Thread) bool {
	return th.Upstream != "" || len(th.Hidden) > 0 || len(th.Pending) > 0
}

// Get returns the record of response id, marking it recently used.
func (s *threadStore) Get(id string) (session.Thread, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if th, ok := s.chains.Get(id); ok {
		return th, true
	}
	return s.links.Get(id)
}

// Add keeps th as the record of response id, in the part its kind goes
// to; a record of another kind under id (a deleted turn's, which keeps
// only its session) goes.
func (s *threadStore) Add(id string, th session.Thread) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if namesRounds(th) {
		s.links.Remove(id)
		s.chains.Add(id, th)
		return
	}
	s.chains.Remove(id)
	s.links.Add(id, th)
}

// Contains reports whether a record of response id is kept, without
// marking it used.
func (s *threadStore) Contains(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chains.Contains(id) || s.links.Contains(id)
}

// Len returns the records kept, of both kinds.
func (s *threadStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chains.Len() + s.links.Len()
}
