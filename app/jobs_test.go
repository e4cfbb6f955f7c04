package app

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// A long-running process's driver reads each lane's risk off its hub's
// latest snapshot; without a hub (job run) it keeps the plan's.
func TestJobDriverReadsTheHubsRisk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := simSettings(t, domain.Query{Providers: []string{"sim"}, Window: 24 * time.Hour})
	// The snapshot to compare with comes from a hub of another app.
	other := New(ctx, s, DefaultTable(), nil)
	ps, err := other.Providers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := other.HubOver(ps).WaitReady(ctx)
	other.Close()
	if err != nil || len(snap.Pools) == 0 {
		t.Fatalf("snapshot: %v", err)
	}
	a := New(ctx, s, DefaultTable(), nil)
	defer a.Close()
	if ps, err = a.Providers(ctx); err != nil {
		t.Fatal(err)
	}
	pv := snap.Pools[len(snap.Pools)/2]
	if _, ok := a.poolRisk(pv.Key, 2); ok {
		t.Error("a risk read without a hub")
	}
	if _, err := a.HubOver(ps).WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok := a.poolRisk(pv.Key, 2)
	want := planner.RiskOf(pv.Pool, nil).ForInstances(2)
	if !ok || got.InterruptionsPerHour <= 0 || got.InterruptionsPerHour != want.InterruptionsPerHour || got.Availability != want.Availability {
		t.Errorf("risk of %s: %+v, %v; want %+v", pv.Key, got, ok, want)
	}
	if _, ok := a.poolRisk("sim/nowhere/none", 2); ok {
		t.Error("a risk for a pool the market does not have")
	}
}

// simSettings is a run over the simulated market in a data dir of the test's.
func simSettings(t *testing.T, q domain.Query) *Settings {
	t.Helper()
	return &Settings{Config: config.Default(), Query: q, DataDir: t.TempDir(), Log: slog.New(slog.DiscardHandler)}
}

// TestHoldWithinCap: a job's hold over budget.max_booking_usd is refused
// naming the cap, compared to the cent as the ledger compares; no cap
// holds anything.
func TestHoldWithinCap(t *testing.T) {
	for _, c := range []struct {
		capUSD, holdUSD float64
		refused         bool
	}{
		{0, 1e9, false},
		{100, 99.99, false},
		{100, 100.004, false}, // the same cent
		{100, 100.01, true},
		{100, 250, true},
	} {
		err := HoldWithinCap(ledger.Budget{MaxBookingUSD: c.capUSD}, c.holdUSD)
		var be *ledger.BudgetError
		if got := errors.As(err, &be); got != c.refused || (got && (be.Cap != "max_booking_usd" || be.CostUSD != c.holdUSD)) {
			t.Errorf("cap $%v hold $%v: err %v; want refused %v", c.capUSD, c.holdUSD, err, c.refused)
		}
	}
}
