package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Risk is a pool's spot capacity for one instance, in interruptions per
// hour and hours to get capacity back (buckets only rank pools).
type Risk struct {
	// InterruptionsPerHour (λ) is how often held capacity is reclaimed.
	InterruptionsPerHour float64
	// GapMedianHours is the median wait for capacity to come back.
	GapMedianHours float64
	// Availability is the long-run share of time the pool has capacity.
	Availability float64
	// RegionShare is the part of the process every zone of the region shares.
	RegionShare float64
	// Source says where the figures come from, for the assumptions line.
	Source string
	// Spells, fitted from history, are drawn instead of the model above.
	Spells *Spells
	// covers are how the pool held part of a gang; nil: all or none.
	covers *gangCovers
}

type gangCovers struct{ levels [][]gapCover }

// Prior is a GPU class's pools at the middle bucket (config plan.priors).
type Prior struct {
	InterruptionsPerHour float64
	GapMedianHours       float64
	Availability         float64
}

// Priors are per GPU model.
type Priors map[string]Prior

// DefaultPriors are the priors per GPU class; DESIGN.md's Planner
// section gives where each figure comes from.
var DefaultPriors = Priors{
	"H200": {0.85, 0.54, 0.38},
	"H100": {0.8, 0.54, 0.40},
	"A100": {0.6, 0.54, 0.47},
	"L40S": {0.5, 0.54, 0.51},
	"L4":   {0.45, 0.54, 0.54},
	"A10G": {0.45, 0.54, 0.54},
	"A10":  {0.45, 0.54, 0.54},
	"V100": {0.4, 0.54, 0.57},
	"T4":   {0.35, 0.54, 0.60},
}

var fallbackPrior = Prior{0.6, 0.54, 0.47}

// A bucket scales the class prior by its midpoint over the middle
// bucket's, its gaps and their tail likewise (DESIGN.md).
var (
	bucketRate = [5]float64{0.2, 0.6, 1.0, 1.4, 1.8}
	bucketGap  = [5]float64{0.38 / 0.54, 0.46 / 0.54, 1, 0.62 / 0.54, 0.70 / 0.54}
	bucketTail = [5]float64{2.5 / 3.5, 3.0 / 3.5, 1, 4.5 / 3.5, 6.0 / 3.5}
)

// middleBucket is the index of "10-15%", where the priors are set.
const middleBucket = 2

// DefaultRegionShare: with half of the unavailability common, three zones
// at 50 % are all down a third of the time, as the traces show.
const DefaultRegionShare = 0.5

// ClusterShare is the share of time a zone holds all of a cluster's
// instances when it holds any (traces: over 94 %).
const ClusterShare = 0.94

func (p Priors) prior(model string) (Prior, string) {
	if v, ok := p[model]; ok {
		return v, "configured prior for " + model
	}
	if v, ok := DefaultPriors[model]; ok {
		return v, model + " prior"
	}
	return fallbackPrior, "generic GPU prior"
}

// RiskOf is the source's own process when it has one, else the class
// prior scaled by the bucket or eviction rate, else the prior alone.
func RiskOf(p domain.Pool, priors Priors) Risk {
	if in := p.Interruption; in != nil && in.Process != nil && validProcess(*in.Process) {
		pr := in.Process
		return Risk{InterruptionsPerHour: pr.InterruptionsPerHour, GapMedianHours: pr.GapMedianHours,
			Availability: pr.Availability, RegionShare: pr.RegionShare, Source: cmp.Or(p.Provider, "the source") + "'s own process"}
	}
	base, from := priors.prior(p.GPU.Model)
	b, bucketed := middleBucket, false
	if p.Interruption != nil {
		if r := domain.BucketRank(p.Interruption.Bucket); r < len(domain.Buckets) {
			b, bucketed = r, true
		}
	}
	r := scalePrior(base, b)
	r.RegionShare = DefaultRegionShare
	if bucketed {
		r.Source = fmt.Sprintf("%s × %s bucket %s", from, sourceName(p.Interruption, "interruption"), p.Interruption.Bucket)
	} else {
		r.Source = from + ", no bucket known"
		if p.Interruption != nil && p.Interruption.Source != "" {
			r.Source += " (" + p.Interruption.Source + ")"
		}
	}
	return r
}

func validProcess(p domain.SpotProcess) bool {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	return ok(p.InterruptionsPerHour) && p.InterruptionsPerHour >= 0 && ok(p.GapMedianHours) && p.GapMedianHours > 0 &&
		ok(p.Availability) && p.Availability > 0 && p.Availability <= 1 && ok(p.RegionShare) && p.RegionShare >= 0 && p.RegionShare <= 1
}

func sourceName(in *domain.Interruption, what string) string {
	if in.Source != "" {
		return in.Source
	}
	return what
}

// scalePrior applies bucket b (0 "<5%" … 4 ">20%") to a class prior.
func scalePrior(p Prior, b int) Risk {
	lambda := p.InterruptionsPerHour * bucketRate[b]
	median := p.GapMedianHours * bucketGap[b]
	// The gap tail (mean/median) scaled; a = run / (run + gap).
	tail := 3.5
	if p.Availability > 0 && p.Availability < 1 && p.InterruptionsPerHour > 0 && p.GapMedianHours > 0 {
		tail = (1 - p.Availability) / (p.Availability * p.InterruptionsPerHour * p.GapMedianHours)
	}
	tail *= bucketTail[b]
	a := 1.0
	if lambda > 0 {
		a = 1 / (1 + lambda*tail*median)
	}
	return Risk{InterruptionsPerHour: lambda, GapMedianHours: median, Availability: a}
}

// ForInstances is the risk for a gang of n: usable time × ClusterShare.
func (r Risk) ForInstances(n int) Risk {
	if n >= 2 && r.Spells == nil {
		r.Availability *= ClusterShare
	}
	return r
}

// MeanGapHours is the mean wait for capacity, from the renewal identity.
func (r Risk) MeanGapHours() float64 {
	if r.Availability >= 1 || r.InterruptionsPerHour <= 0 {
		return 0
	}
	return (1 - r.Availability) / (r.Availability * r.InterruptionsPerHour)
}

// Summary is the risk in words for an assumptions line.
func (r Risk) Summary() string {
	return fmt.Sprintf("%.2f interruptions/h held, capacity back in %.2f h (median), %.0f%% available (%s)",
		r.InterruptionsPerHour, r.GapMedianHours, 100*r.Availability, r.Source)
}

// efficiency is the share of paid spot time kept as progress (DESIGN.md:
// η = e^(−λd) · λc / (e^(λc) − 1)).
func efficiency(lambda, d, c float64) float64 {
	if lambda <= 0 {
		return 1
	}
	if math.IsInf(c, 1) {
		return 0
	}
	x := lambda * c
	keep := 1.0
	if x > 1e-9 {
		keep = x / math.Expm1(x)
	}
	return math.Exp(-lambda*d) * keep
}

// paidHours is the expected spot hours paid for w hours of work (DESIGN.md).
func paidHours(lambda, w, d, c float64) float64 {
	if lambda <= 0 {
		return w + d
	}
	if math.IsInf(c, 1) {
		p := math.Exp(-lambda * (w + d))
		if p < 1e-300 {
			return math.Inf(1)
		}
		return -math.Expm1(-lambda*(w+d)) / (lambda * p)
	}
	eta := efficiency(lambda, d, c)
	if eta <= 0 {
		return math.Inf(1)
	}
	r := math.Min(w, eta/lambda)
	return (w-r)/eta + d + r
}

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

// Basis is the job EFF $/GPU-H prices every pool for (config plan.*).
type Basis struct {
	GPUs  int
	Hours float64
	// Checkpoint is the interval; 0: not checkpointable.
	Checkpoint time.Duration
	Changeover time.Duration
	Priors     Priors
}

// DefaultBasis: 8 GPUs, 24 h, checkpoint 15 m, changeover 12 m.
var DefaultBasis = Basis{GPUs: 8, Hours: 24, Checkpoint: 15 * time.Minute, Changeover: 12 * time.Minute}

// Label names the job for a column header or a help line: "8 GPUs × 24 h".
func (b Basis) Label() string {
	return fmt.Sprintf("%d GPUs × %s h", b.GPUs, trimFloat(b.Hours))
}

// Instances is how many instances of a type with gpus GPUs the job needs.
func (b Basis) Instances(gpus float64) int {
	if gpus <= 0 {
		return 0
	}
	return int(math.Ceil(float64(b.GPUs)/gpus - 1e-9))
}

// Effective is the expected cost per useful GPU-hour on the pool's spot
// alone (waiting free): NaN when unknown, +Inf when it can hardly finish.
func (b Basis) Effective(p domain.Pool, spotUSDHour float64) float64 {
	n := b.Instances(p.GPU.Count)
	if n == 0 || math.IsNaN(spotUSDHour) || spotUSDHour < 0 || b.Hours <= 0 {
		return math.NaN()
	}
	r := RiskOf(p, b.Priors).ForInstances(n)
	c := math.Inf(1) // not checkpointable
	if b.Checkpoint > 0 {
		c = b.Checkpoint.Hours()
	}
	paid := paidHours(r.InterruptionsPerHour, b.Hours, b.Changeover.Hours(), c)
	return spotUSDHour / p.GPU.Count * paid / b.Hours
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}

// tenths writes hours to a tenth, as the plan's columns round.
func tenths(v float64) string { return trimFloat(math.Round(v*10) / 10) }
