package app

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/memtrim"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// JobProviders are the providers in use plus those the active jobs'
// lanes launch in.
func (a *App) JobProviders(ctx context.Context) ([]domain.Provider, error) {
	st, err := a.Ledger()
	if err != nil {
		return nil, err
	}
	js, err := st.ListJobs(ctx, ledger.JobScheduled, ledger.JobRunning)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, j := range js {
		var lj planner.LiveJob
		if err := json.Unmarshal(j.Live, &lj); err != nil {
			continue
		}
		if lj.OnDemand != nil {
			lj.Lanes = append(lj.Lanes, *lj.OnDemand)
		}
		for _, l := range lj.Lanes {
			names = appendNew(names, l.Provider)
		}
	}
	return a.Providers(ctx, names...)
}

// JobDriver is the process's driver of the ledger's jobs; its alerts go
// to the log and stderr.
func (a *App) JobDriver(svc *ledger.Service, ps []domain.Provider, tell func(string)) *job.Driver {
	return job.New(svc, ps, job.Options{Logger: a.s.Log, Actor: LocalActor(), Now: a.s.Now, Speed: a.s.Speed(),
		Template: func(string) string { return a.s.Config.AWS.LaunchTemplate }, Risk: a.poolRisk,
		Alert: func(j ledger.Job, key, text string) {
			a.s.Log.Info("job", "job", j.ID, "alert", key, "text", text)
			if tell != nil {
				tell(text)
			}
		}})
}

// poolRisk is a pool's spot process in the running hub's latest snapshot,
// for n instances; a process without a hub (job run) keeps the plan's.
func (a *App) poolRisk(pool string, n int) (planner.Risk, bool) {
	h := a.RunningHub()
	if h == nil {
		return planner.Risk{}, false
	}
	snap := h.Snapshot()
	if snap == nil {
		return planner.Risk{}, false
	}
	i, ok := slices.BinarySearchFunc(snap.Pools, pool, func(p feed.PoolView, k string) int { return strings.Compare(p.Key, k) })
	if !ok {
		return planner.Risk{}, false
	}
	return planner.RiskOf(snap.Pools[i].Pool, a.s.PlanPriors()).ForInstances(n), true
}

// DriveJobs drives the ledger's jobs until Close, as every long-running
// gpumarket does.
func (a *App) DriveJobs(svc *ledger.Service, ps []domain.Provider) {
	d := a.JobDriver(svc, ps, nil)
	a.Go(func(ctx context.Context) { _ = d.Run(ctx, false) })
}

// ProposeJob plans req's job on the market within timeout (its pools and
// the purchase cap filled in) and prices its strategy.
func (a *App) ProposeJob(ctx context.Context, req *job.Request, timeout time.Duration) (job.Proposal, *ledger.Service, error) {
	m, svc, err := a.PlanMarket(ctx, req.Job, timeout)
	if err != nil {
		return job.Proposal{}, nil, err
	}
	req.Market, req.PurchaseCap = m, svc.Budget().MaxBookingUSD
	p, err := job.Propose(*req)
	return p, svc, PlanUsage(err)
}

// HoldWithinCap refuses a job's hold over budget.max_booking_usd, to the
// cent as the ledger compares.
func HoldWithinCap(b ledger.Budget, holdUSD float64) error {
	cents := func(usd float64) int64 { return int64(math.Round(usd * 100)) }
	if b.MaxBookingUSD > 0 && cents(holdUSD) > cents(b.MaxBookingUSD) {
		return &ledger.BudgetError{Cap: "max_booking_usd", CapUSD: b.MaxBookingUSD, CostUSD: holdUSD}
	}
	return nil
}

// CancelJob cancels the job through the providers of its rows: it
// launches nothing more, and every fleet it runs is deleted.
func (a *App) CancelJob(ctx context.Context, id string, timeout time.Duration) (ledger.Job, error) {
	st, err := a.Ledger()
	if err != nil {
		return ledger.Job{}, err
	}
	rows, _ := st.JobRows(ctx, id)
	var names []string
	for _, r := range rows {
		names = appendNew(names, r.Provider)
	}
	ps, err := a.Providers(ctx, names...)
	if err != nil {
		return ledger.Job{}, err
	}
	svc, err := a.Booking(ps, timeout)
	if err != nil {
		return ledger.Job{}, err
	}
	return job.Cancel(ctx, svc, id, LocalActor())
}

// RunJobs drives the ledger's jobs headless until none is active (once:
// one review of each), telling each alert.
func (a *App) RunJobs(ctx context.Context, once bool, tell func(string)) error {
	ps, err := a.JobProviders(ctx)
	if err != nil {
		return err
	}
	svc, err := a.Booking(ps, 0)
	if err != nil {
		return err
	}
	d := a.JobDriver(svc, ps, tell)
	if once {
		pass, err := d.Review(ctx)
		if err != nil {
			return err
		}
		return errors.Join(pass.Errs...)
	}
	defer TrimAfterStart()()
	if err = d.Run(ctx, true); errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// TrimAfterStart hands back, once a headless loop has settled, the memory
// only start-up used (memtrim.Release); it returns the timer's stop.
func TrimAfterStart() func() {
	t := time.AfterFunc(10*time.Second, func() { memtrim.Release() })
	return func() { t.Stop() }
}
