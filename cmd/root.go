// Package cmd is gpumarket's command line: thin cobra wiring over the hub,
// the providers and the TUI. Each command has its own file.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/hub"
	"github.com/gpumarket/gpumarket/tui"
)

// newRootCmd builds the whole command tree. It is called once per run so
// that no flag value outlives a run.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gpumarket",
		Short: "A terminal UI for the GPU capacity market",
		Long: `gpumarket streams spot prices, interruption rates and capacity-block offerings
of AWS and Azure GPU instances into one live screen, compares pools by what a
job pays per useful GPU-hour, plans jobs against deadlines, and books capacity
with a keypress.

With no config file and no --provider it shows a simulated market.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRoot(cmd)
		},
	}
	root.SetFlagErrorFunc(flagErrorFunc)
	addCommonFlags(root)
	root.AddCommand(newPricesCmd(), newHistoryCmd())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands lists the constructors of the commands other files add
// (offerings, book, fleet, ledger, serve), so root.go need not be edited
// for each: a file adds itself with
//
//	func init() { extraCommands = append(extraCommands, newLedgerCmd) }
//
// The slice is written only by init functions, before main runs.
var extraCommands []func() *cobra.Command

func runRoot(cmd *cobra.Command) error {
	e, err := setup(cmd)
	if err != nil {
		return err
	}
	// Under the TUI nothing may print to the terminal: logs go to a file.
	logPath := filepath.Join(e.dataDir, "gpumarket.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer lf.Close()
	e.log = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))

	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	ps, err := e.providers(ctx)
	if err != nil {
		return err
	}
	h := e.newHub(ps)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	err = runTUI(ctx, e, h)
	cancel()
	<-done
	if errors.Is(err, context.Canceled) {
		return nil // SIGINT/SIGTERM: a clean exit
	}
	return err
}

// runTUI runs the TUI on the terminal until the user quits.
// ledgerKeepEvery is how often a running TUI or server reconciles the
// ledger: lost answers settle, and reservations that bill until released
// are released within a minute of their window's end.
const ledgerKeepEvery = time.Minute

func runTUI(ctx context.Context, e *env, h *hub.Hub) error {
	svc, st, err := e.openBooking(h.Providers(), 0)
	if err != nil {
		return err
	}
	defer st.Close()
	keepCtx, stopKeep := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		svc.Keep(keepCtx, ledgerKeepEvery)
	}()
	defer func() { stopKeep(); <-kept }() // before the store closes
	opt := e.tuiOptions(h, svc)
	opt.Role, opt.Actor, opt.Context = tui.RoleBooker, localActor(), ctx
	opt.NoColor = os.Getenv("NO_COLOR") != ""
	return tui.Run(ctx, opt)
}

// tuiOptions are what every TUI session of this process shares: the one
// hub and booking service (the ledger's transactions keep two sessions
// from buying the same offering), the filters and the risk model. The
// caller adds the session's own role, actor, colours and context.
func (e *env) tuiOptions(h *hub.Hub, svc *booking.Service) tui.Options {
	return tui.Options{
		Booking:   svc,
		Hub:       h,
		Window:    e.query.Window,
		GPUs:      e.query.GPUs,
		Regions:   e.query.Regions,
		Effective: e.effBasis(),
		Logger:    e.log,
	}
}
