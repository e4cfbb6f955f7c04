package planner

import (
	"cmp"
	"fmt"
	"math"

	"github.com/gpumarket/gpumarket/domain"
)

// Risk is a pool's spot capacity as a process in time, for one instance:
// runs of capacity that end in an interruption, and gaps until it comes
// back. It is calibrated in interruptions per hour and hours to get
// capacity back, not in the monthly buckets, which only rank pools.
type Risk struct {
	// InterruptionsPerHour (λ) is how often held capacity is reclaimed,
	// per hour held.
	InterruptionsPerHour float64
	// GapMedianHours is the median wait for capacity to come back.
	GapMedianHours float64
	// Availability is the long-run share of time the pool has capacity.
	Availability float64
	// RegionShare is the part of the process shared by every zone of the
	// region (see domain.SpotProcess).
	RegionShare float64
	// Source says where the figures come from, for the assumptions line.
	Source string
	// Spells, when fitted from history, are the lengths runs and gaps are
	// drawn from; nil draws the parametric model above.
	Spells *Spells
	// covers, per partial-gang level (mixLevels), are how the pool held
	// part of a gang in its history's gaps; nil: a zone holds all or none.
	covers *gangCovers
}

type gangCovers struct{ levels [][]gapCover }

// Prior is what is assumed of a GPU class's pools at the middle bucket
// ("10-15%") when nothing better is known (config plan.priors).
type Prior struct {
	InterruptionsPerHour float64
	GapMedianHours       float64
	Availability         float64
}

// Priors are per GPU model.
type Priors map[string]Prior

// DefaultPriors are the priors per GPU class, at the middle bucket.
//
// Where the numbers come from (DESIGN.md): real availability traces of
// V100 spot (p3.2xlarge, 9 AWS zones, 1,092 h in 2023) show 0.10-1.39
// interruptions per available hour, a median wait of 0.38-0.70 h for
// capacity to come back and 16.7-90.5 % availability; preemption traces
// of V100 instances kept running show 0.31-0.74 per running hour. The
// V100 prior sits in the middle of those (0.4/h, 0.54 h). The hourly rates
// cited for GPU spot (V100 0.8 %/h, A100 2.3 %/h, H100 4.1 %/h) give the
// order of the classes; their spread is damped (H100 = 2× V100, not 5×)
// so that with the bucket multipliers below every class stays inside the
// measured 0.1-1.4 interruptions per hour. Availability at the middle
// bucket follows from λ, the median gap and a gap tail (mean/median) of
// 3.5, between the traces' calmest (≈2.8, us-west-2b) and wildest (≈7,
// us-east-1a) zones.
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

// fallbackPrior is used for a model with no prior at all.
var fallbackPrior = Prior{0.6, 0.54, 0.47}

// The bucket (AWS's interruption frequency, or Azure's eviction rate read
// as the same ranges) is a relative signal: a pool's rate is its class
// prior times the bucket's midpoint over the middle bucket's (2.5, 7.5,
// 12.5, 17.5 and, for the open ">20%", 22.5 % over 12.5 %), which spreads
// the classes over the traces' tenfold range. Gaps lengthen with the
// bucket across the measured 0.38-0.70 h, and their tail (mean/median)
// from the calm to the wild zones of the traces.
var (
	bucketRate = [5]float64{0.2, 0.6, 1.0, 1.4, 1.8}
	bucketGap  = [5]float64{0.38 / 0.54, 0.46 / 0.54, 1, 0.62 / 0.54, 0.70 / 0.54}
	bucketTail = [5]float64{2.5 / 3.5, 3.0 / 3.5, 1, 4.5 / 3.5, 6.0 / 3.5}
)

// middleBucket is the index of "10-15%", where the priors are set.
const middleBucket = 2

// DefaultRegionShare is the part of a pool's process shared by the other
// zones of its region when the source does not say: with half of the
// unavailability common, three zones at 50 % are all down about a third
// of the time, as DESIGN.md reports ("for 33 % of the time spot was
// unavailable in every zone of a region"; any zone of a region 71-96 %).
const DefaultRegionShare = 0.5

// ClusterShare is the share of time a zone holds all of a cluster's
// instances when it holds any (DESIGN.md: over 94 % of the time a zone
// has all or none): a job over n ≥ 2 instances, which progresses only
// while it holds them all, sees this share of the pool's availability.
const ClusterShare = 0.94

// prior returns the model's prior, the configured one first.
func (p Priors) prior(model string) (Prior, string) {
	if v, ok := p[model]; ok {
		return v, "configured prior for " + model
	}
	if v, ok := DefaultPriors[model]; ok {
		return v, model + " prior"
	}
	return fallbackPrior, "generic GPU prior"
}

// RiskOf returns what is known of a pool's spot capacity: the source's own
// process when it has one (the simulated market's truth), else the GPU
// class prior scaled by the pool's bucket (AWS) or eviction rate (Azure),
// else the class prior alone.
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
	// The prior's tail (mean gap / median gap) at the middle bucket,
	// scaled by the bucket's; availability follows from the renewal
	// identity a = mean run / (mean run + mean gap).
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

// ForInstances is the risk seen by a job over n instances of the pool,
// which progresses only while it holds all of them: zones hold all of a
// cluster or none most of the time, so the rate per usable hour stays
// the pool's and the usable share of time shrinks by ClusterShare.
func (r Risk) ForInstances(n int) Risk {
	// A fitted risk was read at the job's count already.
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

// efficiency is the long-run share of paid spot time that becomes saved
// progress, for runs ending at rate λ, a changeover d at each start and a
// checkpoint every c hours of work (0: progress is never lost; +Inf: the
// job cannot checkpoint): each run pays its changeover, then keeps only
// whole checkpoint intervals. For exponential runs:
// η = e^(−λd) · λc / (e^(λc) − 1).
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

// paidHours is the expected hours of spot paid to get w hours of work
// done in one pool whose capacity is reclaimed at rate λ, with changeover
// d and checkpoints every c hours (0: progress is never lost; +Inf: an
// interruption loses everything and the job starts over). Waiting for
// capacity is not paid.
//
// Checkpointed: interrupted runs keep η of what they cost, and the last
// run (which is not interrupted) keeps all it does, about what one run
// keeps (m = η/λ) but at most w: paid = (w − r)/η + d + r, r = min(w, m).
// Not checkpointed: each attempt must last w + d; attempts until one does
// are geometric: paid = (1 − p)/(λp), p = e^(−λ(w+d)).
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
