package app

import (
	"errors"
	"fmt"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/watch"
)

// NewSettings is the settings of a run over cfg (loaded, flags applied):
// it validates cfg against the table, reads the watch rules, sets the
// providers (provs when the flag named them, else the config's, else the
// table's fallback) and opens the data dir's clock. The logger is the caller's.
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
