package tui

import (
	"fmt"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

func benchModel(b *testing.B, noColor bool) *Model {
	b.Helper()
	m := newBare(Options{Now: nowFn, NoColor: noColor})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	m.Update(snapshotMsg{snap: bigSnapshot(5000)})
	return m
}

// BenchmarkMarketView5000 renders one frame of 5,000 pools at 120×40
// (target < 2 ms).
func BenchmarkMarketView5000(b *testing.B) {
	m := benchModel(b, false)
	press(m, "pgdown", "pgdown")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = m.View()
	}
}

// BenchmarkApplySnapshot5000 applies a snapshot in which 50 of 5,000 pools
// changed (target < 1 ms). The two snapshots alternate, so each apply
// recomputes 100 pools: the 50 that changed and the 50 that changed back.
func BenchmarkApplySnapshot5000(b *testing.B) {
	m := benchModel(b, false)
	base := m.snap
	snaps := make([]*snapshotMsg, 2)
	for k := range snaps {
		s := *base
		s.Seq = base.Seq + uint64(k) + 1
		s.Pools = append(s.Pools[:0:0], base.Pools...)
		for i := k; i < len(s.Pools); i += 100 {
			pv := &s.Pools[i]
			_, last, _ := pv.History.Last()
			at, _, _ := pv.History.Last()
			pv.History = pv.History.Merge([]int64{at + 60}, []float64{last * 1.01})
			pv.Changed = s.Seq
		}
		snaps[k] = &snapshotMsg{snap: &s}
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		// alternate, so each apply sees 50 pools change (and 50 change back)
		m.Update(*snaps[i%2])
		i++
	}
}

// BenchmarkChartView renders the chart of four pools with a day of
// five-minute prices at 120×40.
func BenchmarkChartView(b *testing.B) {
	m := benchModel(b, false)
	press(m, "space", "space", "space", "space", "enter")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		chartOf(m).dirty = true
		_ = m.View()
	}
}

// BenchmarkWindowChange5000 recomputes every row of 5,000 pools (a day of
// five-minute prices each) after `w`.
func BenchmarkWindowChange5000(b *testing.B) {
	m := benchModel(b, false)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.c.windowSeq++
		m.market.refreshWindow()
	}
}

// BenchmarkWindowKey5000 is what a user waits for after `w` at 5,000
// pools (a day of five-minute prices each, so every window holds all of
// them): the window changes, alternately between 24h and 7d, and the next
// frame is rendered. Work a window change defers to the frame is counted.
func BenchmarkWindowKey5000(b *testing.B) {
	m := benchModel(b, false)
	windows := []time.Duration{7 * 24 * time.Hour, 24 * time.Hour}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		m.c.setWindow(windows[i%2])
		m.Update(windowChangedMsg{})
		_ = m.View()
		i++
	}
}

// BenchmarkLedgerView renders one frame of the Ledger at 120×40 over 600
// rows, a third of them scheduled fleets (each cell of which reads its
// schedule from the row's request) with what their providers said.
func BenchmarkLedgerView(b *testing.B) {
	f := newMoneyFixture(b, RoleViewer, ledger.Budget{})
	f.m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	lv := f.ledger()
	var rows []ledger.Entry
	fleets := map[string]ledger.FleetNow{}
	for i := range 100 {
		for _, r := range goldenLedgerRows() {
			r.ID = fmt.Sprintf("%s-%03d", r.ID, i)
			rows = append(rows, r)
			fleets[r.ID] = ledger.FleetNow{Fleet: domain.Fleet{Instances: 11, Target: 12}, At: fixedNow}
		}
	}
	lv.rows, lv.fleets, lv.ready = orderLedger(rows), fleets, true
	lv.cur = len(lv.rows) / 2
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = lv.View()
	}
}
