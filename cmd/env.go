package cmd

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
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
	s, err := app.NewSettings(cfg, provs, c.table)
	if err != nil {
		return nil, err
	}
	e := &env{Settings: s, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), stdin: cmd.InOrStdin()}
	e.Log = slog.New(newLineHandler(e.errOut, logLevel(slog.LevelWarn)))
	return e, nil
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
		m, ok := domain.CanonicalGPU(g)
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
