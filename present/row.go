// A pool's Row: its price per GPU-hour, the saving on on-demand, the
// effective price (what a job pays per useful GPU-hour, interruptions
// counted) and the window's statistics. The TUI's Market view and
// `gpumarket prices` (table, JSON, CSV) read the same Row through the same
// Column, without the TUI.

package present

import (
	"math"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/series"
)

// Row is one pool with the figures derived from it. It reads the pool
// view it was derived from (read-only: it belongs to a hub snapshot) and is
// recomputed when the pool or the window changes.
type Row struct {
	*feed.PoolView

	// Spot is the latest spot price per instance-hour, PerGPU the same per
	// GPU-hour, Savings the percentage saved on the on-demand price and
	// Effective what the default job pays per useful GPU-hour (see
	// Effective). Each is NaN when unknown.
	Spot, PerGPU, Savings, Effective float64
	// BucketRank is the interruption bucket's rank (domain.BucketRank),
	// len(domain.Buckets) when unknown.
	BucketRank int
	// ObservedAt is when Spot was observed; zero when there is no price.
	ObservedAt time.Time
	// From and To are the window, in Unix seconds, that the window
	// figures and the trend are over.
	From, To int64

	window     series.WindowStats
	windowDone bool
}

// Derive computes a pool's figures for a window [from, to] and the job
// that EFF is for.
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

// Effective is the EFF figure: what the job of basis (config plan.gpus ×
// plan.hours) pays per useful GPU-hour on the pool's spot capacity alone,
// given how often the pool is interrupted and what each interruption
// costs (the planner's risk model). It is NaN when the price or the GPU
// count is unknown. The Market view, `prices` and the Blocks view's spot
// alternative all call it, so a new risk model is a change here only.
func Effective(basis planner.Basis, p domain.Pool, spotUSDHour float64) float64 {
	return basis.Effective(p, spotUSDHour)
}

// SetWindow moves the row to the window [from, to]: the window figures
// are computed again on their next use; the others do not depend on it.
func (r *Row) SetWindow(from, to int64) {
	r.From, r.To = from, to
	r.windowDone = false
}

// Window is the pool's statistics over [From, To], computed on first use:
// the Market view never asks for them, `prices` asks three columns' worth.
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

// PlanPools are the snapshot's pools of the models that keep selects,
// with their current spot price (NaN when none) and what is known of their
// risk: the market `gpumarket plan`, the Plan view and plan rules plan on.
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
