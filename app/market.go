package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/watch"
)

// Market is a headless watch's hub, widened when a new rule needs more.
type Market struct {
	a    *App
	ps   []domain.Provider
	base domain.Query

	mu   sync.Mutex
	q    domain.Query
	hub  *feed.Hub
	stop context.CancelFunc
}

// Market is the market of a headless watch over ps, starting from the query.
func (a *App) Market(ps []domain.Provider) *Market {
	return &Market{a: a, ps: ps, base: a.s.Query}
}

// For returns the hub over what rules read (nil: none).
func (m *Market) For(rules []watch.Spec) (*feed.Hub, error) {
	q, ok := watch.MarketFor(m.base, rules)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ok || (m.hub != nil && covers(m.q, q)) {
		return m.hub, nil
	}
	if m.hub != nil {
		q.GPUs, q.Regions = union(m.q.GPUs, q.GPUs), union(m.q.Regions, q.Regions)
	}
	var sources []domain.Provider
	for _, p := range m.ps {
		d := p.Describe()
		if len(q.Regions) == 0 || slices.ContainsFunc(q.Regions, d.KnowsRegion) {
			sources = append(sources, p)
		}
	}
	if len(sources) == 0 {
		return m.hub, fmt.Errorf("none of the providers in use (%s) knows the regions %s", strings.Join(m.base.Providers, ", "), strings.Join(q.Regions, ", "))
	}
	ctx, cancel := context.WithCancel(m.a.ctx)
	h := m.a.StartHub(ctx, sources, q)
	if m.stop != nil {
		m.stop()
	}
	m.q, m.hub, m.stop = q, h, cancel
	return h, nil
}

// covers reports whether have holds all of want (empty: everything).
func covers(have, want domain.Query) bool {
	in := func(h, w []string) bool {
		if len(h) == 0 {
			return true
		}
		if len(w) == 0 {
			return false
		}
		for _, x := range w {
			if !slices.Contains(h, x) {
				return false
			}
		}
		return true
	}
	return in(have.GPUs, want.GPUs) && in(have.Regions, want.Regions)
}

func union(a, b []string) []string {
	if len(a) == 0 || len(b) == 0 {
		return nil
	}
	return appendNew(slices.Clone(a), b...)
}
