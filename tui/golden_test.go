package tui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/store"
)

// The golden screens are what a person sees, ANSI stripped. Regenerate
// with `go test ./tui -update` and read the diff before committing.

var goldenSizes = [][2]int{{120, 40}, {80, 24}}

func TestGoldenMarket(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newTestModel(t, sz[0], sz[1], Options{})
			press(m, "down", "space", "down", "down")
			golden.RequireEqual(t, ansi.Strip(m.View().Content))
		})
	}
}

func TestGoldenMarketFiltered(t *testing.T) {
	m := newTestModel(t, 80, 24, Options{})
	press(m, "/", "h", "1", "0", "0", "enter")
	golden.RequireEqual(t, ansi.Strip(m.View().Content))
}

func TestGoldenChart(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newTestModel(t, sz[0], sz[1], Options{})
			press(m, "enter")
			golden.RequireEqual(t, ansi.Strip(m.View().Content))
		})
	}
}

func TestGoldenChartMarked(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newTestModel(t, sz[0], sz[1], Options{})
			press(m, "space", "space", "space", "enter", "w", "w")
			golden.RequireEqual(t, ansi.Strip(m.View().Content))
		})
	}
}

func TestGoldenHelp(t *testing.T) {
	m := newTestModel(t, 120, 40, Options{})
	press(m, "?")
	golden.RequireEqual(t, ansi.Strip(m.View().Content))
}

// goldenMoney renders a money view of a fixture session at each golden
// size, after keys.
func goldenMoney(t *testing.T, role Role, view string, prepare func(f *moneyFixture), keys ...string) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			f := newMoneyFixture(t, role, booking.Budget{})
			f.m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			if prepare != nil {
				prepare(f)
			}
			f.show(t, view)
			press(f.m, keys...)
			golden.RequireEqual(t, ansi.Strip(f.m.View().Content))
		})
	}
}

func TestGoldenBlocks(t *testing.T) {
	goldenMoney(t, RoleBooker, "Blocks", nil)
}

func TestGoldenBlocksConfirm(t *testing.T) {
	goldenMoney(t, RoleBooker, "Blocks", nil, "b")
}

func markTwo(f *moneyFixture) {
	f.m.market.toggleMark("sim/us-east-1/us-east-1a/p5.48xlarge")
	f.m.market.toggleMark("sim/us-east-1/us-east-1b/g6e.xlarge")
}

func TestGoldenFleet(t *testing.T) {
	goldenMoney(t, RoleBooker, "Fleet", markTwo)
}

func TestGoldenFleetConfirm(t *testing.T) {
	goldenMoney(t, RoleBooker, "Fleet", markTwo, "e", "backspace", "3", "down", "backspace", "1", "enter", "L")
}

// goldenLedgerRows are a block to come, a running fleet, a deleted one and
// a reservation past its window, booked by three people.
func goldenLedgerRows() []store.Row {
	now := fixedNow
	return []store.Row{
		{ID: "01JBLOCK", Kind: store.KindBlock, Provider: "sim", State: store.StateScheduled, Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", InstanceCount: 2, Start: now.Add(26 * time.Hour), End: now.Add(74 * time.Hour),
			CostUSD: 6000, ProviderRef: "cr-0123456789abcdef0", Actor: "local:alice", CreatedAt: now.Add(-time.Hour)},
		{ID: "01JFLEETA", Kind: store.KindFleet, Provider: "sim", State: store.StateActive, Region: "us-east-1",
			InstanceType: "p5.48xlarge,g6e.xlarge", InstanceCount: 3, Start: now.Add(-150 * time.Minute),
			CostUSD: 100, CostNote: booking.FleetEstimate{Basis: "current prices"}.FirstHourNote(), ProviderRef: "fleet-0001",
			Actor: "ssh:SHA256:Zm9vYmFy bob@laptop", CreatedAt: now.Add(-151 * time.Minute)},
		{ID: "01JFLEETB", Kind: store.KindFleet, Provider: "sim", State: store.StateDeleted, Region: "eastus",
			InstanceType: "Standard_NC4as_T4_v3", InstanceCount: 2, Start: now.Add(-30 * time.Hour), End: now.Add(-27 * time.Hour),
			CostUSD: 0.2, CostNote: booking.FleetEstimate{Basis: "current prices"}.FirstHourNote(), ProviderRef: "fleet-0000",
			Actor: "local:alice", CreatedAt: now.Add(-30 * time.Hour)},
		{ID: "01JRES", Kind: store.KindReservation, Provider: "sim", State: store.StateActive, Region: "westeurope", Zone: "2",
			InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 1, Start: now.Add(-48 * time.Hour), End: now.Add(-time.Hour),
			CostUSD: 176.3, ProviderRef: "res-a100", Actor: "ssh:SHA256:cXV4", CreatedAt: now.Add(-48 * time.Hour)},
	}
}

func TestGoldenLedger(t *testing.T) {
	goldenMoney(t, RoleViewer, "Ledger", nil)
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("rows/%dx%d", sz[0], sz[1]), func(t *testing.T) {
			f := newMoneyFixture(t, RoleViewer, booking.Budget{})
			f.m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			f.show(t, "Ledger")
			lv := f.ledger()
			lv.rows = orderLedger(goldenLedgerRows(), fixedNow)
			golden.RequireEqual(t, ansi.Strip(f.m.View().Content))
		})
	}
}

func TestGoldenHelp80(t *testing.T) {
	m := newTestModel(t, 80, 24, Options{})
	press(m, "?")
	golden.RequireEqual(t, ansi.Strip(m.View().Content))
}
