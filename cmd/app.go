package cmd

import (
	"context"
	"fmt"

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

// reachable builds the named providers; one that cannot be built is said and left out.
func (a *runner) reachable(ctx context.Context, names []string, command string) []domain.Provider {
	var ps []domain.Provider
	for _, name := range names {
		p, err := a.Provider(ctx, name)
		if err != nil {
			fmt.Fprintf(a.errOut, "gpumarket: %s: cannot reach %s: %s\n", command, name, unprefixed(name, err.Error()))
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// hubProviders is the hub's sources; none without a hub.
func hubProviders(h *feed.Hub) []domain.Provider {
	if h == nil {
		return nil
	}
	return h.Providers()
}
