package proxy

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolgate/toolgate/selector"
)

// Learned holds the tool transitions observed online, one table per
// tenant, so one tenant's habits never shape another's rankings.
type Learned struct {
	tables   *lru.Cache[string, *selector.Transitions]
	maxTools int
}

// NewLearned keeps transition tables for at most tenants tenants.
func NewLearned(tenants int) *Learned {
	if tenants <= 0 {
		tenants = 1024
	}
	c, _ := lru.New[string, *selector.Transitions](tenants) // errors only on size <= 0
	return &Learned{tables: c, maxTools: 4096}
}

// For returns the tenant's table, creating it on first use; nil l gives nil
// (searches then use only the policy's seeded transitions).
func (l *Learned) For(tenant string) *selector.Transitions {
	if l == nil {
		return nil
	}
	if t, ok := l.tables.Get(tenant); ok {
		return t
	}
	t := selector.NewTransitions(l.maxTools)
	if prev, ok, _ := l.tables.PeekOrAdd(tenant, t); ok {
		return prev
	}
	return t
}
