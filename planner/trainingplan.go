package planner

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpumarket/gpumarket/domain"
)

// StrategyTrainingPlan is a SageMaker training plan that holds the job in its segments.
const StrategyTrainingPlan = "training-plan"

// planRun is the work each segment of a training plan does.
type planRun struct {
	did    []float64 // work hours per segment
	finish float64   // hours from the job's start; +Inf if the plan cannot hold it all
}

// runPlan lays the job over the segments in order, a changeover at each
// that does work; no work crosses a gap.
func (p *planning) runPlan(o domain.Offering, speed float64) planRun {
	r := planRun{finish: math.Inf(1)}
	left := p.work
	early := o.Terms().StopsEarly
	for _, s := range o.Windows() {
		r.did = append(r.did, 0)
		if float64(s.InstanceCount)*o.GPU.Count < float64(p.job.GPUs)-1e-9 {
			continue // this segment cannot hold the job's GPUs
		}
		begin := math.Max(0, s.Start.Sub(p.job.Start).Hours())
		until := s.End.Add(-early).Sub(p.job.Start).Hours()
		room := (until - begin - p.d) * speed
		if room <= 1e-9 || left <= 1e-9 {
			continue
		}
		do := math.Min(room, left)
		r.did[len(r.did)-1] = do
		left -= do
		if left <= 1e-9 {
			r.finish = begin + p.d + do/speed
			break
		}
	}
	return r
}

// trainingPlans evaluates each plan that holds the whole job.
func (p *planning) trainingPlans(offs []domain.Offering) []Result {
	type key struct {
		cloud string
		segs  int
	}
	var best bestPer[key]
	for _, o := range offs {
		if o.Kind != domain.KindTrainingPlan {
			continue
		}
		b, ok := p.blockWork(o)
		if !ok {
			continue
		}
		run := p.runPlan(o, b.speed)
		if math.IsInf(run.finish, 1) {
			continue // the plan cannot hold all the work
		}
		r := p.offeringResult(StrategyTrainingPlan, o, run.finish)
		r.Assumptions = p.planWords(o, run, b.speed)
		best.add(key{string(o.Cloud), len(o.Windows())}, r)
	}
	return best.results()
}

// planWords say how the plan holds the job, segment by segment.
func (p *planning) planWords(o domain.Offering, run planRun, speed float64) string {
	var parts []string
	for i, s := range o.Windows() {
		parts = append(parts, fmt.Sprintf("%s to %s UTC does %s h", s.Start.UTC().Format("Jan 2 15:04"), s.End.UTC().Format("Jan 2 15:04"),
			trimFloat(math.Round(run.did[min(i, len(run.did)-1)]*10)/10)))
		if i >= len(run.did)-1 {
			break
		}
	}
	target := o.TargetResource
	if target == "" {
		target = domain.TargetTrainingJob
	}
	return fmt.Sprintf("%.0f h %s for %s, paid in full: %s of work (+ %s changeover in each segment used; instances stop %s before each end); no interruptions",
		o.HeldHours(), o.Terms().Name, target, strings.Join(parts, ", "), domain.FormatDuration(p.job.Changeover),
		domain.FormatDuration(o.Terms().StopsEarly))
}

// onePlanSegment reports whether a plan is one window, which block+spot may use as a block.
func onePlanSegment(o domain.Offering) bool { return len(o.Segments) <= 1 }
