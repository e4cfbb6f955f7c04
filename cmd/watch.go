package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
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
			return cl.withApp(cmd, func(a *runner) error { return a.runWatch(cmd.Context(), once, timeout) })
		},
	}
	c.Flags().BoolVar(&once, "once", false, "evaluate every rule once, deliver, exit 0 if none fired and 3 if any did")
	c.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "with --once: how long to wait for the market to load")
	return c
}

func (a *runner) runWatch(ctx context.Context, once bool, timeout time.Duration) error {
	e := a.env
	// Headless: the log is stderr, alerts are stdout.
	e.Log = slog.New(slog.NewTextHandler(e.errOut, &slog.HandlerOptions{Level: logLevel(slog.LevelInfo)}))

	all, err := a.WatchRules()
	if err != nil {
		return err
	}
	// The providers serve the config's regions; the market the rules'.
	ps, err := a.Providers(ctx)
	if err != nil {
		return err
	}
	market := a.Market(ps)
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
		defer app.TrimAfterStart()()
	}
	ev, err := a.NewWatcher(app.WatcherOptions{Hub: h, Booking: svc, Tracker: a.Tracker(ps), Market: market.For,
		OnAlert: func(al watch.Alert) { fmt.Fprintln(e.out, al.Line()) }})
	if err != nil {
		return err
	}
	e.Log.Info("watching", "rules", len(ev.Rules()), "providers", strings.Join(e.Query.Providers, ","), "state", filepath.Join(e.DataDir, watch.StateFileName))
	if a.Simulated() {
		e.Log.Warn(a.Table().SimBanner())
	}
	if once {
		var snap *feed.Snapshot
		if h != nil {
			if snap, err = a.Ready(ctx, h, timeout, false, nil); err != nil {
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

// Watcher runs the process's one evaluator; a state it cannot open is one warning,
// since the TUI and serve must keep ending scheduled fleets.
func (a *runner) Watcher(h *feed.Hub, svc *ledger.Service) (*watch.Evaluator, error) {
	ev, err := a.NewWatcher(app.WatcherOptions{Hub: h, Booking: svc, Tracker: a.Tracker(hubProviders(h)),
		OnAlert: func(al watch.Alert) {
			a.Log.Info("alert", "rule", al.Rule, "id", al.ID, "text", al.Text)
		}})
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
