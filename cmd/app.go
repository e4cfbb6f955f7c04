package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// cli is what the command tree of one run shares; tests give their own table.
type cli struct {
	table app.Table
}

// runner is one command's run: its settings and streams, and the app
// assembled over them (closed after the command).
type runner struct {
	*env
	*app.App

	// modelsChecked: the command says itself which GPU models no pool sells.
	modelsChecked bool
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
	return &runner{env: e, App: app.New(parent, &e.Settings, c.table, e.errOut)}
}

// ReadySnapshot runs the hub until every source's first back-fill or timeout,
// warning of each that failed; one bad region never blanks the others' rows.
func (a *runner) ReadySnapshot(ctx context.Context, timeout time.Duration) (*feed.Snapshot, error) {
	ps, down, err := a.Reachable(ctx)
	if err != nil {
		return nil, err
	}
	return a.waitReady(ctx, a.HubOver(ps), timeout, down...)
}

// waitReady is app.Ready, told whether this command names unsold models itself.
func (a *runner) waitReady(ctx context.Context, h *feed.Hub, timeout time.Duration, down ...app.Warning) (*feed.Snapshot, error) {
	return a.Ready(ctx, h, timeout, a.modelsChecked, down)
}

// say writes a line of what happened on stderr.
func (e *env) say(msg string) { fmt.Fprintln(e.errOut, "gpumarket: "+msg) }

// hubProviders is the hub's sources; none without a hub.
func hubProviders(h *feed.Hub) []domain.Provider {
	if h == nil {
		return nil
	}
	return h.Providers()
}
