package watch

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	planjob "github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// PlanRule waits for the best plan on time OnTimePct % of the time to cost
// under BelowUSD or BelowUSDGPUHour.
type PlanRule struct {
	// GPU is the acceptable models, a comma list; hours are measured on the first.
	GPU   string  `yaml:"gpu"`
	GPUs  int     `yaml:"gpus"`
	Hours float64 `yaml:"hours"`
	// Start and Deadline are ParseRuleTime times; no start is now.
	Start    string `yaml:"start,omitempty"`
	Deadline string `yaml:"deadline"`
	// Checkpoint: 0s cannot checkpoint; nil is DefaultCheckpoint.
	Checkpoint      *config.Duration `yaml:"checkpoint,omitempty"`
	OnTimePct       *float64         `yaml:"on_time_pct,omitempty"`
	BelowUSD        *float64         `yaml:"below_usd,omitempty"`
	BelowUSDGPUHour *float64         `yaml:"below_usd_gpu_hour,omitempty"`
}

func init() {
	register(Kind{Name: "plan", New: func() Condition { return &PlanRule{} }, When: onSchedule})
}

// A plan rule's defaults.
const (
	DefaultOnTimePct  = 95.0
	DefaultCheckpoint = 15 * time.Minute
)

// Validate implements Condition.
func (p *PlanRule) Validate() error {
	models := domain.SplitList(p.GPU)
	if len(models) == 0 {
		return ruleErr("", "gpu: missing; want the GPU models the job can use, a comma list such as H100 or H100,H200 (one of %s)", strings.Join(domain.GPUModels, ", "))
	}
	for i, g := range models {
		m, ok := domain.CanonicalGPU(g)
		if !ok {
			return ruleErr("gpu", "unknown GPU %q; want a comma list of %s", g, strings.Join(domain.GPUModels, ", "))
		}
		if slices.Contains(models[:i], m) {
			return ruleErr("gpu", "%s is named twice", m)
		}
		models[i] = m
	}
	p.GPU = strings.Join(models, ",")
	if p.GPUs == 0 {
		return ruleErr("", "gpus: missing; want the GPUs the job needs at once, 1 to %d", maxBlockGPUs)
	}
	if p.Hours == 0 {
		return ruleErr("", "hours: missing; want the job's hours of work, above 0, at most %d", maxBlockHours)
	}
	if p.GPUs < 1 || p.GPUs > maxBlockGPUs {
		return ruleErr("gpus", "%d; want a whole number of GPUs from 1 to %d", p.GPUs, maxBlockGPUs)
	}
	if badFloat(p.Hours) || p.Hours <= 0 || p.Hours > maxBlockHours {
		return ruleErr("hours", "%v; want hours of work above 0, at most %d (26 weeks)", p.Hours, maxBlockHours)
	}
	start, deadline, err := p.Window(time.Now())
	if err != nil {
		return err
	}
	if earliest := start.Add(time.Duration(p.Hours * float64(time.Hour))); deadline.Before(earliest) {
		return ruleErr("deadline", "%s is before start + hours (%s), so no plan could be on time; want a deadline at or after it",
			deadline.UTC().Format(time.RFC3339), earliest.UTC().Format(time.RFC3339))
	}
	if p.Checkpoint != nil && p.Checkpoint.D() < 0 {
		return ruleErr("checkpoint", "%s; want a duration such as 15m, or 0s for a job that cannot checkpoint", p.Checkpoint.D())
	}
	if p.OnTimePct != nil && (badFloat(*p.OnTimePct) || *p.OnTimePct <= 0 || *p.OnTimePct > 100) {
		return ruleErr("on_time_pct", "%v; want a percentage above 0, at most 100 (default %g)", *p.OnTimePct, DefaultOnTimePct)
	}
	return oneLimit(limit{"below_usd", p.BelowUSD, ": no plan costs less, so the rule could never fire; want a total above 0"},
		limit{"below_usd_gpu_hour", p.BelowUSDGPUHour, ": no plan costs less, so the rule could never fire; want a price per GPU-hour above 0"},
		"below_usd (the plan's expected total) or below_usd_gpu_hour (per useful GPU-hour)", "")
}

// Window returns the job's start and deadline as of now.
func (p *PlanRule) Window(now time.Time) (start, deadline time.Time, err error) {
	start = now
	if p.Start != "" {
		if start, err = ParseRuleTime(p.Start, now); err != nil {
			return start, deadline, ruleErr("start", "%v", err)
		}
	}
	if p.Deadline == "" {
		return start, deadline, ruleErr("", "deadline: missing; want when the work must be done: %s, such as %s", domain.WhenForm, domain.WhenExample(now))
	}
	if deadline, err = ParseRuleTime(p.Deadline, now); err != nil {
		return start, deadline, ruleErr("deadline", "%v", err)
	}
	return start, deadline, nil
}

// Models returns the job's GPU models.
func (p *PlanRule) Models() []string { return domain.SplitList(p.GPU) }

// CheckpointOrDefault is the job's checkpoint interval.
func (p *PlanRule) CheckpointOrDefault() time.Duration {
	if p.Checkpoint != nil {
		return p.Checkpoint.D()
	}
	return DefaultCheckpoint
}

// OnTimeOrDefault is the share of runs the plan must be on time in.
func (p *PlanRule) OnTimeOrDefault() float64 {
	if p.OnTimePct != nil {
		return *p.OnTimePct
	}
	return DefaultOnTimePct
}

// Describe implements Condition.
func (p *PlanRule) Describe() string {
	fig := ""
	if p.BelowUSD != nil {
		fig = fmt.Sprintf("$%g", *p.BelowUSD)
	} else {
		fig = fmt.Sprintf("$%g/useful GPU-h", *p.BelowUSDGPUHour)
	}
	return fmt.Sprintf("plan %d %s × %gh by %s, %g%% on time, under %s", p.GPUs, p.GPU, p.Hours, p.Deadline, p.OnTimeOrDefault(), fig)
}

// reads: the planner prices its models in every region.
func (p *PlanRule) reads() marketNeed { return marketNeed{GPUs: p.Models()} }

// expired refuses a new rule whose start or deadline passed, or leaves no time
// for the work (planner.Job.Check): a past window is a typo.
func (p *PlanRule) expired(now time.Time) error {
	start, deadline, err := p.Window(now)
	if err != nil {
		return nil
	}
	job := planjob.Job{GPUs: p.GPUs, Models: p.Models(), Hours: p.Hours, Start: start, Deadline: deadline,
		Checkpointable: p.CheckpointOrDefault() > 0, Checkpoint: p.CheckpointOrDefault()}
	return job.Check(now, nil)
}

func (p *PlanRule) evaluate(ctx context.Context, e *Evaluator, r Rule, rd *round) {
	if e.opt.Planner == nil {
		e.sayOnce(r, "no planner in this run: plan rules are not evaluated")
		return
	}
	now := e.now()
	start, deadline, _ := p.Window(now)
	work := time.Duration(p.Hours * float64(time.Hour))
	if now.Add(work).After(deadline) {
		e.sayOnce(r, fmt.Sprintf("the job can no longer be done by its deadline %s: it will not fire again (remove it)", deadline.UTC().Format(time.RFC3339)))
		return
	}
	start = domain.Later(now, start)
	snap := rd.snap
	if snap == nil || !snap.Ready {
		return // the planner prices the market: wait for it
	}
	job := PlanJob{Models: p.Models(), GPUs: p.GPUs, Hours: p.Hours, Start: start, Deadline: deadline,
		Checkpoint: p.CheckpointOrDefault(), OnTimePct: p.OnTimeOrDefault()}
	pctx, cancel := context.WithTimeout(ctx, e.opt.SearchTimeout)
	q, err := e.opt.Planner.BestPlan(pctx, job, snap)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			e.sayOnce(r, fmt.Sprintf("plan failed: %v", err))
		}
		return
	}
	e.clearNote(r)
	value, limit, unit := q.ExpectedUSD, 0.0, ""
	if p.BelowUSD != nil {
		limit = *p.BelowUSD
	} else {
		value, limit, unit = q.USDPerUsefulGPUHour, *p.BelowUSDGPUHour, "/useful GPU-h"
	}
	cond := q.Found && !math.IsNaN(value) && value < limit
	e.step(ctx, r, crossing(cond, now, r.Cooldown, func() *Alert {
		a := &Alert{Simulated: q.Simulated, Provider: strp(q.Provider), InstanceType: strp(q.InstanceType),
			TotalUSD: fp(q.ExpectedUSD), USDGPUHour: fp(q.USDPerUsefulGPUHour), ThresholdUSD: fp(limit),
			OfferingID: strp(q.OfferingID), Strategy: strp(q.Strategy), GPUModel: strp(job.Models[0]), GPUCount: fp(float64(job.GPUs))}
		if len(q.Regions) == 1 {
			a.Region = strp(q.Regions[0])
		}
		a.Text = fmt.Sprintf("best plan for %d %s × %g h by %s is %s at $%s%s (expected $%.2f, on time %g%%), under $%s%s%s",
			job.GPUs, strings.Join(job.Models, "/"), job.Hours, deadline.UTC().Format("2006-01-02 15:04 UTC"), q.Strategy,
			present.Money(value), unit, q.ExpectedUSD, q.OnTimePct, present.Money(limit), unit, simNote(q.Simulated))
		return a
	}))
}

// Planner prices the best plan for a plan rule's job (cmd/watch_plan.go).
type Planner interface {
	// BestPlan returns the cheapest plan on time in OnTimePct % of runs; Found false when none.
	BestPlan(ctx context.Context, job PlanJob, snap *feed.Snapshot) (PlanQuote, error)
}

// PlanJob is a plan rule's job.
type PlanJob struct {
	// Hours are measured on the first model; Checkpoint 0: none.
	Models          []string
	GPUs            int
	Hours           float64
	Start, Deadline time.Time
	Checkpoint      time.Duration
	OnTimePct       float64
}

// PlanQuote is the best plan the planner found.
type PlanQuote struct {
	Found               bool
	Strategy            string
	Provider            string
	InstanceType        string
	Regions             []string
	ExpectedUSD         float64
	USDPerUsefulGPUHour float64
	OnTimePct           float64
	// OfferingID is the block or reservation it books, if any.
	OfferingID string
	Simulated  bool
}
