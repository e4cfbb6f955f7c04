package job

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// Request asks to start a job: the plan's terms over a market, the
// strategy to carry out, a spending limit.
type Request struct {
	Job      planner.Job
	Market   planner.Market
	Options  planner.Options
	Strategy string
	// MaxUSD is the user's limit, 0 for the default (DefaultLimit): the
	// job holds the larger of it and the plan's p95 against the caps, and
	// fails at it.
	MaxUSD float64
	// PurchaseCap is budget.max_booking_usd, 0 for none: the default
	// limit stays within it.
	PurchaseCap float64
	// ProgressFile or ProgressCommand is where the job reports its own
	// hours of work done.
	ProgressFile, ProgressCommand string
	Actor                         string
}

// Proposal is what starting the job commits to, for the confirmation.
type Proposal struct {
	Result planner.Result
	Live   planner.LiveJob
	// HoldUSD is the whole commitment held against the budget caps.
	HoldUSD float64
}

// Propose plans the job and says what it would hold, launching nothing.
func Propose(req Request) (Proposal, error) {
	if math.IsNaN(req.MaxUSD) || math.IsInf(req.MaxUSD, 0) || req.MaxUSD < 0 {
		return Proposal{}, &planner.FieldError{Field: "max-usd", Msg: fmt.Sprintf("%v: want %s", req.MaxUSD, MaxUSDForm)}
	}
	res, lj, err := planner.CarryOut(req.Job, req.Market, req.Options, req.Strategy)
	if err != nil {
		return Proposal{}, err
	}
	if math.IsNaN(res.P95CostUSD) || math.IsInf(res.P95CostUSD, 0) {
		return Proposal{}, fmt.Errorf("the plan's p95 cost of %s is unknown: nothing to hold against the budget", req.Strategy)
	}
	hold := ledger.JobHold(res.P95CostUSD, req.MaxUSD)
	if req.MaxUSD == 0 {
		hold = DefaultLimit(res, lj, req.PurchaseCap)
	}
	return Proposal{Result: res, Live: lj, HoldUSD: hold}, nil
}

// MaxUSDForm is what --max-usd accepts.
const MaxUSDForm = "a limit in dollars ≥ 0 (0: the job's work on on-demand alone, or the plan's p95 if larger)"

// DefaultLimit is a job's limit when the user names none: the plan's p95,
// or, where the strategy has an on-demand safety net, what the whole work
// costs on it alone if that is more, within the per-purchase cap (0: none).
// A p95 limit stops one run in twenty, most once the safety net is due:
// the deadline the plan promised, lost to a figure the user never chose.
func DefaultLimit(res planner.Result, lj planner.LiveJob, purchaseCap float64) float64 {
	od := lj.OnDemand
	if od == nil || od.Speed <= 0 {
		return res.P95CostUSD
	}
	limit := od.USDHour * (lj.Work/od.Speed + lj.D)
	if purchaseCap > 0 {
		limit = math.Min(limit, purchaseCap)
	}
	return math.Max(res.P95CostUSD, limit)
}

// Start records the proposed job in the ledger, its hold checked against
// the caps; a driver carries it out from its start.
func Start(ctx context.Context, svc *ledger.Service, req Request, p Proposal) (ledger.Job, error) {
	live, err := json.Marshal(p.Live)
	if err != nil {
		return ledger.Job{}, err
	}
	j := req.Job
	return svc.StartJob(ctx, ledger.Job{
		State: ledger.JobScheduled, Strategy: req.Strategy, Actor: req.Actor,
		Terms: ledger.JobTerms{GPUs: j.GPUs, Models: j.Models, Hours: j.Hours, Start: j.Start, Deadline: j.Deadline,
			Checkpointable: j.Checkpointable, Checkpoint: j.Checkpoint, Changeover: j.Changeover,
			ProgressFile: req.ProgressFile, ProgressCommand: req.ProgressCommand},
		Plan:   ledger.JobPlan{ExpectedUSD: p.Result.ExpectedCostUSD, P95USD: p.Result.P95CostUSD, OnTimePct: p.Result.OnTimePct},
		Live:   live,
		MaxUSD: req.MaxUSD, HoldUSD: p.HoldUSD,
	})
}

// Unattended says what happens to a job while no gpumarket process runs,
// for every confirmation.
func Unattended(every time.Duration) string {
	return fmt.Sprintf("A running gpumarket (the TUI, serve, watch, or `gpumarket job run`) carries the job out, reviewing it at least every %s. "+
		"While none runs, no move is made: a fleet that runs keeps running and billing (a cloud-scheduled fleet still ends at its end), "+
		"an interruption is not answered, and the safety net is not launched; the next gpumarket process takes the job over.", every)
}
