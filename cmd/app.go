package cmd

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"

	"github.com/gpumarket/gpumarket/watch"
)

// cli is what the command tree of one run shares; tests give their own table.
type cli struct {
	table app.Table
}

// app is gpumarket assembled once per command run and built on first use;
// Close stops what runs in the reverse order it started.
type runner struct {
	*env
	table app.Table

	// ctx lives until Close, not the command's: serve drains sessions after SIGTERM.
	ctx    context.Context
	cancel context.CancelFunc
	loops  sync.WaitGroup

	// modelsChecked: the command says itself which GPU models no pool sells.
	modelsChecked bool

	// sharedWindow caps serve's shared hub at the configured window.
	sharedWindow bool

	mu    sync.Mutex
	built map[string]domain.Provider
	hist  *feed.History // opened by historyFor when a cloud is a source
	hub   *feed.Hub
	st    *ledger.Store
	// usage is the one usage tracker of the run (usageTracker).
	usage *ledger.Tracker
	// wstate is the watch's state; watcher the one evaluator every session shares.
	wstate  *watch.State
	watcher *watch.Evaluator

	closeOnce sync.Once
}

// newApp loads the settings; nothing is built or started yet.
func (c *cli) newApp(cmd *cobra.Command) (*runner, error) {
	e, err := c.setup(cmd)
	if err != nil {
		return nil, err
	}
	return c.appOf(cmd.Context(), e), nil
}

// withApp runs f over the command's app and closes it after.
func (c *cli) withApp(cmd *cobra.Command, f func(*runner) error) error {
	a, err := c.newApp(cmd)
	if err != nil {
		return err
	}
	defer a.Close()
	return f(a)
}

// appOf is the app over settings already made (tests make their own).
func (c *cli) appOf(parent context.Context, e *env) *runner {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &runner{env: e, table: c.table, ctx: ctx, cancel: cancel, built: map[string]domain.Provider{}}
}

// provider builds the named provider once.
func (a *runner) provider(ctx context.Context, name string) (domain.Provider, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.built[name]; ok {
		return p, nil
	}
	row, ok := a.table.Lookup(name)
	if !ok {
		return nil, usagef("--provider: unknown provider %q; want a comma list of %s", name, joinNames(a.table.Names()))
	}
	p, err := row.Build(ctx, &a.Settings)
	if err != nil {
		return nil, err
	}
	a.built[name] = p
	return p, nil
}

// Providers builds the query's sources plus the named ones (an offering's, a row's).
func (a *runner) Providers(ctx context.Context, also ...string) ([]domain.Provider, error) {
	if err := a.table.CheckRegions(a.Query.Providers, a.Query.Regions); err != nil {
		return nil, err
	}
	names := append([]string(nil), a.Query.Providers...)
	for _, n := range also {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	out := make([]domain.Provider, 0, len(names))
	for _, n := range names {
		p, err := a.provider(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// reachable builds the named providers; one that cannot be built is said and left out.
func (a *runner) reachable(ctx context.Context, names []string, command string) []domain.Provider {
	var ps []domain.Provider
	for _, name := range names {
		p, err := a.provider(ctx, name)
		if err != nil {
			fmt.Fprintf(a.errOut, "gpumarket: %s: cannot reach %s: %s\n", command, name, unprefixed(name, err.Error()))
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// Hub returns the one hub over the query's sources, running until Close.
func (a *runner) Hub(ctx context.Context) (*feed.Hub, error) {
	ps, err := a.Providers(ctx)
	if err != nil {
		return nil, err
	}
	return a.hubOver(ps), nil
}

// hubOver starts the hub over ps once; tests give fakes.
func (a *runner) hubOver(ps []domain.Provider) *feed.Hub { return a.hubWith(ps, a.Query) }

// hubWith is hubOver fetching what q selects.
func (a *runner) hubWith(ps []domain.Provider, q domain.Query) *feed.Hub {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hub == nil {
		a.hub = a.startHubLocked(a.ctx, ps, q)
	}
	return a.hub
}

// startHubLocked starts a hub until ctx ends; a.mu is held.
func (a *runner) startHubLocked(ctx context.Context, ps []domain.Provider, q domain.Query) *feed.Hub {
	simTick, refresh := a.Config.Sim.Tick.D(), a.Config.Refresh.D()
	desc := map[string]domain.Descriptor{}
	for _, p := range ps {
		desc[p.Name()] = p.Describe()
	}
	var maxWindow time.Duration
	if a.sharedWindow {
		maxWindow = q.Window
	}
	h := feed.New(ps, feed.Options{
		Query:     q,
		MaxWindow: maxWindow,
		Interval: func(name string) time.Duration {
			if desc[name].Simulated {
				return simTick
			}
			return refresh
		},
		Logger: a.Log,
		Cache:  a.historyFor(ps),
		Now:    a.Now,
		Speed:  a.clockSpeed(),
	})
	a.loops.Add(1)
	go func() {
		defer a.loops.Done()
		h.Run(ctx)
	}()
	return h
}

// Ledger opens the ledger in the data dir once; Close closes it.
func (a *runner) Ledger() (*ledger.Store, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st != nil {
		return a.st, nil
	}
	st, err := ledger.Open(a.DataDir)
	if err != nil {
		return nil, err
	}
	a.st = st
	return st, nil
}

// Booking returns a booking service over the ledger and ps.
func (a *runner) Booking(ps []domain.Provider, timeout time.Duration) (*ledger.Service, error) {
	st, err := a.Ledger()
	if err != nil {
		return nil, err
	}
	return ledger.New(st, ps, ledger.Options{
		Budget:  ledger.Budget{MaxBookingUSD: a.Config.Budget.MaxBookingUSD, MaxDailyUSD: a.Config.Budget.MaxDailyUSD, ConfigPath: a.Config.Path},
		Logger:  a.Log,
		Timeout: timeout,
		Actor:   localActor(),
		Now:     a.Now,
	}), nil
}

// ledgerKeepEvery is how often a TUI or server reconciles; it wakes early for schedules.
const ledgerKeepEvery = time.Minute

// KeepLedger reconciles the ledger through svc every minute until Close.
func (a *runner) KeepLedger(svc *ledger.Service) {
	a.loops.Add(1)
	go func() {
		defer a.loops.Done()
		svc.Keep(a.ctx, a.keepEvery())
	}()
}

func (a *runner) clockSpeed() int {
	if a.Clock == nil {
		return 1
	}
	return a.Clock.Speed()
}

// keepEvery is a minute of the run's clock in wall time, at most four a second.
func (a *runner) keepEvery() time.Duration {
	return max(ledgerKeepEvery/time.Duration(a.clockSpeed()), 250*time.Millisecond)
}

// Close stops the loops and the hub and closes the files; safe to call twice.
func (a *runner) Close() {
	a.closeOnce.Do(func() {
		a.cancel()
		a.loops.Wait()
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.st != nil {
			a.st.Close()
		}
		a.closeHistory()
		if a.wstate != nil {
			a.wstate.Close()
		}
	})
}

// simulated reports whether the simulated market is one of the sources.
func (a *runner) simulated() bool { return a.table.Simulated(a.Query.Providers) }
