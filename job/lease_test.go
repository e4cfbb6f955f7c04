package job_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
	"github.com/gpumarket/gpumarket/planner"
)

// fakeWorld is a cloud that keeps its fleets whatever happens to the
// process that launched them (the ledger's fake, named aws), and a
// ledger several "processes" open.
type fakeWorld struct {
	clk  *clock
	fake *ledgertest.Fake
	dir  string
}

func newFakeWorld(t *testing.T) *fakeWorld {
	f := ledgertest.New("aws")
	f.Desc.Cloud = domain.CloudAWS
	return &fakeWorld{clk: &clock{t: t0}, fake: f, dir: t.TempDir()}
}

func (w *fakeWorld) process(t *testing.T) (*ledger.Store, *ledger.Service, *job.Driver) {
	t.Helper()
	st, err := ledger.Open(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc := ledger.New(st, []domain.Provider{w.fake}, ledger.Options{Now: w.clk.Now, Timeout: 5 * time.Second, Actor: "tester"})
	return st, svc, job.New(svc, []domain.Provider{w.fake}, job.Options{Now: w.clk.Now, Every: 10 * time.Minute, Lease: 30 * time.Minute})
}

// fakeJob is 20 h of work on 2 instances over three zones with an
// on-demand safety net, due in 30 h, each zone interrupted twice in 4 h.
func (w *fakeWorld) start(t *testing.T, svc *ledger.Service, mods ...func(*job.Request)) ledger.Job {
	t.Helper()
	lj := planner.LiveJob{Policy: planner.StrategySafetyNet, Start: t0, Deadline: t0.Add(30 * time.Hour), Work: 20, D: 0.2, Checkpoint: 0.5, AnyAvail: 0.9,
		OnDemand: &planner.LiveLane{Pool: "od", Provider: "aws", Region: "us-east-1", InstanceType: "p5.48xlarge", Instances: 2, USDHour: 196, Speed: 1, Score: 196}}
	for i, z := range []string{"a", "b", "c"} {
		lj.Lanes = append(lj.Lanes, planner.LiveLane{Pool: "aws/us-east-1/us-east-1" + z, Provider: "aws", Region: "us-east-1", Zone: "us-east-1" + z,
			InstanceType: "p5.48xlarge", Instances: 2, USDHour: 60, Speed: 1, Score: 62 + float64(i),
			Risk: planner.Risk{InterruptionsPerHour: 0.5, Availability: 0.8, GapMedianHours: 0.5}})
	}
	return w.startLive(t, svc, lj, mods...)
}

// startLive records a job carrying lj out, its plan on time 100 %.
func (w *fakeWorld) startLive(t *testing.T, svc *ledger.Service, lj planner.LiveJob, mods ...func(*job.Request)) ledger.Job {
	t.Helper()
	req := job.Request{Job: planner.Job{GPUs: 16, Models: []string{"H100"}, Hours: lj.Work, Start: lj.Start, Deadline: lj.Deadline, Checkpointable: true,
		Checkpoint: 30 * time.Minute, Changeover: 12 * time.Minute}, Strategy: lj.Policy}
	for _, m := range mods {
		m(&req)
	}
	j, err := job.Start(context.Background(), svc, req, job.Proposal{Live: lj, HoldUSD: 5000,
		Result: planner.Result{ExpectedCostUSD: 1300, P95CostUSD: 5000, OnTimePct: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// script interrupts the job's fleet at 3 h and at 7 h.
func (w *fakeWorld) script(t *testing.T, st *ledger.Store, id string, at time.Time, done map[int]bool) {
	for i, h := range []float64{3, 7} {
		if done[i] || at.Before(t0.Add(time.Duration(h*float64(time.Hour)))) {
			continue
		}
		done[i] = true
		rows, _ := st.JobRows(context.Background(), id)
		for _, r := range rows {
			if r.State == ledger.StateActive {
				w.fake.Interrupt(r.ProviderRef, 1)
			}
		}
	}
}

// run drives the job with d from the clock on, a review a minute, until
// it ends or d's review stops (a kill).
func (w *fakeWorld) run(t *testing.T, st *ledger.Store, d *job.Driver, id string, done map[int]bool) (ledger.Job, error) {
	ctx := context.Background()
	for w.clk.Now().Before(t0.Add(40 * time.Hour)) {
		w.script(t, st, id, w.clk.Now(), done)
		pass, err := d.Review(ctx)
		if err != nil {
			return ledger.Job{}, err
		}
		if len(pass.Errs) > 0 {
			return ledger.Job{}, pass.Errs[0]
		}
		j, _ := st.GetJob(ctx, id)
		if !ledger.JobActive(j.State) {
			return j, nil
		}
		w.clk.Set(w.clk.Now().Add(10 * time.Minute))
	}
	return st.GetJob(ctx, id)
}

func (w *fakeWorld) check(t *testing.T, st *ledger.Store, j ledger.Job, name string) int {
	t.Helper()
	if j.State != ledger.JobDone || j.FinishedAt.After(j.Terms.Deadline) || j.FinishedAt.Before(j.Terms.Start.Add(20*time.Hour)) {
		t.Errorf("%s: job %s, finished %s: %s", name, j.State, j.FinishedAt, j.Reason)
	}
	if a := w.fake.Active(); len(a) != 0 {
		t.Errorf("%s: fleets left running: %v", name, a)
	}
	var tokens []string
	for _, s := range w.fake.Launched() {
		if slices.Contains(tokens, s.ClientToken) {
			t.Errorf("%s: %s launched twice", name, s.ClientToken)
		}
		tokens = append(tokens, s.ClientToken)
	}
	rows, _ := st.JobRows(context.Background(), j.ID)
	for _, r := range rows {
		if r.State == ledger.StateActive || !r.Settled() {
			t.Errorf("%s: row %s left %s", name, r.ID, r.State)
		}
	}
	return len(tokens)
}

func TestKilledDriverIsTakenOver(t *testing.T) {
	// Without a kill: the launches the job makes.
	w := newFakeWorld(t)
	st, svc, d := w.process(t)
	j := w.start(t, svc)
	j, err := w.run(t, st, d, j.ID, map[int]bool{})
	if err != nil {
		t.Fatal(err)
	}
	want := w.check(t, st, j, "no kill")
	if want < 3 {
		t.Fatalf("only %d launches: the interruptions were not answered", want)
	}
	for _, kill := range []struct {
		point string
		nth   int
	}{{"move-recorded", 1}, {"launched", 1}, {"interrupt-ended", 1}, {"move-recorded", 2}, {"launched", 2}, {"interrupt-ended", 2}} {
		name := fmt.Sprintf("killed at %s #%d", kill.point, kill.nth)
		w := newFakeWorld(t)
		st1, svc1, d1 := w.process(t)
		j := w.start(t, svc1)
		n := 0
		job.SetHook(d1, func(p string) error {
			if p == kill.point {
				if n++; n == kill.nth {
					return errors.New("kill -9")
				}
			}
			return nil
		})
		done := map[int]bool{}
		if _, err := w.run(t, st1, d1, j.ID, done); err == nil {
			t.Fatalf("%s: the hook never fired", name)
		}
		// Another process takes over once the lease lapses; until then
		// it does nothing.
		st2, _, d2 := w.process(t)
		before := len(w.fake.Launched())
		if _, err := d2.Review(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := len(w.fake.Launched()); got != before {
			t.Errorf("%s: a second driver launched while the lease held", name)
		}
		w.clk.Set(w.clk.Now().Add(30 * time.Minute))
		j, err := w.run(t, st2, d2, j.ID, done)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := w.check(t, st2, j, name); got > want {
			t.Errorf("%s: %d launches, %d without the kill", name, got, want)
		}
	}
}

func TestOneDriverPerJob(t *testing.T) {
	w := newFakeWorld(t)
	st, svc, d1 := w.process(t)
	_, _, d2 := w.process(t)
	j := w.start(t, svc)
	ctx := context.Background()
	var wg sync.WaitGroup
	for _, d := range []*job.Driver{d1, d2, d1, d2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := d.Review(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := len(w.fake.Launched()); n != 1 {
		t.Errorf("%d launches from two drivers at one moment, want 1", n)
	}
	got, _ := st.GetJob(ctx, j.ID)
	if got.LeaseHolder != d1.Holder() && got.LeaseHolder != d2.Holder() {
		t.Errorf("lease held by %q", got.LeaseHolder)
	}
}

// On a fast clock (sim.speed) the driver waits in wall time a review's
// due time divided by the speed, and its lease outlasts ten wall seconds
// so it cannot lapse between two reviews of a driver that is alive.
func TestDriverPacesItselfOnAFastClock(t *testing.T) {
	w := newFakeWorld(t)
	_, svc, _ := w.process(t)
	for _, c := range []struct {
		speed     float64
		next      time.Duration
		wait      time.Duration
		leaseOver time.Duration
		reaction  time.Duration
	}{
		{1, 30 * time.Second, 30 * time.Second, 3 * time.Minute, 2 * time.Minute},
		{1, time.Hour, time.Minute, 3 * time.Minute, 2 * time.Minute}, // at most Every
		{60, 30 * time.Second, 500 * time.Millisecond, 10 * time.Minute, 2 * time.Minute},
		{7200, time.Minute, 50 * time.Millisecond, 20 * time.Hour, 30 * time.Minute}, // the floor
		{7200, 0, 50 * time.Millisecond, 20 * time.Hour, 30 * time.Minute},
	} {
		d := job.New(svc, []domain.Provider{w.fake}, job.Options{Now: w.clk.Now, Speed: c.speed})
		if got := job.WallWait(d, w.clk.Now().Add(c.next)); got != c.wait {
			t.Errorf("speed %v, next in %v: waits %v, want %v", c.speed, c.next, got, c.wait)
		}
		if got := job.LeaseOf(d); got < c.leaseOver {
			t.Errorf("speed %v: lease %v, want at least %v", c.speed, got, c.leaseOver)
		}
		// A loaded machine's quarter second is half an hour at 7200×.
		if got := job.ReactionOf(d); got != c.reaction {
			t.Errorf("speed %v: reaction %v, want %v", c.speed, got, c.reaction)
		}
	}
}
