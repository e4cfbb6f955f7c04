package planner

import (
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

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
