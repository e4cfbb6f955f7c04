package planner

import (
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Basis is the job the market's EFF $/GPU-H column prices every pool for:
// the configured default size and length (config plan.gpus, plan.hours),
// checkpoint and changeover.
type Basis struct {
	GPUs  int
	Hours float64
	// Checkpoint is the interval between checkpoints; 0 means the job is
	// not checkpointable.
	Checkpoint time.Duration
	Changeover time.Duration
	Priors     Priors
}

// DefaultBasis is config's default plan: 8 GPUs for 24 hours, a
// checkpoint every 15 minutes, a 12-minute changeover (the middle of the
// 0.2-0.3 h measured).
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

// Effective is what the job would pay per useful GPU-hour running on the
// pool's spot capacity alone at spotUSDHour (per instance-hour): the
// price per GPU-hour times the expected paid hours per hour of work, for
// as many instances as the job's GPUs need, all held at once. Waiting for
// capacity costs nothing here (the plan command weighs the deadline). It
// is NaN when the pool's GPU count or price is unknown, +Inf when the job
// can hardly ever finish there (a long job that cannot checkpoint).
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

// tenths writes hours of work to a tenth, as the plan's columns round:
// 21.6, not 21.599999999999998.
func tenths(v float64) string { return trimFloat(math.Round(v*10) / 10) }
