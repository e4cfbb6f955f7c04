package cmd

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/watch"
)

// env is what every command needs, built per run so two runs share nothing.
type env struct {
	app.Settings
	out    io.Writer
	errOut io.Writer
	stdin  io.Reader
}

// Names of the persistent flags every command shares.
const (
	flagProvider = "provider"
	flagGPU      = "gpu"
	flagRegion   = "region"
	flagWindow   = "window"
	flagConfig   = "config"
	flagSeed     = "seed"
)

// addCommonFlags adds the common flags; setup reads them back from the flag set.
func (c *cli) addCommonFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.String(flagProvider, "", "market data sources, a comma list of "+joinNames(c.table.Names())+" (default: config providers, else "+c.table.Fallback()+")")
	pf.String(flagGPU, "", "GPU models, a comma list such as H100,A100 (one of "+strings.Join(domain.GPUModels, ", ")+")")
	pf.String(flagRegion, "", "regions, a comma list such as us-east-1,eastus")
	pf.String(flagWindow, "", "history window: "+domain.WindowForm+" (default: config window, else 24h)")
	pf.String(flagConfig, "", "config file (default: $GPUMARKET_CONFIG, else $XDG_CONFIG_HOME/gpumarket/config.yaml)")
	pf.Int64(flagSeed, 0, "seed of the simulated market (default: config sim.seed, else 1)")
}

// setup loads the config (Default → file → env → flags → Validate) and the query.
func (c *cli) setup(cmd *cobra.Command) (*env, error) {
	// A bad flag is bad usage (exit 2) whatever the config file holds.
	flags := cmd.Flags()
	var provs, gpus, regions []string
	var window time.Duration
	var err error
	if flags.Changed(flagProvider) {
		v, _ := flags.GetString(flagProvider)
		if provs, err = parseProviderFlag(v, c.table.Names()); err != nil {
			return nil, err
		}
	}
	if flags.Changed(flagGPU) {
		v, _ := flags.GetString(flagGPU)
		if gpus, err = parseGPUFlag(v); err != nil {
			return nil, err
		}
	}
	if flags.Changed(flagRegion) {
		v, _ := flags.GetString(flagRegion)
		if regions, err = parseRegionFlag(v); err != nil {
			return nil, err
		}
	}
	if flags.Changed(flagWindow) {
		v, _ := flags.GetString(flagWindow)
		if window, err = domain.ParseWindow(v); err != nil {
			return nil, usagef("--window %q: want %s", v, domain.WindowForm)
		}
	}

	path, _ := flags.GetString(flagConfig)
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	if gpus != nil {
		cfg.GPUs = gpus
	}
	if regions != nil {
		cfg.Regions = regions
	}
	if window > 0 {
		cfg.Window = config.Window(window)
	}
	if flags.Changed(flagSeed) {
		cfg.Sim.Seed, _ = flags.GetInt64(flagSeed)
	}
	if err := cfg.Validate(); err != nil {
		// A bad environment variable is bad input as a bad flag is.
		if ke := (*config.KeyError)(nil); errors.As(err, &ke) && ke.Key == config.EnvSimSpeed {
			return nil, usagef("%s", err)
		}
		if cfg.Path != "" {
			return nil, fmt.Errorf("config %s: %w", cfg.Path, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := cfg.CheckProviders(c.table.Names()); err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	rules, err := watch.ConfigRules(cfg)
	if err != nil {
		return nil, err
	}
	if provs != nil {
		cfg.Providers = provs
	}
	if len(cfg.Providers) == 0 {
		cfg.Providers = []string{c.table.Fallback()}
	}

	dataDir, err := config.DataDir()
	if err != nil {
		return nil, err
	}
	e := &env{
		Settings: app.Settings{Config: cfg, Rules: rules, DataDir: dataDir, Query: domain.Query{
			Providers: cfg.Providers,
			GPUs:      cfg.GPUs,
			Regions:   cfg.Regions,
			Window:    cfg.Window.D(),
		}},
		out:    cmd.OutOrStdout(),
		errOut: cmd.ErrOrStderr(),
		stdin:  cmd.InOrStdin(),
	}
	e.Log = slog.New(newLineHandler(e.errOut, logLevel(slog.LevelWarn)))
	if e.Clock, err = c.simClock(cfg, dataDir); err != nil {
		return nil, err
	}
	return e, nil
}

// simClock opens the data dir's clock; a fast one runs the simulated market only.
func (c *cli) simClock(cfg config.Config, dataDir string) (*sim.Clock, error) {
	if cfg.Sim.Speed > 1 {
		for _, p := range cfg.Providers {
			if !c.table.Describe(p).Simulated {
				return nil, usagef("sim.speed %d (%s) runs the simulated market's clock only; the provider %s keeps the wall clock: use --provider %s, or leave the speed at 1",
					cfg.Sim.Speed, config.EnvSimSpeed, p, c.table.Fallback())
			}
		}
	}
	clock, err := sim.OpenClock(dataDir, cfg.Sim.Speed)
	var mm *sim.SpeedMismatchError
	if errors.As(err, &mm) {
		return nil, usagef("%s", err)
	}
	return clock, err
}

// parseProviderFlag reads --provider: a comma list of the known names.
func parseProviderFlag(v string, known []string) ([]string, error) {
	list := domain.SplitList(v)
	if len(list) == 0 {
		return nil, usagef("--provider %q: want a comma list of %s", v, joinNames(known))
	}
	for i, p := range list {
		p = strings.ToLower(p)
		list[i] = p
		if !slices.Contains(known, p) {
			return nil, usagef("--provider %q: unknown provider %q; want a comma list of %s", v, p, joinNames(known))
		}
	}
	return dedupe(list), nil
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

// parseGPUFlag reads --gpu, returning the catalog's spelling.
func parseGPUFlag(v string) ([]string, error) {
	list := domain.SplitList(v)
	if len(list) == 0 {
		return nil, usagef("--gpu %q: want a comma list of %s", v, strings.Join(domain.GPUModels, ", "))
	}
	for i, g := range list {
		m, ok := config.CanonicalGPU(g)
		if !ok {
			return nil, usagef("--gpu %q: unknown GPU %q; want a comma list of %s", v, g, strings.Join(domain.GPUModels, ", "))
		}
		list[i] = m
	}
	return dedupe(list), nil
}

// parseRegionFlag reads --region; whether a cloud has it is its provider's call.
func parseRegionFlag(v string) ([]string, error) {
	list := domain.SplitList(v)
	if len(list) == 0 {
		return nil, usagef("--region %q: want a comma list of regions (%s)", v, config.RegionForm)
	}
	for i, r := range list {
		r = strings.ToLower(r)
		list[i] = r
		if !config.ValidRegion(r) {
			return nil, usagef("--region %q: bad region %q; want a comma list of regions (%s)", v, r, config.RegionForm)
		}
	}
	return dedupe(list), nil
}
