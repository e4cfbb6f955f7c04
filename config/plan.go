package config

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Plan is the default job (`plan:`) the Market's EFF $/GPU-H prices for, and where `plan` starts.
type Plan struct {
	// GPUs and Hours are the default job's size and length.
	GPUs  int     `yaml:"gpus"`
	Hours float64 `yaml:"hours"`
	// Checkpoint is the interval between checkpoints; 0s: the job cannot checkpoint.
	Checkpoint Duration `yaml:"checkpoint"`
	// Changeover is what a start or switch costs in wall time.
	Changeover Duration `yaml:"changeover"`
	// Speed overrides GPU models' training speeds relative to an H100.
	Speed map[string]float64 `yaml:"speed"`
	// Priors override a GPU class's spot risk assumed when nothing better is known.
	Priors map[string]Prior `yaml:"priors"`
}

// oldRisk applies the risk: keys a file set (pos) to the plan: keys it did not set.
func (c *Config) oldRisk(pos map[string]Pos) {
	set := func(k string) bool { _, ok := pos[k]; return ok }
	if set("risk.checkpoint_interval") && !set("plan.checkpoint") {
		c.Plan.Checkpoint = c.Risk.CheckpointInterval
	}
	if set("risk.restart_overhead") && !set("plan.changeover") {
		c.Plan.Changeover = c.Risk.RestartOverhead
	}
}

// Prior is a GPU class's spot risk at the middle bucket ("10-15%").
type Prior struct {
	InterruptionsPerHour float64 `yaml:"interruptions_per_hour"`
	GapMedianHours       float64 `yaml:"gap_median_hours"`
	Availability         float64 `yaml:"availability"`
}

// DefaultPlan is 8 GPUs for 24 hours, 15-minute checkpoints and a 12-minute changeover (0.2-0.3 h measured).
func DefaultPlan() Plan {
	return Plan{GPUs: 8, Hours: 24, Checkpoint: Duration(15 * time.Minute), Changeover: Duration(12 * time.Minute)}
}

func (p *Plan) validate() error {
	if p.GPUs < 1 || p.GPUs > 512 {
		return keyErr("plan.gpus", "%d; want a whole number of GPUs from 1 to 512", p.GPUs)
	}
	if bad(p.Hours) || p.Hours <= 0 || p.Hours > 182*24 {
		return keyErr("plan.hours", "%v; want hours of work above 0, at most 4368 (26 weeks)", p.Hours)
	}
	if p.Checkpoint.D() < 0 {
		return keyErr("plan.checkpoint", "%s; want a duration such as 15m, or 0s for a job that cannot checkpoint", p.Checkpoint.D())
	}
	if c := p.Changeover.D(); c < 0 || c > 24*time.Hour {
		return keyErr("plan.changeover", "%s; want a duration from 0s to 24h such as 12m", c)
	}
	speed, err := canonicalKeys(p.Speed, "plan.speed")
	if err != nil {
		return err
	}
	for _, g := range slices.Sorted(maps.Keys(speed)) {
		if v := speed[g]; bad(v) || v <= 0 || v > 100 {
			return keyErr("plan.speed."+g, "%v; want a speed relative to an H100 above 0 (an A100 is about 0.45)", v)
		}
	}
	p.Speed = speed
	priors, err := canonicalKeys(p.Priors, "plan.priors")
	if err != nil {
		return err
	}
	for _, g := range slices.Sorted(maps.Keys(priors)) {
		v, key := priors[g], "plan.priors."+g
		if bad(v.InterruptionsPerHour) || v.InterruptionsPerHour <= 0 || v.InterruptionsPerHour > 100 {
			return keyErr(key+".interruptions_per_hour", "%v; want interruptions per hour above 0 (the traces show 0.1-1.4)", v.InterruptionsPerHour)
		}
		if bad(v.GapMedianHours) || v.GapMedianHours <= 0 || v.GapMedianHours > 1000 {
			return keyErr(key+".gap_median_hours", "%v; want hours above 0 (the traces show 0.38-0.70)", v.GapMedianHours)
		}
		if bad(v.Availability) || v.Availability <= 0 || v.Availability > 1 {
			return keyErr(key+".availability", "%v; want a share of time above 0, at most 1", v.Availability)
		}
	}
	p.Priors = priors
	return nil
}

// canonicalKeys respells m's GPU keys the catalog's way, refusing unknown and repeated ones.
func canonicalKeys[V any](m map[string]V, key string) (map[string]V, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]V, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		g, ok := CanonicalGPU(k)
		if !ok {
			return nil, keyErr(key+"."+k, "unknown GPU %q; want one of %s", k, strings.Join(domain.GPUModels, ", "))
		}
		if _, dup := out[g]; dup {
			return nil, keyErr(key+"."+k, "%s is set twice", g)
		}
		out[g] = m[k]
	}
	return out, nil
}
