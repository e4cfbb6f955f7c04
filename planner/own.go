package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Observed is the user's spot instance-hours in a pool and its interruptions.
type Observed struct {
	Hours         float64
	Interruptions int
}

// Own is what the user's own fleets met, by Pool.Key (the caller fills it).
type Own map[string]Observed

// WithOwn blends own into the pools' risk; others are unchanged.
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

// WithOwn blends n interruptions over h hours into the rate, Gamma–Poisson:
// λ = (λ0·H0 + n) / (H0 + h), H0 the prior's day plus the fit's hours.
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

// OwnWindow: a pool drifts, so older runs teach nothing.
const OwnWindow = 90 * 24 * time.Hour

// OwnFrom sums per pool the spot hours within OwnWindow and their
// interruptions; a report with interruptions unknown teaches nothing.
func OwnFrom(fs []domain.FleetUsage, now time.Time) Own {
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
			start := domain.Later(since, in.Start)
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
