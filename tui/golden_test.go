package tui

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
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
			f := newMoneyFixture(t, role, ledger.Budget{})
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

// A workshop's fleet, Thursday 14:00 for 3 h: the window in
// local time and UTC, and who starts and stops it.
func TestGoldenFleetScheduleConfirm(t *testing.T) {
	goldenMoney(t, RoleBooker, "Fleet", markTwo, "e", "down", "down", "down", "down", "T", "h", "u", "space", "1", "4", ":", "0", "0",
		"down", "3", "h", "enter", "L")
}

// goldenLedgerRows are a block to come, a running fleet, a deleted one and
// a reservation past its window, booked by three people.
func goldenLedgerRows() []ledger.Entry {
	now := fixedNow
	return []ledger.Entry{
		{ID: "01JBLOCK", Kind: ledger.KindBlock, Provider: "sim", State: ledger.StateScheduled, Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", InstanceCount: 2, Start: now.Add(26 * time.Hour), End: now.Add(74 * time.Hour),
			CostUSD: 6000, ProviderRef: "cr-0123456789abcdef0", Actor: "local:alice", CreatedAt: now.Add(-time.Hour)},
		{ID: "01JFLEETA", Kind: ledger.KindFleet, Provider: "sim", State: ledger.StateActive, Region: "us-east-1",
			InstanceType: "p5.48xlarge,g6e.xlarge", InstanceCount: 3, Start: now.Add(-150 * time.Minute),
			USDHour: 100, CostNote: ledger.FleetEstimate{Basis: "current prices"}.Note(), ProviderRef: "fleet-0001",
			Actor: "ssh:SHA256:Zm9vYmFy bob@laptop", CreatedAt: now.Add(-151 * time.Minute)},
		{ID: "01JFLEETB", Kind: ledger.KindFleet, Provider: "sim", State: ledger.StateDeleted, Region: "eastus",
			InstanceType: "Standard_NC4as_T4_v3", InstanceCount: 2, Start: now.Add(-30 * time.Hour), End: now.Add(-27 * time.Hour),
			USDHour: 0.2, CostNote: ledger.FleetEstimate{Basis: "current prices"}.Note(), ProviderRef: "fleet-0000",
			Actor: "local:alice", CreatedAt: now.Add(-30 * time.Hour)},
		{ID: "01JRES", Kind: ledger.KindReservation, Provider: "sim", State: ledger.StateActive, Region: "westeurope", Zone: "2",
			InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 1, Start: now.Add(-48 * time.Hour), End: now.Add(-time.Hour),
			CostUSD: 176.3, ProviderRef: "res-a100", Actor: "ssh:SHA256:cXV4", CreatedAt: now.Add(-48 * time.Hour)},
		// Thursday's workshop, kept by gpumarket, and today's class, kept
		// by AWS and running.
		scheduledRow("01JWORKSHOP", "sim", "", ledger.StateScheduled, "", 30, now.Add(26*time.Hour), now.Add(29*time.Hour), ledger.KeptByGpumarket),
		scheduledRow("01JCLASS", "aws", "aws", ledger.StateActive, "fleet-0002", 12, now.Add(-50*time.Minute), now.Add(130*time.Minute), ledger.KeptByCloud),
	}
}

// scheduledRow is a fleet row scheduled from start to end, kept by k.
func scheduledRow(id, provider, cloud, state, ref string, n int, start, end time.Time, k ledger.Keeper) ledger.Entry {
	req, _ := json.Marshal(map[string]any{"Provider": provider, "Region": "us-east-1", "InstanceTypes": []string{"g6.xlarge"},
		"TargetCapacity": n, "Start": start, "End": end, "Keeper": k})
	return ledger.Entry{ID: id, Kind: ledger.KindFleet, Provider: provider, Cloud: cloud, State: state, Region: "us-east-1",
		InstanceType: "g6.xlarge", InstanceCount: n, GPUCount: float64(n), Start: start, End: end, USDHour: 0.30 * float64(n),
		CostNote: ledger.FleetEstimate{Basis: "current prices"}.Note(), ProviderRef: ref, Actor: "local:alice",
		CreatedAt: start.Add(-48 * time.Hour), Request: req, Schedule: ledger.FleetSchedule{Start: start, End: end, Keeper: keeperOr(k)}}
}

// keeperOr is the keeper a row records: a schedule written before the
// keeper was recorded was kept by the cloud.
func keeperOr(k ledger.Keeper) ledger.Keeper {
	if k == "" {
		return ledger.KeptByCloud
	}
	return k
}

// goldenFleetsNow are what the providers said of the running fleets.
func goldenFleetsNow() map[string]ledger.FleetNow {
	return map[string]ledger.FleetNow{
		"01JFLEETA": {Fleet: domain.Fleet{ID: "fleet-0001", Instances: 2, Target: 3}, At: fixedNow},
		"01JCLASS":  {Fleet: domain.Fleet{ID: "fleet-0002", Instances: 11, Target: 12}, At: fixedNow},
	}
}

func TestGoldenLedger(t *testing.T) {
	goldenMoney(t, RoleViewer, "Ledger", nil)
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("rows/%dx%d", sz[0], sz[1]), func(t *testing.T) {
			f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
			f.m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			f.show(t, "Ledger")
			lv := f.ledger()
			lv.rows, lv.fleets = orderLedger(goldenLedgerRows()), goldenFleetsNow()
			golden.RequireEqual(t, ansi.Strip(f.m.View().Content))
		})
		// An attendee (a viewer) on the workshop's row: its countdown, and
		// under it who starts and stops it.
		t.Run(fmt.Sprintf("workshop/%dx%d", sz[0], sz[1]), func(t *testing.T) {
			f := newMoneyFixture(t, RoleViewer, ledger.Budget{})
			f.m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
			f.show(t, "Ledger")
			lv := f.ledger()
			lv.rows, lv.fleets = orderLedger(goldenLedgerRows()), goldenFleetsNow()
			for i, r := range lv.rows {
				if r.ID == "01JWORKSHOP" {
					lv.cur = i
				}
			}
			golden.RequireEqual(t, ansi.Strip(f.m.View().Content))
		})
	}
}

func TestGoldenHelp80(t *testing.T) {
	m := newTestModel(t, 80, 24, Options{})
	press(m, "?")
	golden.RequireEqual(t, ansi.Strip(m.View().Content))
}
