package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"

	"github.com/gpumarket/gpumarket/watch"
)

// exitFired is `watch --once`'s exit code when an alert fired.
const exitFired = 3

func (cl *cli) watchCmd() *cobra.Command {
	var once bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "watch",
		Short: "Evaluate the watch rules headless and tell their alerts (for systemd or cron)",
		Long: `watch evaluates the rules of the config's watch: list and of the rules made in
the TUI (<data dir>/` + watch.RulesFileName + `), without a screen, and logs one line per
alert on stdout; notify: sends each alert to a command and a webhook.

It fetches only what its rules need: the spot and bucket rules' instance
types and regions (the config's gpus: and regions: filters are for the TUI),
a block search per block rule every 10 minutes (its every:), the ledger for
starts_in rules, and for idle rules the usage of the ledger's running rows
(as the usage command reads it, kept 5 minutes). What fired and what is still to deliver is kept in
<data dir>/` + watch.StateFileName + `: a restart neither repeats an alert nor loses one.

It exits 2 for a bad configuration (with file:line:col) and 1 for a
failure a restart may cure (the data dir cannot be written, a state or
ledger of a newer gpumarket); a cloud or a webhook that fails is logged and
tried again. A damaged watch.db is moved aside with one warning and a new
one made, in which the rules whose condition holds are not told again.
SIGTERM finishes the deliveries in flight, then exits. --once evaluates
every rule once, delivers what is owed and exits 0 if no alert fired, 3 if
one did.`,
		Example: `  gpumarket watch                      # until SIGTERM
  gpumarket watch --once; [ $? -eq 3 ] && echo "an alert fired"`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			return cl.runWatch(cmd, once, timeout)
		},
	}
	c.Flags().BoolVar(&once, "once", false, "evaluate every rule once, deliver, exit 0 if none fired and 3 if any did")
	c.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "with --once: how long to wait for the market to load")
	return c
}

func (cl *cli) runWatch(cmd *cobra.Command, once bool, timeout time.Duration) error {
	a, err := cl.newApp(cmd)
	if err != nil {
		return err
	}
	defer a.Close()
	e := a.env
	// Headless: the log is stderr, alerts are stdout.
	e.Log = slog.New(slog.NewTextHandler(e.errOut, &slog.HandlerOptions{Level: logLevel(slog.LevelInfo)}))

	fileRules, err := a.fileRules()
	if err != nil {
		return err
	}
	if err := a.checkWatchRules(); err != nil {
		return err
	}
	if err := checkRules(a.rulesFile(), fileRules, a.inUse()); err != nil {
		return err
	}
	all := append(append([]watch.Spec(nil), e.Rules...), fileRules...)
	if len(all) == 0 {
		where := "no config file was read"
		if e.Config.Path != "" {
			where = "config " + e.Config.Path
		}
		return usagef("no watch rules: add a watch: list to the config (%s), or make rules in the TUI with a; see the README's Watch section", where)
	}
	ctx := cmd.Context()
	// The providers serve the config's regions; the market the rules'.
	ps, err := a.Providers(ctx)
	if err != nil {
		return err
	}
	market := &watchMarket{a: a, ps: ps, base: e.Query}
	h, err := market.For(all)
	if err != nil {
		return err
	}
	svc, err := a.Booking(ps, 0)
	if err != nil {
		return err
	}
	if !once {
		a.DriveJobs(svc, ps)
	}
	ev, err := a.newWatcher(h, svc, a.Tracker(ps), market.For, func(al watch.Alert) { fmt.Fprintln(e.out, al.Line()) })
	if err != nil {
		return err
	}
	e.Log.Info("watching", "rules", len(ev.Rules()), "providers", strings.Join(e.Query.Providers, ","), "state", filepath.Join(e.DataDir, watch.StateFileName))
	if a.Simulated() {
		e.Log.Warn(a.table.SimBanner())
	}
	if once {
		var snap *feed.Snapshot
		if h != nil {
			if snap, err = a.waitReady(ctx, h, timeout); err != nil {
				// Not a configuration error: the other rules still run.
				e.Log.Warn("the market did not load: spot and bucket rules are not evaluated this time", "err", err)
				snap = nil
			}
		}
		n, err := ev.Once(ctx, snap)
		if err != nil {
			e.Log.Error("watch", "err", err)
		}
		if n > 0 {
			return reported(exitFired)
		}
		return nil
	}
	// Until SIGTERM; Run returns once the deliveries in flight are done.
	ev.Run(ctx)
	return nil
}

func (a *runner) rulesFile() string { return filepath.Join(a.DataDir, watch.RulesFileName) }

// fileRules reads the rules made in the TUI.
func (a *runner) fileRules() ([]watch.Spec, error) {
	data, err := os.ReadFile(a.rulesFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read rules file: %w", err)
	}
	return watch.ParseRules(a.rulesFile(), data, a.Config.Notify)
}

// checkRules refuses a rule the providers in use cannot serve (exit 2).
func checkRules(file string, rules []watch.Spec, descs []domain.Descriptor) error {
	for i, w := range rules {
		if err := watch.Check(w, descs); err != nil {
			return watch.Place(file, w, i, err)
		}
	}
	return nil
}

func (a *runner) inUse() []domain.Descriptor {
	out := make([]domain.Descriptor, len(a.Query.Providers))
	for i, n := range a.Query.Providers {
		out[i] = a.table.Describe(n)
	}
	return out
}

func (a *runner) checkWatchRules() error {
	return checkRules(a.Config.Path, a.Rules, a.inUse())
}

// Watcher runs the process's one evaluator; a state it cannot open is one warning,
// since the TUI and serve must keep ending scheduled fleets.
func (a *runner) Watcher(h *feed.Hub, svc *ledger.Service) (*watch.Evaluator, error) {
	ev, err := a.newWatcher(h, svc, a.Tracker(hubProviders(h)), nil, func(al watch.Alert) {
		a.Log.Info("alert", "rule", al.Rule, "id", al.ID, "text", al.Text)
	})
	if err != nil {
		if _, bad := usageMessage(err); bad {
			return nil, err
		}
		a.Warnf("alerts are off in this run: %v", err)
		return nil, nil
	}
	a.RunWatcher(ev)
	return ev, nil
}

// newWatcher checks the rules and builds the evaluator.
func (a *runner) newWatcher(h *feed.Hub, svc *ledger.Service, tracker *ledger.Tracker, market func([]watch.Spec) (*feed.Hub, error),
	onAlert func(watch.Alert)) (*watch.Evaluator, error) {
	if err := a.checkWatchRules(); err != nil {
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
	n := a.Config.Notify
	var notifiers []watch.Notifier
	if len(n.Command) > 0 {
		notifiers = append(notifiers, watch.NewCommand(n))
	}
	if n.Webhook != nil {
		notifiers = append(notifiers, watch.NewWebhook(*n.Webhook))
	}
	var used watch.UsageSource
	if tracker != nil {
		used = tracker // the TUI's Usage view shares it: one metrics read per TTL
	}
	return watch.New(watch.Options{
		Hub: h, Market: market, Offerings: svc, Ledger: svc.Store(), State: st, Planner: watchPlanner{a: a, svc: svc}, Usage: used,
		Rules: a.Rules, ConfigPath: a.Config.Path, Notify: n, Notifiers: notifiers,
		RulesFile: a.rulesFile(),
		Check:     func(w watch.Spec) error { return watch.Check(w, descs) },
		MaxLead:   lead, Describe: svc.Describe, Logger: a.Log, OnAlert: onAlert, Now: a.Now,
	})
}

// watchMarket is a headless watch's hub, widened when a new rule needs more.
type watchMarket struct {
	a    *runner
	ps   []domain.Provider
	base domain.Query

	mu   sync.Mutex
	q    domain.Query
	hub  *feed.Hub
	stop context.CancelFunc
}

// For returns the hub over what rules read (nil: none).
func (m *watchMarket) For(rules []watch.Spec) (*feed.Hub, error) {
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
	ctx, cancel := context.WithCancel(m.a.Context())
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
	out := append([]string(nil), a...)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
