package planner

import (
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// BlockQueries are the offering searches that may hold the job (DESIGN.md).
func BlockQueries(job Job, now time.Time, speeds Speeds) []domain.OfferingQuery {
	if speeds == nil {
		speeds = DefaultSpeeds
	}
	after := domain.Later(now, job.Start.Add(-24*time.Hour))
	before := job.Deadline
	if !before.After(after) {
		return nil
	}
	var out []domain.OfferingQuery
	seen := map[[2]any]bool{}
	add := func(model string, d time.Duration, from time.Time) {
		k := [2]any{model, d}
		if seen[k] || d <= 0 || d > MaxSpan {
			return
		}
		seen[k] = true
		out = append(out, domain.OfferingQuery{GPU: model, GPUs: job.GPUs, Duration: d, StartAfter: from, StartBefore: before})
	}
	for _, model := range job.Models {
		s := speeds.Relative(model, job.Models[0])
		if s <= 0 {
			continue
		}
		work := time.Duration((job.Hours/s)*float64(time.Hour)) + job.Changeover
		days := int(math.Ceil((work+30*time.Minute).Hours()/24 - 1e-9))
		for _, n := range []int{days, days + 1} {
			add(model, time.Duration(awsDays(n))*24*time.Hour, after)
		}
		if days > 1 {
			add(model, 24*time.Hour, after)
		}
		// A reservation bills from when it is made.
		hold := work
		if wait := job.Start.Sub(now); wait > 0 {
			hold += wait
		}
		hours := math.Ceil(hold.Hours() - 1e-9)
		add(model, time.Duration(hours)*time.Hour, now)
	}
	return out
}

// awsDays rounds up to a length AWS sells: 1-14 days, then weeks.
func awsDays(n int) int {
	if n <= 14 {
		return max(n, 1)
	}
	return max(21, (n+6)/7*7)
}
