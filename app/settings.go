// Package app assembles gpumarket for one run: providers, feed, ledger,
// watch and loops, from the settings cmd reads from config and flags.
package app

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/watch"
)

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
