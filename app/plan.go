package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/present"
	"github.com/gpumarket/gpumarket/watch"
)

// PlanPools are the snapshot's pools of the job's models (present.PlanPools).
func (s *Settings) PlanPools(snap *feed.Snapshot, job planner.Job) []planner.Pool {
	return present.PlanPools(snap, job.Models, s.Query.Matches, s.PlanPriors())
}

// planMarket is the snapshot's pools of the job's models, with what the
// user's own fleets met in them.
func (a *App) planMarket(ctx context.Context, snap *feed.Snapshot, job planner.Job) planner.Market {
	return planner.Market{Pools: planner.WithOwn(a.s.PlanPools(snap, job), a.OwnFleets(ctx))}
}

// PlanMarket waits within timeout for the sources and returns the job's
// market and the booking service over them; a --gpu model no pool sells
// is refused (said once, here, not by the wait).
func (a *App) PlanMarket(ctx context.Context, job planner.Job, timeout time.Duration) (planner.Market, *ledger.Service, error) {
	ps, err := a.Providers(ctx)
	if err != nil {
		return planner.Market{}, nil, err
	}
	snap, err := a.readySnapshot(ctx, timeout, true)
	if err != nil {
		return planner.Market{}, nil, err
	}
	m := a.planMarket(ctx, snap, job)
	if err := a.s.CheckModelsSold(snap, job.Models); err != nil {
		return m, nil, err
	}
	svc, err := a.Booking(ps, timeout)
	return m, svc, err
}

// PlanUsage words a planner refusal as a usage error naming the flag.
func PlanUsage(err error) error {
	var fe *planner.FieldError
	if errors.As(err, &fe) {
		return Usagef("--%s %s", fe.Field, fe.Msg)
	}
	return err
}

// OfferingsFor searches the job's offerings; warn hears each failure once.
func (a *App) OfferingsFor(ctx context.Context, svc *ledger.Service, job planner.Job, warn func(string)) ([]domain.Offering, error) {
	s := a.s
	if !svc.CanBook() {
		return nil, nil
	}
	var out []domain.Offering
	seen := map[string]bool{}
	warned := map[string]bool{}
	for _, q := range planner.BlockQueries(job, a.s.Now(), s.PlanSpeeds()) {
		q.Regions = s.Query.Regions
		res, err := svc.FindOfferings(ctx, q)
		if ctx.Err() != nil {
			// Interrupted: what the providers could not answer is no news.
			return nil, ctx.Err()
		}
		for name, perr := range res.Failed {
			if msg := fmt.Sprintf("%s: %v", name, perr); !warned[msg] {
				warned[msg] = true
				warn(fmt.Sprintf("offerings of %s for %s: %s", q.GPU, domain.FormatWindow(q.Duration), FirstLine(msg)))
			}
		}
		if err != nil && len(res.Failed) == 0 {
			return nil, err
		}
		for _, o := range res.Offerings {
			if !seen[o.ID] {
				seen[o.ID] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// PlanBasis is the job EFF $/GPU-H prices every pool for: config plan.*.
func (s *Settings) PlanBasis() planner.Basis {
	p := s.Config.Plan
	return planner.Basis{GPUs: p.GPUs, Hours: p.Hours, Checkpoint: p.Checkpoint.D(), Changeover: p.Changeover.D(), Priors: s.PlanPriors()}
}

// PlanPriors are config plan.priors over the planner's defaults.
func (s *Settings) PlanPriors() planner.Priors {
	if len(s.Config.Plan.Priors) == 0 {
		return nil
	}
	out := planner.Priors{}
	for g, p := range s.Config.Plan.Priors {
		out[g] = planner.Prior{InterruptionsPerHour: p.InterruptionsPerHour, GapMedianHours: p.GapMedianHours, Availability: p.Availability}
	}
	return out
}

// PlanSpeeds are config plan.speed over the planner's defaults.
func (s *Settings) PlanSpeeds() planner.Speeds {
	out := maps.Clone(planner.DefaultSpeeds)
	maps.Copy(out, s.Config.Plan.Speed)
	return out
}

// OwnFleets is what the user's spot fleets met per pool; nothing when the
// ledger cannot be read.
func (a *App) OwnFleets(ctx context.Context) planner.Own {
	st, err := a.Ledger()
	if err != nil {
		return nil
	}
	fs, err := st.FleetUsages(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted: the plan says so itself, once
		}
		a.s.Log.Warn("plan: the ledger's fleets could not be read; risk from the market alone", "err", err)
		return nil
	}
	return planner.OwnFrom(fs, a.s.Now())
}

// planRule prices a plan rule's job as `gpumarket plan` does.
type planRule struct {
	a   *App
	svc *ledger.Service
}

// planRuleRuns: a rule asks every few minutes, so a tenth of plan's runs do.
const planRuleRuns = 2000

// BestPlan implements watch.Planner.
func (p planRule) BestPlan(ctx context.Context, job watch.PlanJob, snap *feed.Snapshot) (watch.PlanQuote, error) {
	a := p.a
	pj := planner.Job{GPUs: job.GPUs, Models: job.Models, Hours: job.Hours, Start: job.Start, Deadline: job.Deadline,
		Checkpoint: job.Checkpoint, Checkpointable: job.Checkpoint > 0, Changeover: a.s.Config.Plan.Changeover.D()}
	m := a.planMarket(ctx, snap, pj)
	offs, err := a.OfferingsFor(ctx, p.svc, pj, func(msg string) { a.s.Log.Warn("watch: plan rule: " + msg) })
	if err != nil {
		return watch.PlanQuote{}, err
	}
	m.Offerings = offs
	results, err := planner.Plan(pj, m, planner.Options{Runs: planRuleRuns, Seed: 1, Speeds: a.s.PlanSpeeds()})
	if err != nil {
		return watch.PlanQuote{}, err
	}
	planner.Rank(results, job.OnTimePct)
	for _, r := range results {
		if r.OnTimePct < job.OnTimePct || math.IsNaN(r.ExpectedCostUSD) {
			continue
		}
		return watch.PlanQuote{Found: true, Strategy: r.Strategy, Provider: r.Provider, InstanceType: r.InstanceType,
			Regions: r.Regions, ExpectedUSD: r.ExpectedCostUSD, USDPerUsefulGPUHour: r.USDPerUsefulGPUHour,
			OnTimePct: r.OnTimePct, OfferingID: r.OfferingID, Simulated: a.table.Describe(r.Provider).Simulated}, nil
	}
	return watch.PlanQuote{}, nil
}

// FirstLine is s trimmed, up to its first line break.
func FirstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
