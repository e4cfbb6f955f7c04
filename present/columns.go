package present

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/series"
)

// Column is a market column with its order; a Windowed one reads the
// window, so only its cells are redone when the window changes.
type Column struct {
	Col[*Row]
	SortName, SortShort string
	Compare             func(a, b *Row, reverse bool) int
	Windowed            bool
}

var (
	ColGPU = &Column{Col: Col[*Row]{Title: "GPU", Width: 12, Prio: 0, Cell: gpuCell},
		SortName: "GPU", SortShort: "GPU",
		Compare: thenCheapest(func(a, b *Row) int {
			return cmp.Or(strings.Compare(a.GPU.Model, b.GPU.Model), cmp.Compare(b.GPU.Count, a.GPU.Count))
		})}
	ColInstance = &Column{Col: Col[*Row]{Title: "INSTANCE", Width: 17, MaxWidth: 26, Prio: 5,
		Cell:  func(r *Row) string { return DisplayType(r.InstanceType) },
		Field: "instance_type", Value: func(r *Row) any { return r.InstanceType }}}
	ColPlace = &Column{Col: Col[*Row]{Title: "REGION/ZONE", Width: 16, MaxWidth: 20, Prio: 2,
		Cell: func(r *Row) string { return Place(r.Region, r.Zone) }},
		SortName: "region", SortShort: "region",
		Compare: thenCheapest(func(a, b *Row) int {
			return cmp.Or(strings.Compare(a.Region, b.Region), strings.Compare(a.Zone, b.Zone))
		})}
	ColCloud = &Column{Col: Col[*Row]{Title: "CLOUD", Width: 9, Prio: 9,
		Cell:  func(r *Row) string { return CloudName(r.Pool) },
		Field: "cloud", Format: "-", Value: func(r *Row) any { return string(r.Cloud) }}}
	ColSpot = &Column{Col: Col[*Row]{Title: "SPOT $/H", Width: 8, Prio: 6, Right: true,
		Cell:  func(r *Row) string { return Money(r.Spot) },
		Field: "spot_usd_hour", Format: "%.4f", Value: func(r *Row) any { return Known(r.Spot) }},
		SortName: "spot $/h", SortShort: "spot", Compare: byFigure(func(r *Row) float64 { return r.Spot })}
	ColPerGPU = &Column{Col: Col[*Row]{Title: "$/GPU-H", Width: 8, Prio: 3, Right: true,
		Cell:  func(r *Row) string { return Money(r.PerGPU) },
		Field: "spot_usd_gpu_hour", Format: "%.4f", Value: func(r *Row) any { return Round(r.PerGPU, 6) }},
		SortName: "$/GPU-h", SortShort: "$/GPU-h", Compare: byFigure(func(r *Row) float64 { return r.PerGPU })}
	ColSavings = &Column{Col: Col[*Row]{Title: "SAVE", Width: 4, Prio: 8, Right: true,
		Cell: func(r *Row) string {
			if math.IsNaN(r.Savings) {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", r.Savings)
		},
		Field: "savings_pct", Format: "%.1f", Value: func(r *Row) any { return Round(r.Savings, 2) }},
		// the biggest saving first; NaN stays NaN when negated, so last
		SortName: "savings", SortShort: "savings", Compare: byFigure(func(r *Row) float64 { return -r.Savings })}
	ColInterruption = &Column{Col: Col[*Row]{Title: "INTR", Width: 6, Prio: 4,
		Cell:  func(r *Row) string { return cmp.Or(r.Bucket(), "-") },
		Field: "interruption", Value: func(r *Row) any { return OptString(r.Bucket()) }},
		SortName: "interruption", SortShort: "interruption",
		Compare: func(a, b *Row, rev bool) int {
			unknownA, unknownB := a.BucketRank >= len(domain.Buckets), b.BucketRank >= len(domain.Buckets)
			var c int
			switch {
			case unknownA && !unknownB:
				c = 1
			case unknownB && !unknownA:
				c = -1
			default:
				c = dir(rev, cmp.Compare(a.BucketRank, b.BucketRank))
			}
			return cmp.Or(c, cmpNaNLast(a.Effective, b.Effective))
		}}
	ColEffective = &Column{Col: Col[*Row]{Title: "EFF $/GPU-H", Width: 12, Prio: 1, Right: true,
		Cell:  func(r *Row) string { return Money(r.Effective) },
		Field: "effective_usd_gpu_hour", Format: "%.4f", Value: func(r *Row) any { return Round(r.Effective, 6) }},
		SortName: "effective $/GPU-h", SortShort: "effective", Compare: byFigure(func(r *Row) float64 { return r.Effective })}
	ColTrend = &Column{Col: Col[*Row]{Title: "TREND", Width: SparkCols, Prio: 7,
		Cell: func(r *Row) string {
			_, maxs := r.History.Downsample(r.From, r.To, SparkCols)
			return Sparkline(maxs)
		}}, Windowed: true}

	ColProvider = &Column{Col: Col[*Row]{Field: "provider", Value: func(r *Row) any { return r.Provider }}}
	ColRegion   = &Column{Col: Col[*Row]{Field: "region", Value: func(r *Row) any { return r.Region }}}
	ColZone     = &Column{Col: Col[*Row]{Field: "zone", Value: func(r *Row) any { return OptString(r.Zone) }}}
	ColGPUModel = &Column{Col: Col[*Row]{Field: "gpu_model", Value: func(r *Row) any { return OptString(r.GPU.Model) }}}
	ColGPUCount = &Column{Col: Col[*Row]{Field: "gpu_count", Format: "%g", Value: func(r *Row) any { return positive(r.GPU.Count) }}}
	ColGPUMem   = &Column{Col: Col[*Row]{Field: "gpu_memory_gib", Format: "-", Value: func(r *Row) any { return positive(r.GPU.MemoryGiB) }}}
	ColOnDemand = &Column{Col: Col[*Row]{Field: "on_demand_usd_hour", Format: "%.4f", Value: func(r *Row) any {
		if r.OnDemandUSDHour == nil {
			return nil
		}
		return positive(*r.OnDemandUSDHour)
	}}}
	ColWindowMin     = windowCol("window_min_usd_hour", func(st series.WindowStats) *float64 { return domain.Float(st.Min) })
	ColWindowAvg     = windowCol("window_avg_usd_hour", func(st series.WindowStats) *float64 { return Round(st.Avg, 6) })
	ColWindowMax     = windowCol("window_max_usd_hour", func(st series.WindowStats) *float64 { return domain.Float(st.Max) })
	ColPlacement     = &Column{Col: Col[*Row]{Field: "placement_score", Value: func(r *Row) any { return r.PlacementScore }}}
	ColPlacementNote = &Column{Col: Col[*Row]{Field: "placement_note", Value: func(r *Row) any { return OptString(r.PlacementNote) }}}
	ColObservedAt    = &Column{Col: Col[*Row]{Field: "observed_at", Format: "-", Value: func(r *Row) any { return r.ObservedAt }}}
	ColAsOf          = &Column{Col: Col[*Row]{Field: "as_of", Format: "-", Value: func(r *Row) any {
		if r.AsOf.IsZero() {
			return nil
		}
		return r.AsOf.UTC()
	}}}
	ColCached = &Column{Col: Col[*Row]{Field: "cached", Format: "-", Value: func(r *Row) any { return r.Cached }}}
	// ColAge is the table's AS_OF: "cached 09:41" or "live".
	ColAge = &Column{Col: Col[*Row]{Field: "as_of", TableOnly: true, Value: func(r *Row) any {
		if r.Cached {
			return "cached " + r.AsOf.Local().Format("15:04")
		}
		return "live"
	}}}
)

// windowCol is a figure of the window's statistics; unknown without any.
func windowCol(field string, f func(series.WindowStats) *float64) *Column {
	return &Column{Col: Col[*Row]{Field: field, Format: "%.4f", Value: func(r *Row) any {
		if st := r.Window(); st.OK {
			return f(st)
		}
		return nil
	}}, Windowed: true}
}

// SparkCols is fixed so a trend is drawn once per change of its pool.
const SparkCols = 12

var View = []*Column{ColGPU, ColInstance, ColPlace, ColCloud, ColSpot, ColPerGPU, ColSavings, ColInterruption, ColEffective, ColTrend}

// Sorts are the orders `s` cycles through; the first is `prices`'s.
var Sorts = []*Column{ColEffective, ColPerGPU, ColSpot, ColSavings, ColInterruption, ColGPU, ColPlace}

// Prices is `gpumarket prices`'s columns in DESIGN.md's field order.
var Prices = []*Column{ColProvider, ColCloud, ColRegion, ColZone, ColInstance, ColGPUModel, ColGPUCount, ColGPUMem,
	ColSpot, ColPerGPU, ColOnDemand, ColSavings, ColWindowMin, ColWindowAvg, ColWindowMax, ColInterruption,
	ColPlacement, ColPlacementNote, ColEffective, ColObservedAt, ColAsOf, ColCached, ColAge}

func MarketCols(cols []*Column) []*Col[*Row] {
	out := make([]*Col[*Row], len(cols))
	for i, c := range cols {
		out[i] = &c.Col
	}
	return out
}

// Compare orders by a column, then by pool key (stable across snapshots).
func Compare(by *Column, a, b *Row, reverse bool) int {
	if c := by.Compare(a, b, reverse); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// byFigure orders by a figure, unknown (NaN) last either way.
func byFigure(f func(*Row) float64) func(a, b *Row, reverse bool) int {
	return func(a, b *Row, reverse bool) int {
		x, y := f(a), f(b)
		if math.IsNaN(x) || math.IsNaN(y) {
			return cmpNaNLast(x, y)
		}
		return dir(reverse, cmp.Compare(x, y))
	}
}

// thenCheapest orders by f, ties by the cheaper EFF whatever the direction.
func thenCheapest(f func(a, b *Row) int) func(a, b *Row, reverse bool) int {
	return func(a, b *Row, reverse bool) int {
		return cmp.Or(dir(reverse, f(a, b)), cmpNaNLast(a.Effective, b.Effective))
	}
}

func dir(reverse bool, c int) int {
	if reverse {
		return -c
	}
	return c
}

// cmpNaNLast breaks ties by the cheaper figure, whatever the direction.
func cmpNaNLast(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

func gpuCell(r *Row) string {
	gpu := cmp.Or(r.GPU.Model, "?")
	if r.GPU.Count > 0 {
		gpu += "×" + GPUCount(r.GPU.Count)
	} else {
		gpu += "×?" // count unknown, not zero
	}
	if r.GPU.MemoryGiB > 0 {
		gpu += fmt.Sprintf(" %.0fG", r.GPU.MemoryGiB)
	}
	return gpu
}

// Row is a pool (read-only: a hub snapshot's) with its figures.
type Row struct {
	*feed.PoolView

	// Spot is $/instance-hour, PerGPU $/GPU-hour, Savings % off on-demand,
	// Effective EFF; NaN when unknown.
	Spot, PerGPU, Savings, Effective float64
	// BucketRank is domain.BucketRank, len(domain.Buckets) when unknown.
	BucketRank int
	ObservedAt time.Time
	// From and To are the window in Unix seconds.
	From, To int64

	window     series.WindowStats
	windowDone bool
}

// Derive computes a pool's figures over [from, to] for basis's job.
func Derive(pv *feed.PoolView, basis planner.Basis, from, to int64) Row {
	nan := math.NaN()
	r := Row{PoolView: pv, Spot: nan, PerGPU: nan, Savings: nan, Effective: nan, From: from, To: to,
		BucketRank: len(domain.Buckets)}
	if at, usd, ok := pv.History.Last(); ok {
		r.ObservedAt = time.Unix(at, 0).UTC()
		r.Spot = usd
		r.PerGPU = domain.PerGPUHour(usd, pv.GPU.Count)
		if pv.OnDemandUSDHour != nil {
			r.Savings = domain.SavingsPct(usd, *pv.OnDemandUSDHour)
		}
		r.Effective = Effective(basis, pv.Pool, usd)
	}
	if pv.Interruption != nil && pv.Interruption.Bucket != "" {
		r.BucketRank = domain.BucketRank(pv.Interruption.Bucket)
	}
	return r
}

// Effective is EFF: what basis's job pays per useful GPU-hour on the
// pool's spot alone, interruptions priced in; NaN when unknown.
func Effective(basis planner.Basis, p domain.Pool, spotUSDHour float64) float64 {
	return basis.Effective(p, spotUSDHour)
}

// SetWindow moves the row to [from, to]; Window is redone on next use.
func (r *Row) SetWindow(from, to int64) {
	r.From, r.To = from, to
	r.windowDone = false
}

// Window is the pool's statistics over [From, To], computed on first use.
func (r *Row) Window() series.WindowStats {
	if !r.windowDone {
		r.window, r.windowDone = r.History.Stats(r.From, r.To), true
	}
	return r.window
}

// Bucket is the pool's interruption bucket, "" when unknown.
func (r *Row) Bucket() string {
	if r.Interruption == nil {
		return ""
	}
	return r.Interruption.Bucket
}

// PlanPools are the snapshot's pools that plan, the Plan view and plan
// rules plan on: of the models, selected by keep, at their spot price.
func PlanPools(snap *feed.Snapshot, models []string, keep func(domain.Pool) bool, priors planner.Priors) []planner.Pool {
	if snap == nil {
		return nil
	}
	var out []planner.Pool
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !slices.Contains(models, pv.GPU.Model) || !keep(pv.Pool) {
			continue
		}
		spot := math.NaN()
		if _, usd, ok := pv.History.Last(); ok {
			spot = usd
		}
		out = append(out, planner.PoolOf(pv.Pool, spot, priors))
	}
	return out
}
