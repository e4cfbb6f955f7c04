package providers

import (
	"math"
	"time"
)

// PerGPUHour converts an instance-hour price to a GPU-hour price. It returns
// NaN when the GPU count is not positive.
func PerGPUHour(usdHour, gpus float64) float64 {
	if gpus <= 0 {
		return math.NaN()
	}
	return usdHour / gpus
}

// SavingsPct is how much cheaper spot is than on-demand, in percent.
// It returns NaN when the on-demand price is not positive.
func SavingsPct(spot, onDemand float64) float64 {
	if onDemand <= 0 {
		return math.NaN()
	}
	return (1 - spot/onDemand) * 100
}

// HoursPerMonth is the month the interruption buckets are quoted over.
const HoursPerMonth = 720

// MaxLoss caps the expected share of paid time that is lost, so a very
// unstable pool gets a large but finite effective price.
const MaxLoss = 0.95

// RiskParams are the job's assumptions behind the risk-adjusted price
// (config risk.*).
type RiskParams struct {
	// CheckpointInterval is how often the job saves its state (c).
	CheckpointInterval time.Duration
	// RestartOverhead is the time to get going again after an interruption (r).
	RestartOverhead time.Duration
	// Instances is how many instances the job spreads over (n); any one
	// interruption stops the job. Zero means 1.
	Instances int
}

// DefaultRisk is DESIGN.md's default: c = 0.25 h, r = 0.1 h, one instance.
var DefaultRisk = RiskParams{CheckpointInterval: 15 * time.Minute, RestartOverhead: 6 * time.Minute, Instances: 1}

// RatePerHour turns a monthly interruption share p (0..1) into a rate per
// instance-hour: λ = −ln(1 − p) / 720.
func RatePerHour(p float64) float64 {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return math.Inf(1)
	}
	return -math.Log1p(-p) / HoursPerMonth
}

// Rate returns the interruption rate per instance-hour of the data: the
// observed rate where there is one, else the bucket's upper bound. ok is
// false when nothing is known.
func (in *Interruption) Rate() (lambda float64, ok bool) {
	if in == nil {
		return 0, false
	}
	if in.ObservedPerHour != nil {
		return *in.ObservedPerHour, true
	}
	if in.UpperPct <= 0 {
		return 0, false
	}
	return RatePerHour(in.UpperPct / 100), true
}

// LossShare is the expected share of paid time lost to interruptions for a
// job over n instances: min(0.95, n·λ·(c/2 + r)).
func (r RiskParams) LossShare(lambda float64) float64 {
	n := r.Instances
	if n < 1 {
		n = 1
	}
	c := r.CheckpointInterval.Hours()
	o := r.RestartOverhead.Hours()
	loss := float64(n) * lambda * (c/2 + o)
	if loss > MaxLoss || math.IsNaN(loss) {
		return MaxLoss
	}
	if loss < 0 {
		return 0
	}
	return loss
}

// Effective is the risk-adjusted price per useful GPU-hour:
// spot $/GPU-h / (1 − loss). A capacity block or on-demand has λ = 0 and so
// costs its own price.
func (r RiskParams) Effective(usdGPUHour, lambda float64) float64 {
	return usdGPUHour / (1 - r.LossShare(lambda))
}
