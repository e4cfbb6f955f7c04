package present

import (
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/series"
)

var now = time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC)

func pool(key string, gpus float64, onDemand *float64, bucket string, prices ...float64) *feed.PoolView {
	p := domain.Pool{Provider: "sim", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a",
		InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: gpus}, OnDemandUSDHour: onDemand}
	if bucket != "" {
		p.Interruption, _ = domain.NewInterruption(bucket, "test", now)
	}
	var at []int64
	for i := range prices {
		at = append(at, now.Add(time.Duration(i-len(prices)+1)*time.Hour).Unix())
	}
	return &feed.PoolView{Pool: p, Key: key, History: series.Series{}.Merge(at, prices)}
}

// TestColumnsDeclareEachFace: every column of a TUI table has a title,
// a width and a cell; every column of a CLI output a value and a field
// unique among the JSON fields and among the table's; every sort an order.
func TestColumnsDeclareEachFace(t *testing.T) {
	checkFaces(t, "market", MarketCols(View), MarketCols(Prices))
	checkFaces(t, "ledger", LedgerView, Ledger)
	checkFaces(t, "usage", UsageView, Usage)
	checkFaces(t, "offerings", BlocksView, Offerings)
	checkFaces(t, "plan", PlanView, Plan)
	checkFaces(t, "usage --by day", titled(Days), Days)
	checkFaces(t, "usage --by actor", titled(Actors), Actors)
	checkFaces(t, "alerts", Alerts, nil)
	checkFaces(t, "rules", Rules, nil)
	for _, c := range Sorts {
		if c.Compare == nil || c.SortName == "" || c.SortShort == "" || c.Title == "" {
			t.Errorf("sort %q: want a comparison, names and a view column to mark", c.SortName)
		}
	}
}

// titled is a column set's columns the TUI shows.
func titled[R any](cols []*Col[R]) (out []*Col[R]) {
	for _, c := range cols {
		if c.Title != "" {
			out = append(out, c)
		}
	}
	return out
}

// TestTotalsWithoutMetricsAreNotIdle: a day or actor without metrics has
// no busy hours ("-", not 0) and no idle dollars; with some rows without
// them, its idle dollars are marked as leaving those out.
func TestTotalsWithoutMetricsAreNotIdle(t *testing.T) {
	cell := func(cols []*Col[*ActorTotal], title string, r *ActorTotal) string {
		for _, c := range cols {
			if c.Title == title {
				return c.Cell(r)
			}
		}
		t.Fatalf("no column %q", title)
		return ""
	}
	none := &ActorTotal{Total: ledger.Total{Key: "local:alice", Rows: 2, BookedGPUHours: 8, NoMetrics: 2}}
	some := &ActorTotal{Total: ledger.Total{Key: "local:bob", Rows: 2, BookedGPUHours: 8, BusyGPUHours: 2, IdleUSD: 1234.5, NoMetrics: 1}}
	for _, tc := range []struct {
		r              *ActorTotal
		by, busy, idle string
	}{{none, "alice", "-", "no metrics"}, {some, "bob", "2.0", "$1,234.50*"}} {
		if got := [3]string{cell(Actors, "BY", tc.r), cell(Actors, "BUSY", tc.r), cell(Actors, "IDLE", tc.r)}; got != [3]string{tc.by, tc.busy, tc.idle} {
			t.Errorf("%s: got %q, want %q %q %q", tc.r.Key, got, tc.by, tc.busy, tc.idle)
		}
	}
	d := DayRows([]ledger.Total{{Key: "2026-11-17", Rows: 1, BookedGPUHours: 4, RunningGPUHours: 4}, {Key: "2026-11-18", BookedGPUHours: 8}}, 8)
	if got := Days[0].Cell(&d[0]) + " " + DayBar.Cell(&d[0]); got != "11-17 ▓▓▓▓" {
		t.Errorf("day cells: got %q, want the month and day and a bar half the peak's", got)
	}
}

func checkFaces[R any](t *testing.T, name string, view, cli []*Col[R]) {
	for _, c := range view {
		if c.Title == "" || c.Width <= 0 || c.Cell == nil || (c.MaxWidth != 0 && c.MaxWidth < c.Width) {
			t.Errorf("%s view column %q: want a title, a width and a cell", name, c.Title)
		}
	}
	json, table := map[string]bool{}, map[string]bool{}
	for _, c := range cli {
		inJSON, inTable := !c.TableOnly, c.Format != "-"
		if c.Field == "" || c.Value == nil || (inJSON && json[c.Field]) || (inTable && table[c.Field]) {
			t.Errorf("%s column %q: want a unique field and a value", name, c.Field)
		}
		json[c.Field] = json[c.Field] || inJSON
		table[c.Field] = table[c.Field] || inTable
	}
}

// TestUnknownFiguresAreUnknown: a pool without a price, GPU count,
// on-demand price or interruption data gets NaN figures, "-" cells and
// nil values, never a made-up 0.
func TestUnknownFiguresAreUnknown(t *testing.T) {
	r := Derive(pool("k", 0, nil, ""), planner.DefaultBasis, now.Add(-time.Hour).Unix(), now.Unix())
	for name, v := range map[string]float64{"spot": r.Spot, "per GPU": r.PerGPU, "savings": r.Savings, "effective": r.Effective} {
		if !math.IsNaN(v) {
			t.Errorf("%s = %v for a pool with no price, want NaN", name, v)
		}
	}
	for _, c := range []*Column{ColSpot, ColPerGPU, ColSavings, ColInterruption, ColEffective} {
		if got := c.Cell(&r); got != "-" {
			t.Errorf("%s cell %q, want -", c.Title, got)
		}
	}
	for _, c := range Prices {
		v := c.Value(&r)
		if p, ok := v.(*float64); ok && p != nil {
			t.Errorf("%s = %v, want unknown", c.Field, *p)
		}
	}
	if got := ColGPU.Cell(&r); got != "H100×?" {
		t.Errorf("GPU cell %q, want H100×?", got)
	}
}

// TestViewAndPricesShowOneFigure: the Market view's cell and the prices
// value are the same derived figure (prices rounds it for print).
func TestViewAndPricesShowOneFigure(t *testing.T) {
	r := Derive(pool("k", 8, domain.Float(98.32), ">20%", 30, 20, 25), planner.DefaultBasis, now.Add(-24*time.Hour).Unix(), now.Unix())
	want := Effective(planner.DefaultBasis, r.Pool, 25)
	if want <= 25.0/8 {
		t.Fatalf("effective %v is not dearer than the plain 3.125 $/GPU-h of a >20%% pool", want)
	}
	if math.IsNaN(want) || r.Effective != want {
		t.Fatalf("effective %v, want %v", r.Effective, want)
	}
	if got := ColEffective.Cell(&r); got != Money(want) {
		t.Errorf("EFF cell %q, want %q", got, Money(want))
	}
	if got := *ColEffective.Value(&r).(*float64); math.Abs(got-want) > 1e-6 {
		t.Errorf("effective_usd_gpu_hour %v, want %v", got, want)
	}
	if got := *ColPerGPU.Value(&r).(*float64); got != 3.125 {
		t.Errorf("spot_usd_gpu_hour %v, want 3.125", got)
	}
	if st := r.Window(); !st.OK || st.Min != 20 || st.Max != 30 {
		t.Errorf("window %+v", st)
	}
}

// TestCompareUnknownLastEitherWay: an unknown figure sorts after every
// known one in both directions; ties go by pool key.
func TestCompareUnknownLastEitherWay(t *testing.T) {
	risk, from, to := planner.DefaultBasis, now.Add(-time.Hour).Unix(), now.Unix()
	cheap := Derive(pool("b", 8, nil, "<5%", 10), risk, from, to)
	dear := Derive(pool("a", 8, nil, "<5%", 20), risk, from, to)
	unknown := Derive(pool("c", 0, nil, "", 5), risk, from, to) // no GPU count: no EFF
	for _, rev := range []bool{false, true} {
		if Compare(ColEffective, &unknown, &cheap, rev) <= 0 || Compare(ColEffective, &dear, &unknown, rev) >= 0 {
			t.Errorf("reverse=%v: an unknown effective price does not sort last", rev)
		}
	}
	if Compare(ColEffective, &cheap, &dear, false) >= 0 || Compare(ColEffective, &cheap, &dear, true) <= 0 {
		t.Error("the direction does not order known prices")
	}
	same := Derive(pool("a", 8, nil, "<5%", 10), risk, from, to)
	if Compare(ColEffective, &same, &cheap, false) >= 0 {
		t.Error("a tie is not broken by pool key")
	}
}
