package present

import (
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/ledger"
)

// TestLedgerCostCells: the view's COST $ is a block's price and a fleet's
// hourly estimate; a fleet launched at unknown prices reads "-", never
// "NaN/h" or 0, and so does its cost so far; a block is paid up front.
func TestLedgerCostCells(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		e           ledger.Entry
		cost, soFar string
	}{
		{ledger.Entry{Kind: ledger.KindFleet, State: ledger.StateActive, USDHour: math.NaN(), ProviderRef: "f-1", CreatedAt: now.Add(-2 * time.Hour)}, "-", "-"},
		{ledger.Entry{Kind: ledger.KindFleet, State: ledger.StateActive, USDHour: 240, ProviderRef: "f-2", CreatedAt: now.Add(-2 * time.Hour)}, "240.0/h", "480.0"},
		{ledger.Entry{Kind: ledger.KindBlock, State: ledger.StateScheduled, CostUSD: 3000, Start: now.Add(time.Hour), End: now.Add(25 * time.Hour)}, "3000", "3000"},
	} {
		r := NewLedgerRow(tc.e, now)
		if got, so := LedgerCost.Cell(&r), LedgerSoFar.Cell(&r); got != tc.cost || so != tc.soFar {
			t.Errorf("%s at $%v/h: COST $ %q, SO FAR $ %q; want %q, %q", tc.e.Kind, tc.e.USDHour, got, so, tc.cost, tc.soFar)
		}
	}
}

// TestLedgerRowsAreAtNow: each row's figures are as of the time given, so
// a fleet running 2 hours at $10/h has cost $20 so far.
func TestLedgerRowsAreAtNow(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := ledger.Entry{ID: "01F", Kind: ledger.KindFleet, State: ledger.StateActive, USDHour: 10, ProviderRef: "fleet-a",
		CreatedAt: now.Add(-2 * time.Hour), CostNote: ledger.FleetEstimate{Basis: "current prices"}.Note()}
	rows := LedgerRows(now, r, r)
	if len(rows) != 2 || rows[1].ID != "01F" || rows[1].Fig.SoFar != 20 || !rows[1].Now.Equal(now) {
		t.Fatalf("rows %+v, want two rows of $20 so far at %s", rows, now)
	}
}
