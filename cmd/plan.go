package cmd

import (
	"github.com/gpumarket/gpumarket/planner"
)

// effBasis is the job EFF $/GPU-H prices every pool for: config plan.*.
func (e *env) effBasis() planner.Basis {
	p := e.cfg.Plan
	return planner.Basis{GPUs: p.GPUs, Hours: p.Hours, Checkpoint: p.Checkpoint.D(), Changeover: p.Changeover.D(), Priors: e.planPriors()}
}

// planPriors are config plan.priors over the planner's defaults.
func (e *env) planPriors() planner.Priors {
	if len(e.cfg.Plan.Priors) == 0 {
		return nil
	}
	out := planner.Priors{}
	for g, p := range e.cfg.Plan.Priors {
		out[g] = planner.Prior{InterruptionsPerHour: p.InterruptionsPerHour, GapMedianHours: p.GapMedianHours, Availability: p.Availability}
	}
	return out
}

// planSpeeds are config plan.speed over the planner's defaults.
func (e *env) planSpeeds() planner.Speeds {
	out := planner.Speeds{}
	for g, v := range planner.DefaultSpeeds {
		out[g] = v
	}
	for g, v := range e.cfg.Plan.Speed {
		out[g] = v
	}
	return out
}
