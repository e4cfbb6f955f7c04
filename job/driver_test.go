package job_test

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// clock is a clock the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

var t0 = time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)

type simWorld struct {
	clk    *clock
	market *sim.Market
	st     *ledger.Store
	svc    *ledger.Service
	dir    string
}

func newSimWorld(t *testing.T, seed int64, budget ledger.Budget) *simWorld {
	t.Helper()
	w := &simWorld{clk: &clock{t: t0}, dir: t.TempDir()}
	w.market = sim.New(sim.Options{Seed: seed, Now: w.clk.Now})
	w.st, w.svc = w.open(t, budget)
	return w
}

// open opens another handle on the world's ledger, as another process
// would.
func (w *simWorld) open(t *testing.T, budget ledger.Budget) (*ledger.Store, *ledger.Service) {
	t.Helper()
	st, err := ledger.Open(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := ledger.New(st, []domain.Provider{w.market}, ledger.Options{Now: w.clk.Now, Timeout: 5 * time.Second, Budget: budget, Actor: "tester"})
	return st, svc
}

func (w *simWorld) driver(svc *ledger.Service, every time.Duration) *job.Driver {
	return job.New(svc, []domain.Provider{w.market}, job.Options{Now: w.clk.Now, Every: every, Lease: 3 * every})
}

// planMarket is the simulated market's pools of a model at the clock's
// time, as the planner reads them.
func (w *simWorld) planMarket(model string) planner.Market {
	now := w.clk.Now()
	var m planner.Market
	for _, p := range w.market.Pools(now) {
		if p.GPU.Model != model {
			continue
		}
		spot, ok := w.market.SpotPrice(p.Key(), now)
		if !ok {
			spot = math.NaN()
		}
		m.Pools = append(m.Pools, planner.PoolOf(p, spot, nil))
	}
	return m
}

func (w *simWorld) start(t *testing.T, svc *ledger.Service, gpus int, hours, deadline float64, maxUSD float64) ledger.Job {
	t.Helper()
	start := w.clk.Now()
	req := job.Request{
		Job: planner.Job{GPUs: gpus, Models: []string{"H100"}, Hours: hours, Start: start, Deadline: start.Add(time.Duration(deadline * float64(time.Hour))),
			Checkpointable: true, Checkpoint: 30 * time.Minute, Changeover: 12 * time.Minute},
		Market: w.planMarket("H100"), Options: planner.Options{Runs: 400}, Strategy: planner.StrategySafetyNet, MaxUSD: maxUSD,
	}
	p, err := job.Propose(req)
	if err != nil {
		t.Fatal(err)
	}
	j, err := job.Start(context.Background(), svc, req, p)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// drive reviews with d, moving the clock to each next review, until the
// job ends or `until`.
func (w *simWorld) drive(t *testing.T, d *job.Driver, id string, until time.Time) ledger.Job {
	t.Helper()
	ctx := context.Background()
	for w.clk.Now().Before(until) {
		pass, err := d.Review(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pass.Errs {
			t.Fatalf("review: %v", e)
		}
		j, err := w.st.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !ledger.JobActive(j.State) {
			return j
		}
		w.clk.Set(pass.Next)
	}
	j, _ := w.st.GetJob(ctx, id)
	return j
}

// noneRunning fails if any of the job's fleets may still run, at the
// ledger or in the market.
func noneRunning(t *testing.T, w *simWorld, id string) []ledger.Entry {
	t.Helper()
	ctx := context.Background()
	rows, err := w.st.JobRows(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range rows {
		if keys[r.IdemKey] {
			t.Errorf("key %s launched twice", r.IdemKey)
		}
		keys[r.IdemKey] = true
		if r.State == ledger.StateActive || r.State == ledger.StatePending || r.State == ledger.StateUnknown {
			t.Errorf("row %s (%s) left %s", r.ID, r.ProviderRef, r.State)
		}
		if r.ProviderRef != "" {
			if f, err := w.market.DescribeFleet(ctx, r.Region, r.ProviderRef); err == nil && f.Instances > 0 {
				t.Errorf("fleet %s still runs %d instances", r.ProviderRef, f.Instances)
			}
		}
	}
	return rows
}

func TestJobDoneOnTimeOnTheSimulatedMarket(t *testing.T) {
	var spent, plan float64
	seeds := []int64{1, 2, 3, 4, 5}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		w := newSimWorld(t, seed, ledger.Budget{})
		j := w.start(t, w.svc, 16, 48, 72, 0)
		// Reviews an hour apart at the least: the driver wakes at each
		// change of the market's capacity and at the policy's reviews.
		var logged strings.Builder
		d := job.New(w.svc, []domain.Provider{w.market}, job.Options{Now: w.clk.Now, Every: time.Hour, Lease: 3 * time.Hour,
			Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		j = w.drive(t, d, j.ID, t0.Add(80*time.Hour))
		// 48 h of work take 48 h at least: a finish before that is not on
		// the job's clock.
		if j.State != ledger.JobDone || j.WorkDone < 48-1e-6 || j.FinishedAt.After(j.Terms.Deadline) || j.FinishedAt.Before(j.Terms.Start.Add(48*time.Hour)) {
			t.Errorf("seed %d: %s %.2f h done, finished %s (deadline %s): %s", seed, j.State, j.WorkDone, j.FinishedAt, j.Terms.Deadline, j.Reason)
		}
		rows := noneRunning(t, w, j.ID)
		moves, _ := w.st.JobMoves(context.Background(), j.ID)
		if len(rows) == 0 || len(moves) < len(rows) {
			t.Errorf("seed %d: %d rows, %d moves", seed, len(rows), len(moves))
		}
		// Fleets already ended or deleted are left alone, not deleted again.
		if logged.Len() > 0 {
			t.Errorf("seed %d: the driver warned:\n%s", seed, logged.String())
		}
		spent += j.SpentUSD
		plan += j.Plan.ExpectedUSD
		t.Logf("seed %d: spent $%.2f, plan $%.2f, %d launches, %d moves", seed, j.SpentUSD, j.Plan.ExpectedUSD, len(rows), len(moves))
	}
	if r := spent / plan; r < 0.8 || r > 1.2 {
		t.Errorf("mean spent $%.2f against the plan's $%.2f (%.0f%%): want within ±20%%", spent/float64(len(seeds)), plan/float64(len(seeds)), 100*(r-1))
	}
}

func TestDriverEndsTheFleetWhenTheWorkIsDone(t *testing.T) {
	w := newSimWorld(t, 3, ledger.Budget{})
	// 2.5 h of work with a changeover and two minutes to spare: on-demand
	// at once, done at 2.7 h, between the driver's hourly reviews.
	j := w.start(t, w.svc, 16, 2.5, 2.75, 0)
	d := w.driver(w.svc, time.Hour)
	j = w.drive(t, d, j.ID, t0.Add(5*time.Hour))
	done := t0.Add(2*time.Hour + 42*time.Minute)
	if j.State != ledger.JobDone || j.FinishedAt.Before(done) || j.FinishedAt.After(done.Add(time.Second)) {
		t.Fatalf("%s at %s: %s; want done at %s", j.State, j.FinishedAt, j.Reason, done)
	}
	for _, r := range noneRunning(t, w, j.ID) {
		if r.End.After(done.Add(time.Second)) {
			t.Errorf("fleet %s ran until %s, past the work's end %s: paid for nothing", r.ProviderRef, r.End, done)
		}
	}
}

func TestCancelEndsEverything(t *testing.T) {
	w := newSimWorld(t, 1, ledger.Budget{})
	j := w.start(t, w.svc, 16, 48, 72, 0)
	d := w.driver(w.svc, 15*time.Minute)
	w.drive(t, d, j.ID, t0.Add(6*time.Hour))
	ctx := context.Background()
	rows, _ := w.st.JobRows(ctx, j.ID)
	if len(rows) == 0 {
		t.Fatal("nothing launched in 6 h")
	}
	got, err := job.Cancel(ctx, w.svc, j.ID, "tester")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.JobCancelled {
		t.Errorf("state %s", got.State)
	}
	noneRunning(t, w, j.ID)
	// A driver that reviews after the cancel launches nothing.
	n := len(rows)
	w.clk.Set(w.clk.Now().Add(time.Hour))
	if _, err := d.Review(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, _ := w.st.JobRows(ctx, j.ID); len(rows) != n {
		t.Errorf("launched after the cancel: %d rows, had %d", len(rows), n)
	}
	if _, err := job.Cancel(ctx, w.svc, j.ID, "tester"); err == nil {
		t.Error("cancelled twice")
	}
}

func TestLimitStopsTheJob(t *testing.T) {
	w := newSimWorld(t, 2, ledger.Budget{})
	// A limit far below what the job needs: it must stop at it.
	const limit = 300.0
	j := w.start(t, w.svc, 16, 48, 72, limit)
	if j.MaxUSD != limit || j.HoldUSD != j.Plan.P95USD {
		t.Fatalf("limit %v hold %v (p95 %v)", j.MaxUSD, j.HoldUSD, j.Plan.P95USD)
	}
	var alerts []string
	d := job.New(w.svc, []domain.Provider{w.market}, job.Options{Now: w.clk.Now, Every: 15 * time.Minute,
		Alert: func(_ ledger.Job, key, text string) { alerts = append(alerts, key+": "+text) }})
	j = w.drive(t, d, j.ID, t0.Add(80*time.Hour))
	if j.State != ledger.JobFailed || j.SpentUSD > limit+1e-6 {
		t.Errorf("%s, spent $%.2f of a $%.2f limit: %s", j.State, j.SpentUSD, limit, j.Reason)
	}
	noneRunning(t, w, j.ID)
	if !slices.ContainsFunc(alerts, func(a string) bool { return strings.HasPrefix(a, j.ID+"/failed: ") && strings.Contains(a, "limit") }) {
		t.Errorf("no failure alert: %q", alerts)
	}
}

func TestSafetyNetPastTheLimitIsNotBought(t *testing.T) {
	w := newSimWorld(t, 2, ledger.Budget{})
	// Half an hour of slack: the safety net is due at once, and its 48 h of
	// on-demand cost far more than the limit.
	const limit = 1000.0
	j := w.start(t, w.svc, 16, 48, 48.5, limit)
	var alerts []string
	d := job.New(w.svc, []domain.Provider{w.market}, job.Options{Now: w.clk.Now, Every: 15 * time.Minute,
		Alert: func(_ ledger.Job, key, text string) { alerts = append(alerts, key+": "+text) }})
	j = w.drive(t, d, j.ID, t0.Add(50*time.Hour))
	if j.State != ledger.JobFailed || !strings.Contains(j.Reason, "safety net") || !strings.Contains(j.Reason, "--max-usd") {
		t.Fatalf("%s: %s; want failed before buying the safety net", j.State, j.Reason)
	}
	noneRunning(t, w, j.ID)
	if j.SpentUSD > 0.5*limit {
		t.Errorf("spent $%.2f of a $%.2f limit: the doomed safety net was bought", j.SpentUSD, limit)
	}
	if !slices.ContainsFunc(alerts, func(a string) bool { return strings.HasPrefix(a, j.ID+"/failed: ") }) {
		t.Errorf("no failure alert: %q", alerts)
	}
}

func TestDefaultLimitAffordsTheSafetyNet(t *testing.T) {
	w := newSimWorld(t, 2, ledger.Budget{})
	propose := func(strategy string, maxUSD, purchaseCap float64) job.Proposal {
		t.Helper()
		start := w.clk.Now()
		p, err := job.Propose(job.Request{
			Job: planner.Job{GPUs: 16, Models: []string{"H100"}, Hours: 48, Start: start, Deadline: start.Add(72 * time.Hour),
				Checkpointable: true, Checkpoint: 30 * time.Minute, Changeover: 12 * time.Minute},
			Market: w.planMarket("H100"), Options: planner.Options{Runs: 400}, Strategy: strategy, MaxUSD: maxUSD, PurchaseCap: purchaseCap})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := propose(planner.StrategySafetyNet, 0, 0)
	od := p.Live.OnDemand
	want := od.USDHour * (48/od.Speed + 0.2)
	if math.Abs(p.HoldUSD-want) > 0.01 || p.HoldUSD <= p.Result.P95CostUSD {
		t.Errorf("safety-net job with no --max-usd holds $%.2f (p95 $%.2f); want the work on on-demand alone, $%.2f",
			p.HoldUSD, p.Result.P95CostUSD, want)
	}
	// Within the per-purchase cap, never below the p95.
	mid := (p.Result.P95CostUSD + want) / 2
	if c := propose(planner.StrategySafetyNet, 0, mid); math.Abs(c.HoldUSD-mid) > 0.01 {
		t.Errorf("under a $%.2f purchase cap the job holds $%.2f; want the cap", mid, c.HoldUSD)
	}
	if c := propose(planner.StrategySafetyNet, 0, 10); c.HoldUSD != c.Result.P95CostUSD {
		t.Errorf("under a $10 purchase cap the job holds $%.2f; want its p95 $%.2f (the caps then refuse it)", c.HoldUSD, c.Result.P95CostUSD)
	}
	if p := propose(planner.StrategySpotMulti, 0, 0); p.HoldUSD != p.Result.P95CostUSD {
		t.Errorf("spot-only job holds $%.2f; want its p95 $%.2f (no safety net to pay for)", p.HoldUSD, p.Result.P95CostUSD)
	}
	if p := propose(planner.StrategySafetyNet, 100, 0); p.HoldUSD != p.Result.P95CostUSD {
		t.Errorf("--max-usd 100 holds $%.2f; want the larger of it and the p95 ($%.2f)", p.HoldUSD, p.Result.P95CostUSD)
	}
}
