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
