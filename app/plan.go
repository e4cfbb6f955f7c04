package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
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

// ReadTraces reads and checks every file; a missing or malformed one is a
// usage error naming it.
func ReadTraces(files []string) ([]planner.Trace, error) {
	out := make([]planner.Trace, 0, len(files))
	for _, name := range files {
		fh, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, Usagef("--trace %s: no such file; want trace files (%s)", name, planner.TraceForm)
		}
		var t planner.Trace
		if err == nil {
			t, err = planner.ReadTrace(name, fh)
			fh.Close()
		}
		// The file's own errors name it; the trace's name its field.
		var pe *fs.PathError
		switch {
		case errors.As(err, &pe):
			return nil, Usagef("--trace %s: %v", name, pe.Err)
		case err != nil:
			return nil, Usagef("--%s", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// simTraceGap is the tick of the traces the simulated market writes: the
// public multi-node traces' 300 s.
const simTraceGap = 5 * time.Minute

// SimTraces records the simulated market's pools of instanceType (in the
// region filter) for days up to now, writes one file per pool to dir
// (default: a new one under the data dir) and says where.
func (a *App) SimTraces(instanceType string, days int, dir string) ([]planner.Trace, error) {
	e := a.s
	m := sim.New(sim.Options{Seed: e.Config.Sim.Seed})
	end := time.Now().UTC().Truncate(time.Hour)
	from := end.Add(-time.Duration(days) * 24 * time.Hour)
	ticks := int(end.Sub(from) / simTraceGap)
	if dir == "" {
		dir = filepath.Join(e.DataDir, "traces", fmt.Sprintf("sim-seed%d-%s-%s", e.Config.Sim.Seed, instanceType, end.Format("20060102T1504Z")))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write sim traces: %w", err)
	}
	var out []planner.Trace
	for _, p := range m.Pools(end) {
		if !strings.EqualFold(p.InstanceType, instanceType) {
			continue
		}
		if !e.Query.WantsRegion(p.Region) {
			continue
		}
		data, err := m.Capacity(p.Key(), from, simTraceGap, ticks)
		if err != nil {
			return nil, err
		}
		name := filepath.Join(dir, fmt.Sprintf("%s_%s_%s.json", p.Region, strings.ReplaceAll(p.Zone, "/", "-"), p.InstanceType))
		t := planner.Trace{Name: name, GapSeconds: int(simTraceGap / time.Second), Data: data}
		fh, err := os.Create(name)
		if err != nil {
			return nil, fmt.Errorf("write sim traces: %w", err)
		}
		werr := t.Write(fh)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("write sim trace %s: %w", name, werr)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, Usagef("--instance-type %s: the simulated market has no pool of it in the region filter; want one such as p3.2xlarge, p5.48xlarge or g5.xlarge",
			instanceType)
	}
	fmt.Fprintf(a.errOut, "gpumarket: backtest: wrote %d traces of the simulated market (seed %d, %s, %d days to %s, %s ticks) to %s\n",
		len(out), e.Config.Sim.Seed, instanceType, days, end.Format(time.RFC3339), "5-minute", dir)
	return out, nil
}
