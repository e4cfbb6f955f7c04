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
	for _, f := range []struct {
		name string
		list *[]string
	}{{flagProvider, &provs}, {flagGPU, &gpus}, {flagRegion, &regions}} {
		if flags.Changed(f.name) {
			v, _ := flags.GetString(f.name)
			if *f.list, err = parseList(f.name, v, c.table.Names()); err != nil {
				return nil, err
			}
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

// parseList reads a comma list of --provider (of known), --gpu (in the
// catalog's spelling) or --region (whether a cloud has it is its
// provider's call); an item it cannot read is named with what is accepted.
func parseList(flag, v string, known []string) ([]string, error) {
	bad, want, canon := "unknown provider", "a comma list of "+joinNames(known), func(s string) (string, bool) {
		s = strings.ToLower(s)
		return s, slices.Contains(known, s)
	}
	switch flag {
	case flagGPU:
		bad, want, canon = "unknown GPU", "a comma list of "+strings.Join(domain.GPUModels, ", "), func(s string) (string, bool) {
			if m, ok := domain.CanonicalGPU(s); ok {
				return m, true
			}
			return s, false
		}
	case flagRegion:
		bad, want, canon = "bad region", "a comma list of regions ("+config.RegionForm+")", func(s string) (string, bool) {
			s = strings.ToLower(s)
			return s, config.ValidRegion(s)
		}
	}
	list := domain.SplitList(v)
	if len(list) == 0 {
		return nil, usagef("--%s %q: want %s", flag, v, want)
	}
	for i, s := range list {
		var ok bool
		if list[i], ok = canon(s); !ok {
			return nil, usagef("--%s %q: %s %q; want %s", flag, v, bad, list[i], want)
		}
	}
	return dedupe(list), nil
}

func joinNames(names []string) string { return strings.Join(names, ", ") }
