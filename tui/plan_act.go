package tui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// carryOut is the money action behind b: a strategy's offering is booked, other
// strategies launch their fleet; notes say what is not automated.
func (v *planView) carryOut() (*moneyAction, tea.Cmd) {
	if len(v.res.results) == 0 || v.cur >= len(v.res.results) {
		return nil, notifyHere("no plan to carry out: r runs the plan")
	}
	r := v.res.results[v.cur]
	now := v.c.now()
	if r.OfferingID != "" {
		o, ok := v.res.offers[r.OfferingID]
		if !ok {
			return nil, notifyErrHere(fmt.Errorf("offering %s is no longer among the plan's: r runs the plan again", r.OfferingID))
		}
		v.pending = &planner.Held{Kind: o.Terms().Kind, Model: o.GPU.Model, GPUs: o.GPUCount(), Start: o.Start, End: o.End}
		a := buyAction(v.svc, v.c.actor, o, now, nil, 0)
		// Notes, not terms: they survive renewed terms.
		a.notes = append(v.planLines(r), bookNotes(r, o, v.res.terms.job, v.res.pools, now)...)
		return a, nil
	}
	if slices.Contains(planner.CarriedOut, r.Strategy) && r.Strategy != planner.StrategyOnDemand {
		a := v.jobAction(r)
		a.notes = v.planLines(r)
		return a, nil
	}
	spec, left, err := planFleet(r, v.res.pools, v.res.terms.job)
	if err != nil {
		return nil, notifyErrHere(err)
	}
	// Scheduled over the plan's window, by the cloud or gpumarket's reconcile loop.
	job := v.res.terms.job
	if job.Start.After(now) {
		spec.Start = job.Start
	}
	if job.Deadline.After(now) {
		spec.End = job.Deadline
	}
	p0 := v.res.pools[r.Pools[0]]
	v.pending = &planner.Held{Kind: domain.KindFleet, Model: p0.GPUModel, GPUs: float64(spec.TargetCapacity) * p0.GPUsPerInstance,
		Start: domain.Later(spec.Start, now), End: spec.End}
	desc := v.svc.Describe(spec.Provider)
	a := launchAction(v.svc, v.c.actor, spec, now, "for")
	a.notes = append(v.planLines(r), fleetNotes(r, spec, left, v.res.pools, now, desc)...)
	return a, nil
}

// planLines say which plan the action carries out and what it expects.
func (v *planView) planLines(r planner.Result) []string {
	loc := v.c.now().Location()
	return []string{fmt.Sprintf("Plan #%s (%s) %s: expected $%.2f, p95 $%.2f, on time in %.1f %% of %s runs — a model, not a quote.",
		rowLabel(v.cur), v.res.at.In(loc).Format("15:04"), r.Strategy, r.ExpectedCostUSD, r.P95CostUSD, r.OnTimePct, present.Thousands(v.runs))}
}

// bookNotes say what booking a strategy's offering does not do.
func bookNotes(r planner.Result, o domain.Offering, job planner.Job, pools map[string]planner.Pool, now time.Time) []string {
	var out []string
	if o.StartsOnPurchase && job.Start.After(now.Add(time.Hour)) {
		out = append(out, fmt.Sprintf("It starts when bought, now, %s before the job's start (%s), and bills from now.",
			roundDur(job.Start.Sub(now)), job.Start.In(now.Location()).Format("Mon 01-02 15:04")))
	}
	undone := []string{"running your job on it"}
	if r.Strategy == planner.StrategyBlockSpot {
		spot := "the spot part of the plan"
		if len(r.Pools) > 0 {
			p := pools[r.Pools[0]]
			spot = fmt.Sprintf("the spot part of the plan (%s in %s first, %s)", present.DisplayType(p.InstanceType), present.Place(p.Region, p.Zone), plural(len(r.Pools), "pool"))
		}
		undone = []string{spot + " and its on-demand safety net: this books the block only", "running your job"}
	}
	return append(out, "Not automated: "+strings.Join(undone, "; ")+".")
}

// planFleet is a strategy's fleet: its first pool's provider, region and GPUs
// per instance, enough for the job; left are the pools it does not hold.
func planFleet(r planner.Result, pools map[string]planner.Pool, job planner.Job) (domain.FleetSpec, []planner.Pool, error) {
	var spec domain.FleetSpec
	if len(r.Pools) == 0 {
		return spec, nil, fmt.Errorf("%s names no pool to launch: r runs the plan again", r.Strategy)
	}
	p0, ok := pools[r.Pools[0]]
	if !ok || p0.GPUsPerInstance <= 0 {
		return spec, nil, fmt.Errorf("the plan's pool %s is no longer known: r runs the plan again", r.Pools[0])
	}
	var left []planner.Pool
	spec = domain.FleetSpec{Provider: p0.Provider, Region: p0.Region, Strategy: domain.StrategyPriceCapacityOptimized,
		TargetCapacity: int(math.Ceil(float64(job.GPUs)/p0.GPUsPerInstance - 1e-9))}
	for _, k := range r.Pools {
		p, ok := pools[k]
		if !ok {
			continue
		}
		if p.Provider != p0.Provider || p.Region != p0.Region || p.GPUsPerInstance != p0.GPUsPerInstance {
			left = append(left, p)
			continue
		}
		if !slices.Contains(spec.InstanceTypes, p.InstanceType) {
			spec.InstanceTypes = append(spec.InstanceTypes, p.InstanceType)
		}
		if p.Zone != "" && !slices.Contains(spec.Zones, p.Zone) {
			spec.Zones = append(spec.Zones, p.Zone)
		}
	}
	if r.Strategy == planner.StrategyOnDemand {
		// On-demand costs the same in every zone.
		spec.OnDemandBase, spec.Zones = spec.TargetCapacity, nil
	}
	if spec.TargetCapacity < 1 {
		return spec, nil, errors.New("the plan needs no instances")
	}
	return spec, left, nil
}

// fleetNotes are short so that at 80×24 the box shows them whole.
func fleetNotes(r planner.Result, spec domain.FleetSpec, left []planner.Pool, pools map[string]planner.Pool, now time.Time, desc domain.Descriptor) []string {
	when := func(t time.Time) string {
		return fmt.Sprintf("%s (%s UTC)", t.In(now.Location()).Format("Mon 01-02 15:04"), t.UTC().Format("15:04"))
	}
	var out []string
	switch keeper := ledger.KeeperOf(desc); {
	case keeper == ledger.KeptByCloud && spec.Start.After(now):
		out = append(out, fmt.Sprintf("The cloud launches it at %s and ends it at the deadline, %s, whether or not gpumarket runs then.", when(spec.Start), when(spec.End)))
	case keeper == ledger.KeptByCloud && !spec.End.IsZero():
		out = append(out, fmt.Sprintf("The cloud ends it at the deadline, %s, whether or not gpumarket runs then.", when(spec.End)))
	case spec.Start.After(now):
		out = append(out, fmt.Sprintf("gpumarket launches it at %s and deletes it at the deadline, %s: a gpumarket TUI or `serve` must be running then.", when(spec.Start), when(spec.End)))
	case !spec.End.IsZero():
		out = append(out, fmt.Sprintf("gpumarket deletes it at the deadline, %s: a gpumarket TUI or `serve` must be running then.", when(spec.End)))
	default:
		out = append(out, "It bills until deleted (Ledger view, d); nothing ends it at the deadline.")
	}
	if r.Strategy == planner.StrategyOnDemand {
		return append(out, "On-demand capacity is not reserved: the cloud may have none (InsufficientInstanceCapacity).",
			"Not automated: running your job on it.")
	}
	var undone []string
	if len(left) > 0 {
		// Named by region, or by type where only the GPUs per instance differ.
		var where []string
		for _, p := range left {
			w := p.Provider + " " + p.Region
			if p.Provider == spec.Provider && p.Region == spec.Region {
				w = present.DisplayType(p.InstanceType) + " in " + p.Region
			}
			if !slices.Contains(where, w) {
				where = append(where, w)
			}
		}
		undone = append(undone, fmt.Sprintf("the plan's other pools (%s): a fleet is one provider's, in one region, of one size of instance", strings.Join(where, ", ")))
	}
	if r.OnDemandPool != "" {
		od := "on-demand"
		if p, ok := pools[r.OnDemandPool]; ok {
			od = fmt.Sprintf("on-demand (%s in %s)", present.DisplayType(p.InstanceType), p.Region)
		}
		undone = append(undone, "the safety net: moving the job to "+od+" when spot falls behind")
	} else {
		undone = append(undone, "finishing on on-demand what spot leaves at the deadline (the plan's cost counts it)")
	}
	undone = append(undone, "replacing interrupted instances", "restarting your job from its checkpoint")
	return append(out, "Not automated: "+strings.Join(undone, "; ")+".")
}

// roundDur says a duration as people do: 19h, 2d 3h, 40m.
func roundDur(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		d = d.Round(time.Hour)
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d.Round(time.Hour).Hours()))
	}
	return fmt.Sprintf("%dm", int(d.Round(time.Minute).Minutes()))
}

// jobAction is b on a strategy a driver carries out (spot, or spot with
// the on-demand safety net): the plan becomes a job in the ledger, which
// this process (and any gpumarket that runs) drives. The confirmation
// holds the whole commitment against the caps and says what happens
// while no gpumarket runs.
func (v *planView) jobAction(r planner.Result) *moneyAction {
	pools := make([]planner.Pool, 0, len(v.res.pools))
	for _, p := range v.res.pools {
		pools = append(pools, p)
	}
	slices.SortFunc(pools, func(a, b planner.Pool) int { return strings.Compare(a.Key, b.Key) })
	req := job.Request{Job: v.res.terms.job, Market: planner.Market{Pools: pools}, Strategy: r.Strategy, Actor: v.c.actor,
		Options: planner.Options{Runs: v.runs, Seed: 1, Speeds: v.speeds}}
	svc := v.svc
	req.PurchaseCap = svc.Budget().MaxBookingUSD
	return &moneyAction{
		title: fmt.Sprintf("Start a job carrying out %s?%s", r.Strategy, simLaunch(svc, r.Provider)), verb: "start the job",
		checking: "planning the job again and checking its hold against the budget", sending: "recording the job",
		quote: func(ctx context.Context) quoteAnswer {
			p, err := job.Propose(req)
			if err != nil {
				return quoteAnswer{err: err}
			}
			ans := quoteAnswer{lines: jobLines(req, p, svc)}
			if b := svc.Budget(); b.MaxBookingUSD > 0 && p.HoldUSD > b.MaxBookingUSD {
				ans.err = &ledger.BudgetError{Cap: "max_booking_usd", CapUSD: b.MaxBookingUSD, CostUSD: p.HoldUSD}
				return ans
			}
			ans.send = func(ctx context.Context) outcome {
				j, err := job.Start(ctx, svc, req, p)
				if err != nil {
					return outcome{err: err}
				}
				return outcome{notice: fmt.Sprintf("job %s recorded: this gpumarket carries it out (Ledger view: Jobs)", short(j.ID))}
			}
			return ans
		},
	}
}

// jobLines are the job's terms, the hold first.
func jobLines(req job.Request, p job.Proposal, svc *ledger.Service) []string {
	out := []string{
		fmt.Sprintf("Hold: $%.2f against the budget caps, counted with every other purchase of the day. It is the job's limit: its work on on-demand alone within budget.max_booking_usd, or the plan's p95 if larger (job start --max-usd sets another).", p.HoldUSD),
		fmt.Sprintf("Plan: expected $%.2f, p95 $%.2f, on time in %.0f %% of the runs.", p.Result.ExpectedCostUSD, p.Result.P95CostUSD, p.Result.OnTimePct),
		fmt.Sprintf("%s, moving after an interruption, on-demand in time for the deadline where the strategy has it; everything ends when the work is done.",
			plural(len(p.Live.Lanes), "spot pool")),
		job.Unattended(job.Every),
	}
	return out
}
