package watch

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/feed"
)

// Planner prices the best plan for a job, for plan rules. The planner
// package (not in this tree yet) is to implement it: cmd wires it into
// Options.Planner, and until then a plan rule is refused at load
// (Check's havePlanner) rather than accepted and never evaluated.
type Planner interface {
	// BestPlan returns the cheapest plan for the job that is on time in
	// at least job.OnTimePct percent of the planner's runs, over the
	// market of snap (and the offerings the planner searches for);
	// Found is false when no plan is on time that often.
	BestPlan(ctx context.Context, job PlanJob, snap *feed.Snapshot) (PlanQuote, error)
}

// PlanJob is a plan rule's job.
type PlanJob struct {
	// Models are the acceptable GPU models; Hours is measured on the
	// first.
	Models          []string
	GPUs            int
	Hours           float64
	Start, Deadline time.Time
	// Checkpoint is the interval between checkpoints; 0 for a job that
	// cannot checkpoint.
	Checkpoint time.Duration
	OnTimePct  float64
}

// PlanQuote is the best plan the planner found.
type PlanQuote struct {
	Found        bool
	Strategy     string
	Provider     string
	InstanceType string
	Regions      []string
	// ExpectedUSD is the plan's expected total; USDPerUsefulGPUHour the
	// same over the job's GPU-hours of work.
	ExpectedUSD         float64
	USDPerUsefulGPUHour float64
	OnTimePct           float64
	// OfferingID is the block or reservation the plan books, "" for
	// none.
	OfferingID string
	Simulated  bool
}
