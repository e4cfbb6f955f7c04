package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// usageReporter is a provider's usage as a test wants it: a report per
// ledger row id, a failure for ids in fail; it counts its calls.
type usageReporter struct {
	mu      sync.Mutex
	reports map[string]domain.UsageReport
	fail    map[string]error
	calls   int
}

func (u *usageReporter) Usage(_ context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls++
	if err := u.fail[q.Ref]; err != nil {
		return domain.UsageReport{}, err
	}
	return u.reports[q.Ref], nil
}

// hourly is an instance running over [from, to) hours before fixedNow
// (to 0: still running), busy share in every hour.
func hourly(id, typ string, from, to int, share float64, spot bool) domain.InstanceUsage {
	in := domain.InstanceUsage{ID: id, InstanceType: typ, Zone: "us-east-1a", Spot: spot, Start: fixedNow.Add(-time.Duration(from) * time.Hour)}
	if to > 0 {
		in.End = fixedNow.Add(-time.Duration(to) * time.Hour)
	}
	for h := from; h > to; h-- {
		in.Busy = append(in.Busy, domain.BusySample{At: fixedNow.Add(-time.Duration(h) * time.Hour), Period: time.Hour, Share: share})
	}
	return in
}

// usageFixtureRows are a workshop's week: a block of 2 × p5 running half
// idle, a fleet whose spot instances were interrupted, an idle
// reservation, a block without metrics, booked by three people.
func usageFixtureRows() ([]ledger.Entry, *usageReporter) {
	now := fixedNow
	spec, _ := json.Marshal(domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"g6e.xlarge"}, TargetCapacity: 4, OnDemandBase: 1})
	rows := []ledger.Entry{
		{ID: "01JUBLOCK", Kind: ledger.KindBlock, Provider: "sim", Cloud: "aws", State: ledger.StateActive, Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", InstanceCount: 2, GPUCount: 16, Start: now.Add(-50 * time.Hour), End: now.Add(22 * time.Hour),
			CostUSD: 6000, ProviderRef: "cr-0123456789abcdef0", Actor: "local:alice", CreatedAt: now.Add(-60 * time.Hour), IdemKey: "cb-1"},
		{ID: "01JUFLEET", Kind: ledger.KindFleet, Provider: "sim", Cloud: "aws", State: ledger.StateActive, Region: "us-east-1",
			InstanceType: "g6e.xlarge", InstanceCount: 4, GPUCount: 4, Start: now.Add(-30 * time.Hour), USDHour: 2.5,
			CostNote: "estimate: first hour at current prices", ProviderRef: "fleet-0001", Actor: "ssh:SHA256:Zm9v bob@laptop",
			CreatedAt: now.Add(-30 * time.Hour), IdemKey: "tok-1", Request: spec},
		{ID: "01JURES", Kind: ledger.KindReservation, Provider: "sim", Cloud: "azure", State: ledger.StateEnded, Region: "westeurope", Zone: "2",
			InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 1, GPUCount: 1, Start: now.Add(-100 * time.Hour), End: now.Add(-76 * time.Hour),
			CostUSD: 88.15, ProviderRef: "res-a100", Actor: "ssh:SHA256:cXV4", CreatedAt: now.Add(-100 * time.Hour), IdemKey: "res-1"},
		{ID: "01JUNOMET", Kind: ledger.KindBlock, Provider: "sim", Cloud: "aws", State: ledger.StateEnded, Region: "us-west-2", Zone: "us-west-2b",
			InstanceType: "p5.48xlarge", InstanceCount: 1, GPUCount: 8, Start: now.Add(-140 * time.Hour), End: now.Add(-116 * time.Hour),
			CostUSD: 944, ProviderRef: "cr-0fedcba9876543210", Actor: "local:alice", CreatedAt: now.Add(-150 * time.Hour), IdemKey: "cb-2"},
	}
	rep := &usageReporter{reports: map[string]domain.UsageReport{
		"01JUBLOCK": {Source: "CloudWatch CWAgent nvidia_smi_utilization_gpu", Instances: []domain.InstanceUsage{
			hourly("i-1", "p5.48xlarge", 50, 0, 0.9, false), hourly("i-2", "p5.48xlarge", 40, 0, 0.1, false)}},
		"01JUFLEET": {Source: "CloudWatch CWAgent nvidia_smi_utilization_gpu", Instances: []domain.InstanceUsage{
			hourly("i-od", "g6e.xlarge", 30, 0, 0.8, false), hourly("i-s1", "g6e.xlarge", 30, 0, 0.7, true),
			func() domain.InstanceUsage {
				in := hourly("i-s2", "g6e.xlarge", 30, 20, 0.6, true)
				in.Interrupted = true
				return in
			}()}},
		"01JURES":   {Source: "Azure Monitor Percentage CPU (CPU as a stand-in: no GPU metrics)", Instances: []domain.InstanceUsage{hourly("vm-0", "Standard_NC24ads_A100_v4", 100, 76, 0.05, false)}},
		"01JUNOMET": {Note: "CloudWatch: no datapoints", Instances: []domain.InstanceUsage{hourly("i-9", "p5.48xlarge", 140, 116, -1, false)}},
	}}
	// An instance with share -1 has no samples: no metrics.
	for k, r := range rep.reports {
		for i := range r.Instances {
			if len(r.Instances[i].Busy) > 0 && r.Instances[i].Busy[0].Share < 0 {
				r.Instances[i].Busy = nil
			}
		}
		rep.reports[k] = r
	}
	return rows, rep
}

// newUsageFixture is a session over a ledger of usageFixtureRows with
// budget.max_idle_pct 50, sized w×h, its first report loaded.
func newUsageFixture(t *testing.T, role Role, w, h int) (*Model, *usageReporter) {
	t.Helper()
	return newUsageFixtureWith(t, Options{Role: role}, w, h)
}

// newUsageFixtureWith is newUsageFixture with more options (a watch).
func newUsageFixtureWith(t *testing.T, opt Options, w, h int) (*Model, *usageReporter) {
	t.Helper()
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rows, rep := usageFixtureRows()
	for _, r := range rows {
		if _, err := st.RecordIntent(context.Background(), r, nil); err != nil {
			t.Fatal(err)
		}
	}
	tr := ledger.NewTracker(ledger.TrackerOptions{Ledger: st, Now: nowFn, MaxIdlePct: 50,
		Reporter: func(name string) (domain.UsageReporter, bool) { return rep, name == "sim" }})
	opt.Now, opt.NoColor, opt.Actor, opt.Usage = nowFn, true, "local:tester", tr
	m := newBare(opt)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	_, cmd := m.Update(snapshotMsg{snap: fixtureSnapshot()})
	run(m, cmd)
	return m, rep
}

func showView(t *testing.T, m *Model, title string) {
	t.Helper()
	for i := 0; i < len(m.views) && m.views[m.active].Title() != title; i++ {
		press(m, "tab")
	}
	if m.views[m.active].Title() != title {
		t.Fatalf("no %s view", title)
	}
}

func TestGoldenUsage(t *testing.T) {
	for _, sz := range goldenSizes {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m, _ := newUsageFixture(t, RoleViewer, sz[0], sz[1])
			showView(t, m, "Usage")
			golden.RequireEqual(t, ansi.Strip(m.View().Content))
		})
	}
}

func TestUsageViewRowsAndAlert(t *testing.T) {
	m, rep := newUsageFixture(t, RoleViewer, 120, 40)
	showView(t, m, "Usage")
	scr := ansi.Strip(m.View().Content)
	lines := strings.Split(scr, "\n")
	// The header names the running block, idle past 50 %; read-only
	// sessions see the view and the alert.
	if !strings.Contains(lines[1], "⚠ idle") || !strings.Contains(lines[1], "…UBLOCK") || !strings.Contains(lines[0], "read-only") {
		t.Errorf("header:\n%s\n%s", lines[0], lines[1])
	}
	for _, want := range []string{"no metrics", "DAY (UTC)", "█", "▒", "alice", "bob@laptop"} {
		if !strings.Contains(scr, want) {
			t.Errorf("screen lacks %q:\n%s", want, scr)
		}
	}
	// The most idle row first: the block, idle the most dollars.
	u := m.views[len(m.views)-1].(*usageView)
	if len(u.rep.Rows) != 4 || u.rep.Rows[0].ID != "01JUBLOCK" {
		t.Fatalf("rows %+v", u.rep.Rows)
	}
	for _, r := range u.rep.Rows {
		if r.ID == "01JUNOMET" && (!r.NoMetrics() || !strings.Contains(present.UsageBusy.Cell(&r), "no metrics")) {
			t.Errorf("the block without metrics reads %q", present.UsageBusy.Cell(&r))
		}
	}
	// A tick within a minute asks nothing; after it, the tracker (whose
	// cache still holds) answers without asking the provider again.
	calls := rep.calls
	_, cmd := m.Update(snapshotMsg{snap: fixtureSnapshot()})
	run(m, cmd)
	if rep.calls != calls {
		t.Errorf("a tick within the minute asked the provider again (%d → %d calls)", calls, rep.calls)
	}
	press(m, "down", "down")
	if u.cur != 2 || !strings.Contains(ansi.Strip(m.View().Content), u.rep.Rows[2].ID) {
		t.Errorf("cursor %d; the detail line names the row under it", u.cur)
	}
}

func TestUsageViewWithoutLedgerAndTinyTerminals(t *testing.T) {
	m := newTestModel(t, 80, 24, Options{})
	showView(t, m, "Usage")
	if !strings.Contains(ansi.Strip(m.View().Content), "No ledger in this session") {
		t.Errorf("usage without a ledger:\n%s", ansi.Strip(m.View().Content))
	}
	for _, sz := range [][2]int{{20, 5}, {1, 1}, {0, 0}, {40, 10}} {
		m, _ := newUsageFixture(t, RoleBooker, sz[0], sz[1])
		showView(t, m, "Usage")
		scr := m.View().Content
		for i, l := range strings.Split(ansi.Strip(scr), "\n") {
			if cellWidth(l) > sz[0] {
				t.Errorf("%dx%d: line %d is %d cells wide: %q", sz[0], sz[1], i, cellWidth(l), l)
			}
		}
		if n := strings.Count(scr, "\n") + 1; sz[1] > 0 && n > sz[1] {
			t.Errorf("%dx%d: %d lines", sz[0], sz[1], n)
		}
	}
}

func TestUsageViewShowsAnError(t *testing.T) {
	m, _ := newUsageFixture(t, RoleBooker, 100, 30)
	u := m.views[len(m.views)-1].(*usageView)
	showView(t, m, "Usage") // showing it asks again: the error is the answer
	u.Update(loadedMsg[ledger.UsageReport]{seq: u.seq, err: fmt.Errorf("ledger is locked")})
	if !strings.Contains(ansi.Strip(m.View().Content), "usage error: ledger is locked") {
		t.Errorf("screen:\n%s", ansi.Strip(m.View().Content))
	}
	// An answer to an older request is dropped.
	u.Update(loadedMsg[ledger.UsageReport]{seq: u.seq - 1, val: ledger.UsageReport{}})
	if len(u.rep.Rows) == 0 {
		t.Error("an old answer replaced the report")
	}
}

// TestUsageViewShowsALaunchAtOnce: a row written to the ledger (a fleet
// launched in this session or another) is in the Usage view when it is
// next shown; it used to wait for the next minute's reload and the
// tracker's five-minute cache, saying "Nothing in the ledger ran".
func TestUsageViewShowsALaunchAtOnce(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rows, rep := usageFixtureRows()
	tr := ledger.NewTracker(ledger.TrackerOptions{Ledger: st, Now: nowFn,
		Reporter: func(name string) (domain.UsageReporter, bool) { return rep, name == "sim" }})
	m := newBare(Options{Now: nowFn, NoColor: true, Actor: "local:tester", Usage: tr})
	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	_, cmd := m.Update(snapshotMsg{snap: fixtureSnapshot()})
	run(m, cmd)
	showView(t, m, "Usage")
	if scr := ansi.Strip(m.View().Content); !strings.Contains(scr, "Nothing in the ledger ran") {
		t.Fatalf("empty ledger:\n%s", scr)
	}
	press(m, "esc")
	if _, err := st.RecordIntent(context.Background(), rows[1], nil); err != nil { // the running fleet
		t.Fatal(err)
	}
	showView(t, m, "Usage")
	if scr := ansi.Strip(m.View().Content); !strings.Contains(scr, "1 row ·") || !strings.Contains(scr, "g6e.xlarge") {
		t.Fatalf("after a launch:\n%s", scr)
	}
}
