package proxy

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/toolgate/toolgate/selector"
)

// Learned holds what the gateway learns online, per tenant, so one
// tenant's habits never shape another's rankings: the tool transitions
// observed, and the tools its requests' words went on to call.
//
// A tenant gets a record only from a turn that teaches it something, and
// keeps it against new tenants once a second turn has (tenantStore): a
// credential costs nothing to make up (with gateway.upstream_key any
// string is one), and turns of new credentials that teach nothing, or
// once each, must not push out what the returning tenants taught.
type Learned struct {
	trans    *tenantStore[*selector.Transitions]
	habits   *tenantStore[*selector.Habits]
	maxTools int
	maxWords int
}

// maxHabitTenants bounds the tenants whose habits are kept (about 120 KB
// each at most, so 30 MB in all), the least recently taught going first:
// fewer than the transitions' tenants, which cost a few KB each. A
// quarter as many more wait on probation, each holding one turn's lesson
// (at most 64 words, some 15 KB).
const maxHabitTenants = 256

// NewLearned keeps transitions for at most tenants tenants that taught
// them in two turns or more, and habits for at most 256 of them; a
// quarter as many more of each that taught one turn wait on probation.
func NewLearned(tenants int) *Learned {
	if tenants <= 0 {
		tenants = 1024
	}
	return &Learned{
		trans:    newTenantStore[*selector.Transitions](tenants),
		habits:   newTenantStore[*selector.Habits](min(tenants, maxHabitTenants)),
		maxTools: 4096, maxWords: 512,
	}
}

// For returns the tenant's transitions for a turn that teaches them,
// creating them on first use; nil l gives nil (searches then use only the
// policy's seeded transitions). Each call counts as one turn's lesson
// (tenantStore.teach): a turn calls it once, and only once the upstream
// has accepted it.
func (l *Learned) For(tenant string) *selector.Transitions {
	if l == nil {
		return nil
	}
	return l.trans.teach(tenant, func() *selector.Transitions { return selector.NewTransitions(l.maxTools) })
}

// Peek returns the tenant's transitions and habits when it has any, nil
// for those it has not, creating neither and making neither more recent:
// a turn reads them before the upstream has accepted its credential, and
// a request the upstream refuses, or one that teaches nothing, must not
// push other tenants' out.
func (l *Learned) Peek(tenant string) (*selector.Transitions, *selector.Habits) {
	if l == nil {
		return nil, nil
	}
	trans, _ := l.trans.peek(tenant)
	habits, _ := l.habits.peek(tenant)
	return trans, habits
}

// Habits returns the tenant's habits for a turn that teaches them,
// creating them on first use; nil l gives nil (nothing is learned or
// lifted). Each call counts as one turn's lesson, as For's does.
func (l *Learned) Habits(tenant string) *selector.Habits {
	if l == nil {
		return nil
	}
	return l.habits.teach(tenant, func() *selector.Habits { return selector.NewHabits(l.maxWords) })
}

// tenantStore holds one kind of record per tenant in two parts: probation,
// the tenants one turn has taught, and kept, those two turns or more
// have. A tenant's second lesson moves it to kept; a new tenant waits on
// probation, which holds a quarter as many as kept, each part letting its
// least recently taught go first. So any number of new credentials that
// each teach once pushes out only each other, never the tenants that came
// back. It is safe for concurrent use.
type tenantStore[V any] struct {
	mu              sync.Mutex
	probation, kept *simplelru.LRU[string, V]
}

// newTenantStore keeps up to n tenants (n > 0), and n/4 more (at least
// one) on probation.
func newTenantStore[V any](n int) *tenantStore[V] {
	// Errors only for a size <= 0.
	probation, _ := simplelru.NewLRU[string, V](max(n/4, 1), nil)
	kept, _ := simplelru.NewLRU[string, V](n, nil)
	return &tenantStore[V]{probation: probation, kept: kept}
}

// peek returns the tenant's record, if held, making it no more recent.
func (s *tenantStore[V]) peek(tenant string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.kept.Peek(tenant); ok {
		return v, true
	}
	return s.probation.Peek(tenant)
}

// teach returns the tenant's record for a turn that teaches it: the
// tenant's kept one, made the most recent; its record on probation, now
// kept; or fresh(), on probation.
func (s *tenantStore[V]) teach(tenant string, fresh func() V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.kept.Get(tenant); ok {
		return v
	}
	if v, ok := s.probation.Peek(tenant); ok {
		s.probation.Remove(tenant)
		s.kept.Add(tenant, v)
		return v
	}
	v := fresh()
	s.probation.Add(tenant, v)
	return v
}
