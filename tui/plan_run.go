package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
)

// planRuns is `gpumarket plan`'s default.
const planRuns = 10000

// planSearchTimeout: a silent cloud must not leave the view planning for ever.
const planSearchTimeout = time.Minute

// planMsg is a plan's answer with what it was made of, to carry out as shown.
type planMsg struct {
	seq   int
	terms planTerms
	// results are ranked: on time enough first, then cheapest expected.
	results []planner.Result
	// pools and offers are the market the plan was made on.
	pools  map[string]planner.Pool
	offers map[string]domain.Offering
	// failed are the providers or regions whose offering search failed.
	failed map[string]error
	err    error
	at     time.Time
}

// planInput is copied off the model before the task runs.
type planInput struct {
	seq    int
	terms  planTerms
	pools  []planner.Pool
	svc    *ledger.Service
	speeds planner.Speeds
	runs   int
	now    time.Time
}

// planPools are read as `gpumarket plan` does (present.PlanPools).
func planPools(snap *feed.Snapshot, t planTerms, priors planner.Priors) []planner.Pool {
	return present.PlanPools(snap, t.job.Models, func(p domain.Pool) bool {
		return len(t.regions) == 0 || slices.Contains(t.regions, p.Region)
	}, priors)
}

// makePlan searches offerings through the booking service (bookable by id)
// and plans the job on them and the pools.
func makePlan(ctx context.Context, in planInput) planMsg {
	out := planMsg{seq: in.seq, terms: in.terms, at: in.now, failed: map[string]error{},
		pools: map[string]planner.Pool{}, offers: map[string]domain.Offering{}}
	for _, p := range in.pools {
		out.pools[p.Key] = p
	}
	var offs []domain.Offering
	if in.svc != nil && in.svc.CanBook() {
		sctx, cancel := context.WithTimeout(ctx, planSearchTimeout)
		for _, q := range planner.BlockQueries(in.terms.job, in.now, in.speeds) {
			q.Regions = in.terms.regions
			res, err := in.svc.FindOfferings(sctx, q)
			// A source that did not answer: planned without it, and said.
			for _, w := range res.Warnings {
				name := strings.TrimSpace(w.Provider + " " + w.Region)
				if _, seen := out.failed[name]; !seen {
					out.failed[name] = fmt.Errorf("offerings of %s for %s: %w", q.GPU, domain.FormatWindow(q.Duration), w.Err)
				}
			}
			if err != nil && len(res.Warnings) == 0 {
				out.failed["offerings"] = err
			}
			for _, o := range res.Offerings {
				if _, seen := out.offers[o.ID]; !seen {
					out.offers[o.ID] = o
					offs = append(offs, o)
				}
			}
		}
		cancel()
	}
	results, err := planner.Plan(in.terms.job, planner.Market{Pools: planner.WithOwn(in.pools, ownFleets(ctx, in.svc, in.now)), Offerings: offs},
		planner.Options{Runs: in.runs, Seed: 1, Speeds: in.speeds})
	if err != nil {
		out.err = planFieldErr(err)
		return out
	}
	planner.Rank(results, in.terms.onTime)
	out.results = results
	return out
}

// ownFleets is what the user's spot fleets met per pool, as `plan` reads it.
func ownFleets(ctx context.Context, svc *ledger.Service, now time.Time) planner.Own {
	if svc == nil || svc.Store() == nil {
		return nil
	}
	st := svc.Store()
	rows, err := st.List(ctx)
	if err != nil {
		return nil
	}
	var fs []planner.FleetUsage
	for _, r := range rows {
		if r.Kind != domain.KindFleet {
			continue
		}
		if rep, _, ok, err := st.LoadUsage(ctx, r.ID); ok && err == nil {
			fs = append(fs, planner.FleetUsage{Provider: r.Provider, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, Report: rep})
		}
	}
	return planner.OwnFrom(fs, now)
}
