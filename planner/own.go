package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Observed is what the user's own spot instances met in one pool: the
// instance-hours they ran there and how many of them the cloud took back.
type Observed struct {
	Hours         float64
	Interruptions int
}

// Own is what the user's own fleets met, by pool key (Pool.Key). The
// caller fills it from its records (the ledger's usage); the planner only
// reads it.
type Own map[string]Observed

// WithOwn returns the pools with what the user's own fleets met there
// blended into their risk (Risk.WithOwn); pools not in own are unchanged.
func WithOwn(pools []Pool, own Own) []Pool {
	if len(own) == 0 {
		return pools
	}
	out := slices.Clone(pools)
	for i := range out {
		p := &out[i]
		o, ok := own[p.Key]
		if !ok || !(o.Hours > 0) || o.Interruptions < 0 || math.IsInf(o.Hours, 0) {
			continue
		}
		p.Risk = p.Risk.WithOwn(o.Hours, o.Interruptions)
	}
	return out
}

// WithOwn blends n interruptions seen over h instance-hours of the user's
// own fleets into the risk, Gamma–Poisson: the risk's rate λ0 counts as
// λ0·H0 interruptions over H0 hours (H0 the prior's priorHours plus any
// history it was fitted on), so λ = (λ0·H0 + n) / (H0 + h) moves toward
// n/h in proportion to how much was observed. The mean wait for capacity
// is kept, so availability follows the new rate.
func (r Risk) WithOwn(h float64, n int) Risk {
	if !(h > 0) || n < 0 {
		return r
	}
	h0 := priorHours
	if r.Spells != nil {
		h0 += r.Spells.Hours
	}
	lambda := (r.InterruptionsPerHour*h0 + float64(n)) / (h0 + h)
	out := r
	out.InterruptionsPerHour = lambda
	out.Source = fmt.Sprintf("%s h of your own fleets (%d interruptions) with %s", trimFloat(math.Round(h)), n, r.Source)
	if s := r.Spells; s != nil {
		// Fitted lengths: runs stretched so their mean is 1/λ.
		run := slices.Clone(s.Run)
		if lambda > 0 && r.InterruptionsPerHour > 0 {
			k := r.InterruptionsPerHour / lambda
			for i := range run {
				run[i] *= k
			}
		}
		out.Spells = &Spells{Run: run, Gap: s.Gap, Hours: s.Hours}
		mr, mg := meanOf(run), meanOf(s.Gap)
		out.InterruptionsPerHour = 1 / mr
		out.Availability = mr / (mr + mg)
		return out
	}
	gap := r.MeanGapHours()
	if r.InterruptionsPerHour <= 0 {
		// No gap was ever drawn: the prior's tail over its median.
		gap = 3.5 * r.GapMedianHours
	}
	out.Availability = 1 / (1 + lambda*gap)
	return out
}

// OwnWindow is how far back the user's own fleets teach the planner: a
// pool's behaviour drifts, so older runs are left out.
const OwnWindow = 90 * 24 * time.Hour

// FleetUsage is one of the user's fleets as its records show it: where it
// was asked for (an instance's own zone and type win) and the usage its
// cloud reported (what `gpumarket usage` counts).
type FleetUsage struct {
	Provider, Region, Zone, InstanceType string
	Report                               domain.UsageReport
}

// OwnFrom sums, per pool, the instance-hours the fleets' spot instances
// ran within OwnWindow before now and how many the cloud took back; a
// report whose interruptions are unknown teaches nothing.
func OwnFrom(fs []FleetUsage, now time.Time) Own {
	since := now.Add(-OwnWindow)
	out := Own{}
	for _, f := range fs {
		if f.Report.InterruptionsUnknown {
			continue
		}
		for _, in := range f.Report.Instances {
			end := in.End
			if end.IsZero() || end.After(now) {
				end = now
			}
			start := in.Start
			if start.Before(since) {
				start = since
			}
			if !in.Spot || !end.After(start) {
				continue
			}
			k := domain.PoolKey{Provider: f.Provider, Region: f.Region, Zone: cmp.Or(in.Zone, f.Zone),
				InstanceType: cmp.Or(in.InstanceType, f.InstanceType)}
			if k.Zone == "" || k.InstanceType == "" {
				continue
			}
			o := out[k.String()]
			o.Hours += end.Sub(start).Hours()
			if in.Interrupted && !in.End.IsZero() && !in.End.After(now) {
				o.Interruptions++
			}
			out[k.String()] = o
		}
	}
	return out
}
