// Package session owns per-conversation state (the tools a session has
// discovered and used, its recent tools and entity focus) and the stores
// that keep it. It must not rank tools or know HTTP: the state is a cache,
// never the truth, so a lost session costs at most a repeated search.
package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNotFound is returned by Store.Get when the key has no state.
var ErrNotFound = errors.New("session not found")

// ErrCorrupt is returned (wrapped, naming the key) by Store.Get when the
// value under the key is not a session state the gateway can read. The
// caller starts the session afresh; its next Put overwrites the value.
var ErrCorrupt = errors.New("the stored session value is unreadable")

// Store keeps session state. Implementations must be safe for concurrent
// use. State is a cache, never the truth (the request's history is): a
// store may lose a session at any time, and an error costs the turn its
// session, never the turn.
type Store interface {
	// Get returns a copy of the state under key, which the caller may
	// change, or an error wrapping ErrNotFound when there is none (never
	// stored, expired, evicted), or another error when the store could
	// not answer.
	Get(ctx context.Context, key string) (State, error)
	// Put stores a copy of s under key, renewing its expiry; s stays the
	// caller's.
	Put(ctx context.Context, key string, s State) error
	// Delete forgets key; deleting a key the store does not hold is not
	// an error.
	Delete(ctx context.Context, key string) error
}

// State is what the gateway remembers of one conversation.
type State struct {
	// Active lists the tools the session has made visible (discovered by
	// search, preselected, or called), in the order they joined: the order
	// the upstream sees, so its prompt cache keeps its prefix.
	Active []string `json:"active"`
	// Recent lists the tools called most recently, most recent last.
	Recent []string `json:"recent,omitempty"`
	// Last is the last tool called, for transitions.
	Last string `json:"last,omitempty"`
	// Focus is the entity the session works on, if known.
	Focus string `json:"focus,omitempty"`
	// Turn fingerprints the user turn Preselected was ranked for, so a
	// retried request is offered the same tools without ranking again.
	Turn        string   `json:"turn,omitempty"`
	Preselected []string `json:"preselected,omitempty"`
	Explored    string   `json:"explored,omitempty"`
	// Guesses lists the active tools that joined as the gateway's guesses
	// for a turn (preselected, follow-up, explored) and have not been
	// called since: a new user turn drops them (DropGuesses).
	Guesses []string `json:"guesses,omitempty"`
	// Observed fingerprints the latest request whose calls the tenant's
	// habits learned from, so a retried request is not counted twice.
	Observed string    `json:"observed,omitempty"`
	Updated  time.Time `json:"updated"`
}

// Clone returns a deep copy of s.
func (s State) Clone() State {
	s.Active = slices.Clone(s.Active)
	s.Recent = slices.Clone(s.Recent)
	s.Preselected = slices.Clone(s.Preselected)
	s.Guesses = slices.Clone(s.Guesses)
	return s
}

// Join appends names not yet active, keeping the join order. It reports
// whether anything was added.
func (s *State) Join(names ...string) bool {
	added := false
	for _, n := range names {
		if n != "" && !slices.Contains(s.Active, n) {
			s.Active = append(s.Active, n)
			added = true
		}
	}
	return added
}

// Guess marks an active tool as one of the gateway's guesses.
func (s *State) Guess(name string) {
	if !slices.Contains(s.Guesses, name) {
		s.Guesses = append(s.Guesses, name)
	}
}

// Unguess marks an active tool as no longer a guess: the model asked for
// it (a search found it) or called it.
func (s *State) Unguess(name string) {
	if i := slices.Index(s.Guesses, name); i >= 0 {
		s.Guesses = slices.Delete(s.Guesses, i, i+1)
	}
}

// DropGuesses removes the guesses that were never called from the active
// tools, keeping the others' order, and returns them. A guess was ranked
// for an earlier user turn; left in place, it would ride along on every
// later upstream call of the session, up to max_active of them, whatever
// the user asks next (the next turn is ranked afresh, and a tool it still
// needs is picked again).
func (s *State) DropGuesses() []string {
	dropped := s.Guesses
	s.Guesses = nil
	s.Active = slices.DeleteFunc(s.Active, func(n string) bool { return slices.Contains(dropped, n) })
	return dropped
}

// Remove takes names out of the active tools (and the guesses), keeping
// the others' order.
func (s *State) Remove(names []string) {
	gone := func(n string) bool { return slices.Contains(names, n) }
	s.Active = slices.DeleteFunc(s.Active, gone)
	s.Guesses = slices.DeleteFunc(s.Guesses, gone)
}

// Touch records a call of name: it becomes the last and most recent tool,
// and no longer a guess.
func (s *State) Touch(name string, keep int) {
	s.Last = name
	s.Unguess(name)
	if i := slices.Index(s.Recent, name); i >= 0 {
		s.Recent = slices.Delete(s.Recent, i, i+1)
	}
	s.Recent = append(s.Recent, name)
	if keep > 0 && len(s.Recent) > keep {
		s.Recent = slices.Delete(s.Recent, 0, len(s.Recent)-keep)
	}
}

// MaxStoredNames bounds each list of tool names a stored State keeps
// (Active, Recent, Preselected, Guesses). It is far above what a session
// uses (max_active defaults to 32), and bounds what one would otherwise
// pile up: a client whose tools change every turn would leave every name
// it ever sent in Active (1,600 names, 41 KB, after 400 turns), read and
// written back on every turn.
const MaxStoredNames = 256

// Bound cuts every list of names to MaxStoredNames. From Active go first
// the oldest names current reports false for (tools the request at hand
// did not carry; nil: none), then the oldest; the guesses of names gone
// go too. Recent keeps the most recent, Preselected its best ranked.
func (s *State) Bound(current func(name string) bool) {
	if over := len(s.Active) - MaxStoredNames; over > 0 {
		gone := make([]bool, len(s.Active))
		mark := func(ok func(string) bool) {
			for i, n := range s.Active {
				if over == 0 {
					return
				}
				if !gone[i] && ok(n) {
					gone[i], over = true, over-1
				}
			}
		}
		if current != nil {
			mark(func(n string) bool { return !current(n) })
		}
		mark(func(string) bool { return true })
		kept := make([]string, 0, MaxStoredNames)
		keptSet := make(map[string]bool, MaxStoredNames)
		for i, n := range s.Active {
			if !gone[i] {
				kept = append(kept, n)
				keptSet[n] = true
			}
		}
		s.Active = kept
		s.Guesses = slices.DeleteFunc(s.Guesses, func(n string) bool { return !keptSet[n] })
	}
	if over := len(s.Recent) - MaxStoredNames; over > 0 {
		s.Recent = slices.Delete(s.Recent, 0, over)
	}
	if len(s.Preselected) > MaxStoredNames {
		s.Preselected = s.Preselected[:MaxStoredNames:MaxStoredNames]
	}
	if over := len(s.Guesses) - MaxStoredNames; over > 0 {
		s.Guesses = slices.Delete(s.Guesses, 0, over)
	}
}

// Tenant returns an opaque label for a credential, so state is namespaced by
// who asks without ever storing the credential itself.
func Tenant(credential string) string {
	sum := sha256.Sum256([]byte("toolgate-tenant\x00" + credential))
	return hex.EncodeToString(sum[:tenantLen/2])
}

// tenantLen is the length of a label Tenant returns, in hex digits.
const tenantLen = 16

// MaxReadableID is the longest X-Session-ID a store key holds as sent, so
// an operator reads it in the decision log. A longer id is hashed into the
// key: the store, the decision log and Redis hold each key for as long as
// the session lives, and a client's header must not set how much memory
// that is (a 900 KB id per session would hold 1.6 GB over 1,000 sessions).
const MaxReadableID = 128

// InTenant reports whether store key, one of Key's, belongs to tenant.
func InTenant(key, tenant string) bool { return strings.HasPrefix(key, tenant+":") }

// Key returns the store key of a conversation: the client's explicit
// session id when it sends one (hashed when longer than MaxReadableID),
// otherwise a fingerprint of the conversation's opening and of
// conversation, an id the client keeps for the conversation (a
// request's prompt_cache_key), when it has one: conversations that open
// alike (an agent whose first user message is a fixed preamble) share a
// session without it. All are namespaced by tenant, so two tenants never
// share a session, even with the same id. A key is at most
// 16+4+MaxReadableID bytes long whatever the client sends.
func Key(tenant, explicit, conversation, system, firstUser string) string {
	if explicit != "" {
		if len(explicit) <= MaxReadableID {
			return tenant + kindID + explicit
		}
		// A kind of its own: no short id can spell a hashed one's key.
		sum := sha256.Sum256([]byte(explicit))
		return tenant + kindIDHash + hex.EncodeToString(sum[:16])
	}
	h := sha256.New()
	kind := kindOpening
	if conversation != "" {
		// A kind of its own, and the id's length first: no opening
		// without an id can hash to the same key.
		kind = kindConversation
		h.Write(strconv.AppendInt(nil, int64(len(conversation)), 10))
		h.Write([]byte{0})
		h.Write([]byte(conversation))
	}
	h.Write([]byte(system))
	h.Write([]byte{0})
	h.Write([]byte(firstUser))
	return tenant + kind + hex.EncodeToString(h.Sum(nil)[:12])
}

// The kinds of key Key returns, each between the tenant and the rest.
// IsKey knows them all: a key the decision log prints must read as a key
// wherever an operator pastes it.
const (
	kindID           = ":id:" // an X-Session-ID, as sent
	kindIDHash       = ":ih:" // an X-Session-ID longer than MaxReadableID, hashed
	kindOpening      = ":fp:" // a conversation's opening, hashed
	kindConversation = ":fc:" // an opening and the client's conversation id, hashed
)

// IsKey reports whether id has the shape of a key Key returns, of any
// kind: a tenant label as Tenant returns it, then a kind. It does not say
// that a session is stored under id, and an X-Session-ID a client chose
// to spell like a key reads as one.
func IsKey(id string) bool {
	if len(id) < tenantLen+len(kindID) {
		return false
	}
	for _, c := range id[:tenantLen] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	switch id[tenantLen : tenantLen+len(kindID)] {
	case kindID, kindIDHash, kindOpening, kindConversation:
		return true
	}
	return false
}
