package watch

import (
	"context"
	"time"

	"github.com/gpumarket/gpumarket/feed"
)

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
