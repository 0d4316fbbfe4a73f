package proxy

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolgate/toolgate/selector"
)

// Learned holds what the gateway learns online, per tenant, so one
// tenant's habits never shape another's rankings: the tool transitions
// observed, and the tools its requests' words went on to call.
type Learned struct {
	trans    *lru.Cache[string, *selector.Transitions]
	habits   *lru.Cache[string, *selector.Habits]
	maxTools int
	maxWords int
}

// maxHabitTenants bounds the tenants whose habits are kept (about 120 KB
// each at most, so 30 MB in all), the least recently active going first:
// fewer than the transitions' tenants, which cost a few KB each.
const maxHabitTenants = 256

// NewLearned keeps transitions for at most tenants tenants, and habits
// for at most 256 of them.
func NewLearned(tenants int) *Learned {
	if tenants <= 0 {
		tenants = 1024
	}
	// lru.New errors only on a size <= 0.
	trans, _ := lru.New[string, *selector.Transitions](tenants)
	habits, _ := lru.New[string, *selector.Habits](min(tenants, maxHabitTenants))
	return &Learned{trans: trans, habits: habits, maxTools: 4096, maxWords: 512}
}

// For returns the tenant's transitions, creating them on first use; nil l
// gives nil (searches then use only the policy's seeded transitions).
func (l *Learned) For(tenant string) *selector.Transitions {
	if l == nil {
		return nil
	}
	return getOrAdd(l.trans, tenant, func() *selector.Transitions { return selector.NewTransitions(l.maxTools) })
}

// Peek returns the tenant's transitions and habits when it has any, nil
// for those it has not, creating neither: a turn reads them before the
// upstream has accepted its credential, and a request the upstream
// refuses must not push other tenants' out.
func (l *Learned) Peek(tenant string) (*selector.Transitions, *selector.Habits) {
	if l == nil {
		return nil, nil
	}
	trans, _ := l.trans.Peek(tenant)
	habits, _ := l.habits.Peek(tenant)
	return trans, habits
}

// Habits returns the tenant's habits, creating them on first use; nil l
// gives nil (nothing is learned or lifted).
func (l *Learned) Habits(tenant string) *selector.Habits {
	if l == nil {
		return nil
	}
	return getOrAdd(l.habits, tenant, func() *selector.Habits { return selector.NewHabits(l.maxWords) })
}

// getOrAdd returns c's value for key, adding fresh() when there is none;
// of two concurrent first uses, both get the one that was added.
func getOrAdd[V any](c *lru.Cache[string, V], key string, fresh func() V) V {
	if v, ok := c.Get(key); ok {
		return v
	}
	v := fresh()
	if prev, ok, _ := c.PeekOrAdd(key, v); ok {
		return prev
	}
	return v
}
