package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// blocksOver is a session at 120×40 showing the Blocks view with a
// search of 40 offerings of four lengths over snap.
func blocksOver(tb testing.TB, snap *feed.Snapshot) (*Model, *blocksView) {
	tb.Helper()
	f := newMoneyFixture(tb, RoleBooker, ledger.Budget{})
	f.m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	for i := 0; i < len(f.m.views) && f.m.views[f.m.active].Title() != "Blocks"; i++ {
		press(f.m, "tab")
	}
	_, cmd := f.m.Update(snapshotMsg{snap: snap})
	run(f.m, cmd)
	v := f.blocks()
	var offers []domain.Offering
	for i := range 40 {
		offers = append(offers, ledgertest.Offering("sim", fmt.Sprintf("cb-%02d", i), fixedNow.Add(time.Duration(24+i)*time.Hour),
			24*(1+i%4), 1+i%2, float64(3000+100*i)))
	}
	v.offers, v.searched, v.at = offers, true, fixedNow
	return f.m, v
}

// BenchmarkBlocksView5000 renders one frame of the Blocks view, 40
// offerings, over a market of 5,000 pools at 120×40: to compare with
// BenchmarkMarketView5000.
func BenchmarkBlocksView5000(b *testing.B) {
	m, _ := blocksOver(b, bigSnapshot(5000))
	if s := ansi.Strip(m.View().Content); !strings.Contains(s, "cb-") && !strings.Contains(s, "SPOT ALT") {
		b.Fatalf("not the Blocks view:\n%s", s)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_ = m.View()
	}
}

// The spot alternative follows the market: a snapshot where spot costs
// twice as much shows twice the SPOT ALT, not the one worked out before.
func TestBlocksSpotAltFollowsTheSnapshot(t *testing.T) {
	snap := fixtureSnapshot()
	m, v := blocksOver(t, snap)
	_ = m.View()
	before, ok := v.spotAlternativeOnce(v.offers[0])
	if !ok {
		t.Fatal("no spot alternative on the fixture market")
	}
	dear := *snap
	dear.Seq++
	dear.Pools = append([]feed.PoolView(nil), snap.Pools...)
	for i := range dear.Pools {
		pv := &dear.Pools[i]
		at, usd, ok := pv.History.Last()
		if ok {
			pv.History = pv.History.Merge([]int64{at + 60}, []float64{2 * usd})
		}
	}
	_, cmd := m.Update(snapshotMsg{snap: &dear})
	run(m, cmd)
	_ = m.View()
	after, ok := v.spotAlternativeOnce(v.offers[0])
	if !ok || !(after.Total > 1.5*before.Total) {
		t.Errorf("spot twice as dear: alternative total %v, was %v", after.Total, before.Total)
	}
	if want, _ := v.spotAlternative(v.offers[0]); want.Total != after.Total {
		t.Errorf("the remembered alternative %v is not the one worked out now %v", after.Total, want.Total)
	}
}
