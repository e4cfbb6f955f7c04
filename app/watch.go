package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/watch"
)

// RulesFile is where the TUI keeps the rules made in it.
func (a *App) RulesFile() string { return filepath.Join(a.s.DataDir, watch.RulesFileName) }

// WatchRules are the config's rules and the TUI's, checked against the
// providers in use; none at all is bad usage.
func (a *App) WatchRules() ([]watch.Spec, error) {
	var fileRules []watch.Spec
	data, err := os.ReadFile(a.RulesFile())
	switch {
	case err == nil:
		if fileRules, err = watch.ParseRules(a.RulesFile(), data, a.s.Config.Notify); err != nil {
			return nil, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read rules file: %w", err)
	}
	if err := a.CheckRules(a.s.Config.Path, a.s.Rules); err != nil {
		return nil, err
	}
	if err := a.CheckRules(a.RulesFile(), fileRules); err != nil {
		return nil, err
	}
	all := append(append([]watch.Spec(nil), a.s.Rules...), fileRules...)
	if len(all) == 0 {
		where := "no config file was read"
		if a.s.Config.Path != "" {
			where = "config " + a.s.Config.Path
		}
		return nil, Usagef("no watch rules: add a watch: list to the config (%s), or make rules in the TUI with a; see the README's Watch section", where)
	}
	return all, nil
}

// CheckRules refuses a rule of file the providers in use cannot serve (exit 2).
func (a *App) CheckRules(file string, rules []watch.Spec) error {
	descs := a.inUse()
	for i, w := range rules {
		if err := watch.Check(w, descs); err != nil {
			return watch.Place(file, w, i, err)
		}
	}
	return nil
}

// inUse is the descriptors of the query's providers.
func (a *App) inUse() []domain.Descriptor {
	out := make([]domain.Descriptor, len(a.s.Query.Providers))
	for i, n := range a.s.Query.Providers {
		out[i] = a.table.Describe(n)
	}
	return out
}

// WatcherOptions is what an evaluator is built over besides the app's settings.
type WatcherOptions struct {
	Hub     *feed.Hub
	Booking *ledger.Service
	// Tracker, when set, is shared with the TUI's Usage view: one metrics read per TTL.
	Tracker *ledger.Tracker
	// Market widens a headless watch's hub for new rules (nil: the hub is fixed).
	Market  func([]watch.Spec) (*feed.Hub, error)
	OnAlert func(watch.Alert)
}

// NewWatcher checks the config's rules and builds the evaluator.
func (a *App) NewWatcher(o WatcherOptions) (*watch.Evaluator, error) {
	if err := a.CheckRules(a.s.Config.Path, a.s.Rules); err != nil {
		return nil, err
	}
	st, err := a.WatchState()
	if err != nil {
		return nil, err
	}
	descs := a.inUse()
	var lead time.Duration
	for _, d := range descs {
		for _, t := range d.Sells {
			lead = max(lead, t.MaxLead)
		}
	}
	n := a.s.Config.Notify
	var notifiers []watch.Notifier
	if len(n.Command) > 0 {
		notifiers = append(notifiers, watch.NewCommand(n))
	}
	if n.Webhook != nil {
		notifiers = append(notifiers, watch.NewWebhook(*n.Webhook))
	}
	var used watch.UsageSource
	if o.Tracker != nil {
		used = o.Tracker
	}
	svc := o.Booking
	return watch.New(watch.Options{
		Hub: o.Hub, Market: o.Market, Offerings: svc, Ledger: svc.Store(), State: st, Planner: planRule{a: a, svc: svc}, Usage: used,
		Rules: a.s.Rules, ConfigPath: a.s.Config.Path, Notify: n, Notifiers: notifiers,
		RulesFile: a.RulesFile(),
		Check:     func(w watch.Spec) error { return watch.Check(w, descs) },
		MaxLead:   lead, Describe: svc.Describe, Logger: a.s.Log, OnAlert: o.OnAlert, Now: a.s.Now,
	})
}

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
