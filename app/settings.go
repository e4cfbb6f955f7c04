// Package app assembles gpumarket for one run: providers, feed, ledger,
// watch and loops, from the settings cmd reads from config and flags.
package app

import (
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
