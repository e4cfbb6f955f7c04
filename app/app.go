// Package app assembles gpumarket for one run: providers, feed, ledger,
// watch and loops, from the settings cmd reads from config and flags.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/watch"
)

// App is gpumarket assembled once per run, built on first use, until Close.
type App struct {
	s     *Settings
	table Table
	// errOut takes the one-line warnings (Warnf).
	errOut io.Writer

	// ctx lives until Close, not the command's: serve drains sessions after SIGTERM.
	ctx    context.Context
	cancel context.CancelFunc
	loops  sync.WaitGroup

	// SharedWindow caps serve's shared hub at the configured window.
	SharedWindow bool

	mu    sync.Mutex
	built map[string]domain.Provider
	hist  *feed.History // opened by historyFor when a cloud is a source
	hub   *feed.Hub
	st    *ledger.Store
	usage *ledger.Tracker
	// wstate is the watch's state; watcher the one evaluator every session shares.
	wstate  *watch.State
	watcher *watch.Evaluator

	closeOnce sync.Once
}

// New is the app over s and t; nothing is built yet. s is kept, not copied.
func New(parent context.Context, s *Settings, t Table, errOut io.Writer) *App {
	if parent == nil {
		parent = context.Background()
	}
	if errOut == nil {
		errOut = io.Discard
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &App{s: s, table: t, errOut: errOut, ctx: ctx, cancel: cancel, built: map[string]domain.Provider{}}
}

// Table is the provider table the app builds from.
func (a *App) Table() Table { return a.table }

// Provider builds the named provider once.
func (a *App) Provider(ctx context.Context, name string) (domain.Provider, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.built[name]; ok {
		return p, nil
	}
	row, ok := a.table.Lookup(name)
	if !ok {
		return nil, Usagef("--provider: unknown provider %q; want a comma list of %s", name, strings.Join(a.table.Names(), ", "))
	}
	p, err := row.Build(ctx, a.s)
	if err != nil {
		return nil, err
	}
	a.built[name] = p
	return p, nil
}

// Providers builds the query's sources plus the named ones (an offering's, a row's).
func (a *App) Providers(ctx context.Context, also ...string) ([]domain.Provider, error) {
	if err := a.table.CheckRegions(a.s.Query.Providers, a.s.Query.Regions); err != nil {
		return nil, err
	}
	names := appendNew(slices.Clone(a.s.Query.Providers), also...)
	out := make([]domain.Provider, 0, len(names))
	for _, n := range names {
		p, err := a.Provider(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Hub returns the one hub over the query's sources, running until Close.
func (a *App) Hub(ctx context.Context) (*feed.Hub, error) {
	ps, err := a.Providers(ctx)
	if err != nil {
		return nil, err
	}
	return a.HubOver(ps), nil
}

// HubOver starts the hub over ps once; tests give fakes.
func (a *App) HubOver(ps []domain.Provider) *feed.Hub {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hub == nil {
		a.hub = a.startHubLocked(a.ctx, ps, a.s.Query)
	}
	return a.hub
}

// RunningHub is the hub HubOver started, nil before.
func (a *App) RunningHub() *feed.Hub {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.hub
}

// StartHub starts another hub over ps for q, sharing the history cache.
func (a *App) StartHub(ctx context.Context, ps []domain.Provider, q domain.Query) *feed.Hub {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.startHubLocked(ctx, ps, q)
}

func (a *App) startHubLocked(ctx context.Context, ps []domain.Provider, q domain.Query) *feed.Hub {
	simTick, refresh := a.s.Config.Sim.Tick.D(), a.s.Config.Refresh.D()
	desc := descriptors(ps)
	var maxWindow time.Duration
	if a.SharedWindow {
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
		Logger: a.s.Log,
		Cache:  a.historyFor(ps),
		Now:    a.s.Now,
		Speed:  a.clockSpeed(),
	})
	a.Go(func(ctx context.Context) { h.Run(ctx) })
	return h
}

// descriptors are the providers' descriptors by name.
func descriptors(ps []domain.Provider) map[string]domain.Descriptor {
	out := map[string]domain.Descriptor{}
	for _, p := range ps {
		out[p.Name()] = p.Describe()
	}
	return out
}

// historyFor opens the history cache when a source is a cloud; a cache is
// never worth failing for, so it says in one line why it goes without.
func (a *App) historyFor(ps []domain.Provider) feed.Cache {
	cloud := false
	for _, p := range ps {
		cloud = cloud || !p.Describe().Simulated
	}
	if !cloud || a.s.DataDir == "" {
		return nil
	}
	if a.hist != nil {
		return a.hist // a headless watch's wider market shares it
	}
	c, err := feed.Open(a.s.DataDir, feed.HistoryOptions{Retention: a.s.Config.Cache.Retention.D(), Logger: a.s.Log})
	if err != nil {
		a.Warnf("history cache not used, fetching the whole window: %v", err)
		return nil
	}
	if aside := c.Aside(); aside != nil {
		a.Warnf("history cache not used: %v; moved it to %s and fetching afresh", aside.Reason, aside.Path)
	}
	a.hist = c
	return c
}

// Warnf warns in one line on stderr and in the log (where the TUI's go).
func (a *App) Warnf(format string, args ...any) {
	msg := FirstLine(fmt.Sprintf(format, args...))
	fmt.Fprintf(a.errOut, "gpumarket: warning: %s\n", msg)
	a.s.Log.Info(msg)
}

// Ledger opens the ledger in the data dir once; Close closes it.
func (a *App) Ledger() (*ledger.Store, error) {
	return openOnce(&a.mu, &a.st, func() (*ledger.Store, error) { return ledger.Open(a.s.DataDir) })
}

// openOnce returns *kept, opening it under mu the first time; a failed open is tried again.
func openOnce[T any](mu *sync.Mutex, kept **T, open func() (*T, error)) (*T, error) {
	mu.Lock()
	defer mu.Unlock()
	if *kept != nil {
		return *kept, nil
	}
	v, err := open()
	if err != nil {
		return nil, err
	}
	*kept = v
	return v, nil
}

// Booking returns a booking service over the ledger and ps.
func (a *App) Booking(ps []domain.Provider, timeout time.Duration) (*ledger.Service, error) {
	st, err := a.Ledger()
	if err != nil {
		return nil, err
	}
	b := a.s.Config.Budget
	return ledger.New(st, ps, ledger.Options{
		Budget:   ledger.Budget{MaxBookingUSD: b.MaxBookingUSD, MaxDailyUSD: b.MaxDailyUSD, ConfigPath: a.s.Config.Path},
		Logger:   a.s.Log,
		Timeout:  timeout,
		Actor:    LocalActor(),
		Now:      a.s.Now,
		Describe: a.table.Describe,
	}), nil
}

// Tracker is the run's one usage tracker over ps, shared by every session so
// metrics are asked once per TTL; nil without a ledger.
func (a *App) Tracker(ps []domain.Provider) *ledger.Tracker {
	st, err := a.Ledger()
	if err != nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.usage == nil {
		a.usage = ledger.NewTracker(ledger.TrackerOptions{Ledger: st, Reporter: ledger.Reporters(ps),
			MaxIdlePct: a.s.Config.Budget.MaxIdlePct, Kept: st, Log: a.s.Log, Now: a.s.Now})
	}
	return a.usage
}

// WatchState opens the watch's state once; Close closes it.
func (a *App) WatchState() (*watch.State, error) {
	return openOnce(&a.mu, &a.wstate, func() (*watch.State, error) {
		st, err := watch.OpenState(a.s.DataDir)
		if err == nil && st.Rebuilt() != nil {
			r := st.Rebuilt()
			a.Warnf("watch state not used: %v; moved it to %s and made a new one (alerts it still owed are not sent; rules whose condition holds now are not told again)", r.Reason, r.Path)
		}
		return st, err
	})
}

// RunWatcher runs ev until Close as the process's one evaluator.
func (a *App) RunWatcher(ev *watch.Evaluator) {
	a.mu.Lock()
	a.watcher = ev
	a.mu.Unlock()
	a.Go(func(ctx context.Context) { ev.Run(ctx) })
}

// Watching is the evaluator RunWatcher runs, nil before.
func (a *App) Watching() *watch.Evaluator {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.watcher
}

// LedgerKeepEvery is how often a TUI or server reconciles; it wakes early for schedules.
const LedgerKeepEvery = time.Minute

// KeepLedger reconciles the ledger through svc every minute until Close.
func (a *App) KeepLedger(svc *ledger.Service) {
	every := a.keepEvery()
	a.Go(func(ctx context.Context) { svc.Keep(ctx, every) })
}

// Go runs loop until Close, which waits for it to return.
func (a *App) Go(loop func(context.Context)) {
	a.loops.Add(1)
	go func() {
		defer a.loops.Done()
		loop(a.ctx)
	}()
}

// Context lives until Close.
func (a *App) Context() context.Context { return a.ctx }

func (a *App) clockSpeed() int {
	if a.s.Clock == nil {
		return 1
	}
	return a.s.Clock.Speed()
}

func (a *App) keepEvery() time.Duration {
	return max(LedgerKeepEvery/time.Duration(a.clockSpeed()), 250*time.Millisecond)
}

// Close stops the loops and the hub and closes the files; safe to call twice.
func (a *App) Close() {
	a.closeOnce.Do(func() {
		a.cancel()
		a.loops.Wait()
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.st != nil {
			a.st.Close()
		}
		if a.hist != nil {
			if err := a.hist.Close(); err != nil {
				a.s.Log.Info("close history cache", "err", err)
			}
		}
		if a.wstate != nil {
			a.wstate.Close()
		}
	})
}

// appendNew appends the names list lacks; "" is no name.
func appendNew(list []string, names ...string) []string {
	for _, n := range names {
		if n != "" && !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	return list
}

// LocalActor names who acts from this terminal: "user@host".
func LocalActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	if host == "" {
		return name
	}
	return name + "@" + host
}

// Simulated reports whether the simulated market is one of the sources.
func (a *App) Simulated() bool { return a.table.Simulated(a.s.Query.Providers) }

// Settings is what a run is assembled from, built per run so two runs share nothing.
type Settings struct {
	Config config.Config
	// Rules are the config's watch rules, read and checked.
	Rules   []watch.Spec
	Query   domain.Query
	DataDir string
	// Clock is the run's one clock (sim.speed): hub, ledger, TUI and commands date by it.
	Clock *sim.Clock
	Log   *slog.Logger
}

// Now is the run's clock.
func (s *Settings) Now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// Speed is how many times faster than the wall clock Now runs.
func (s *Settings) Speed() float64 {
	if s.Clock == nil {
		return 1
	}
	return float64(s.Clock.Speed())
}

// UsageError is bad usage (exit 2): one line naming the flag and what it accepts.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a usage error; name the flag and what it accepts.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// NewSettings is a run's settings over cfg (flags applied): validated, its
// rules read, the providers provs, else the config's, else the table's
// fallback, and the data dir's clock open. The logger is the caller's.
func NewSettings(cfg config.Config, provs []string, t Table) (Settings, error) {
	if err := cfg.Validate(); err != nil {
		// A bad environment variable is bad input as a bad flag is.
		if ke := (*config.KeyError)(nil); errors.As(err, &ke) && ke.Key == config.EnvSimSpeed {
			return Settings{}, Usagef("%s", err)
		}
		if cfg.Path != "" {
			return Settings{}, fmt.Errorf("config %s: %w", cfg.Path, err)
		}
		return Settings{}, fmt.Errorf("config: %w", err)
	}
	if err := cfg.CheckProviders(t.Names()); err != nil {
		return Settings{}, fmt.Errorf("load config: %w", err)
	}
	rules, err := watch.ConfigRules(cfg)
	if err != nil {
		return Settings{}, err
	}
	if provs != nil {
		cfg.Providers = provs
	}
	if len(cfg.Providers) == 0 {
		cfg.Providers = []string{t.Fallback()}
	}

	dataDir, err := config.DataDir()
	if err != nil {
		return Settings{}, err
	}
	s := Settings{Config: cfg, Rules: rules, DataDir: dataDir, Query: domain.Query{
		Providers: cfg.Providers,
		GPUs:      cfg.GPUs,
		Regions:   cfg.Regions,
		Window:    cfg.Window.D(),
	}}
	if s.Clock, err = openClock(cfg, dataDir, t); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// openClock opens the data dir's clock; a fast one runs the simulated market only.
func openClock(cfg config.Config, dataDir string, t Table) (*sim.Clock, error) {
	if cfg.Sim.Speed > 1 {
		for _, p := range cfg.Providers {
			if !t.Describe(p).Simulated {
				return nil, Usagef("sim.speed %d (%s) runs the simulated market's clock only; the provider %s keeps the wall clock: use --provider %s, or leave the speed at 1",
					cfg.Sim.Speed, config.EnvSimSpeed, p, t.Fallback())
			}
		}
	}
	clock, err := sim.OpenClock(dataDir, cfg.Sim.Speed)
	var mm *sim.SpeedMismatchError
	if errors.As(err, &mm) {
		return nil, Usagef("%s", err)
	}
	return clock, err
}
