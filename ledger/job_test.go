package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

func testJob(hold float64) ledger.Job {
	return ledger.Job{Strategy: "spot+od-planner", State: ledger.JobScheduled,
		Terms: ledger.JobTerms{GPUs: 16, Models: []string{"H100"}, Hours: 48, Start: t0, Deadline: t0.Add(72 * time.Hour),
			Checkpointable: true, Checkpoint: time.Hour, Changeover: 12 * time.Minute},
		Plan: ledger.JobPlan{ExpectedUSD: hold * 0.8, P95USD: hold, OnTimePct: 100}, HoldUSD: hold,
		Live: json.RawMessage(`{"policy":"spot+od-planner"}`)}
}

func TestJobRoundTrip(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	ctx := context.Background()
	in := testJob(3000)
	in.MaxUSD = 2500
	in.Terms.ProgressFile = "/tmp/progress"
	j, err := f.svc.StartJob(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.st.GetJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.JobScheduled || got.Strategy != in.Strategy || got.HoldUSD != 3000 || got.MaxUSD != 2500 ||
		got.Plan != in.Plan || got.Terms.GPUs != 16 || !got.Terms.Deadline.Equal(in.Terms.Deadline) ||
		got.Terms.Checkpoint != time.Hour || got.Terms.ProgressFile != "/tmp/progress" || got.Actor != "tester" ||
		string(got.Live) != string(in.Live) || !got.CreatedAt.Equal(t0) {
		t.Errorf("read back %+v", got)
	}
	if p, err := f.st.GetJob(ctx, j.ID[:8]); err != nil || p.ID != j.ID {
		t.Errorf("by prefix: %v %v", p.ID, err)
	}
	if _, err := f.st.GetJob(ctx, "NOPE0000"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	js, err := f.st.ListJobs(ctx, ledger.JobScheduled, ledger.JobRunning)
	if err != nil || len(js) != 1 {
		t.Fatalf("active jobs: %v %v", js, err)
	}
	if ok, err := f.st.EndJob(ctx, j.ID, ledger.JobCancelled, "cancelled by tester", time.Now()); !ok || err != nil {
		t.Fatalf("end: %v %v", ok, err)
	}
	if ok, _ := f.st.EndJob(ctx, j.ID, ledger.JobDone, "", time.Now()); ok {
		t.Error("an ended job ended again")
	}
	if js, _ := f.st.ListJobs(ctx, ledger.JobScheduled, ledger.JobRunning); len(js) != 0 {
		t.Errorf("a cancelled job is still active: %+v", js)
	}
}

func TestJobLease(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	ctx := context.Background()
	j, err := f.svc.StartJob(ctx, testJob(100))
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{}
	isGone := func(h string) bool { return gone[h] }
	if _, ok, err := f.st.TakeLease(ctx, j.ID, "A", t0, t0.Add(time.Minute), isGone); !ok || err != nil {
		t.Fatalf("A: %v %v", ok, err)
	}
	if cur, ok, _ := f.st.TakeLease(ctx, j.ID, "B", t0.Add(59*time.Second), t0.Add(2*time.Minute), isGone); ok || cur.LeaseHolder != "A" {
		t.Fatalf("B took a lease A holds: %+v", cur)
	}
	// A renews; B still waits.
	if _, ok, _ := f.st.TakeLease(ctx, j.ID, "A", t0.Add(50*time.Second), t0.Add(110*time.Second), isGone); !ok {
		t.Fatal("A could not renew")
	}
	if _, ok, _ := f.st.TakeLease(ctx, j.ID, "B", t0.Add(100*time.Second), t0.Add(3*time.Minute), isGone); ok {
		t.Fatal("B took a renewed lease")
	}
	// Lapsed: B takes it over, and A's writes are fenced off.
	if _, ok, _ := f.st.TakeLease(ctx, j.ID, "B", t0.Add(110*time.Second), t0.Add(3*time.Minute), isGone); !ok {
		t.Fatal("B could not take a lapsed lease over")
	}
	if _, err := f.st.SaveJob(ctx, j, "A"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Errorf("A saved without the lease: %v", err)
	}
	if _, err := f.st.RecordMove(ctx, j.ID, "A", ledger.JobMove{From: "idle", To: "x", Key: j.ID + "-1"}); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Errorf("A moved without the lease: %v", err)
	}
	// B's process is gone: C takes over at once.
	gone["B"] = true
	if _, ok, _ := f.st.TakeLease(ctx, j.ID, "C", t0.Add(111*time.Second), t0.Add(4*time.Minute), isGone); !ok {
		t.Fatal("C could not take over from a gone holder")
	}
}

func TestJobMovesAndLaunches(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	ctx := context.Background()
	j, err := f.svc.StartJob(ctx, testJob(100))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.st.TakeLease(ctx, j.ID, "A", t0, t0.Add(time.Minute), nil); !ok || err != nil {
		t.Fatal(ok, err)
	}
	m, err := f.st.RecordMove(ctx, j.ID, "A", ledger.JobMove{At: t0, From: "idle", To: "aws us-east-1a", Reason: "start", Key: j.ID + "-1"})
	if err != nil || m.Seq != 1 {
		t.Fatalf("move: %+v %v", m, err)
	}
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2, ClientToken: m.Key}
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: 60}, Job: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	// Another fleet, not the job's.
	other := spec
	other.ClientToken = ""
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: other, Estimate: ledger.FleetEstimate{USDHour: 60}, Again: true}); err != nil {
		t.Fatal(err)
	}
	rows, err := f.st.JobRows(ctx, j.ID)
	if err != nil || len(rows) != 1 || rows[0].ID != res.Row.ID {
		t.Fatalf("job rows: %+v %v", rows, err)
	}
	if got := f.st.JobOfRow(ctx, res.Row); got != j.ID {
		t.Errorf("row's job: %q", got)
	}
	if _, err := f.st.RecordMove(ctx, j.ID, "A", ledger.JobMove{From: "aws us-east-1a", To: "idle", Reason: "interrupted"}); err != nil {
		t.Fatal(err)
	}
	ms, err := f.st.JobMoves(ctx, j.ID)
	if err != nil || len(ms) != 2 || ms[0].Key != j.ID+"-1" || ms[1].Reason != "interrupted" || ms[1].Seq != 2 {
		t.Fatalf("moves: %+v %v", ms, err)
	}
	// The same key is never reserved twice.
	if _, err := f.st.RecordMove(ctx, j.ID, "A", ledger.JobMove{To: "x", Key: j.ID + "-1"}); err == nil {
		t.Error("a launch key was reserved twice")
	}
	// The job's rows come in the order of its moves.
	m3, err := f.st.RecordMove(ctx, j.ID, "A", ledger.JobMove{To: "aws", Key: j.ID + "-3"})
	if err != nil {
		t.Fatal(err)
	}
	spec.ClientToken = m3.Key
	third, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: 60}, Job: j.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := f.st.JobRows(ctx, j.ID); err != nil || len(rows) != 2 || rows[0].ID != res.Row.ID || rows[1].ID != third.Row.ID {
		t.Fatalf("job rows in move order: %+v %v", rows, err)
	}
}

func TestJobHoldsCountAgainstEveryPurchase(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 5000, MaxDailyUSD: 5000})
	ctx := context.Background()
	j, err := f.svc.StartJob(ctx, testJob(4000))
	if err != nil {
		t.Fatal(err)
	}
	if spent, _ := f.st.DaySpent(ctx, t0); spent != 4000 {
		t.Errorf("day's spending with the job's hold: %v, want 4000", spent)
	}
	// A second job whose hold would pass the daily cap is refused.
	if _, err := f.svc.StartJob(ctx, testJob(1500)); !errors.Is(err, ledger.ErrBudget) {
		t.Errorf("second job: %v, want a budget refusal", err)
	}
	// A job over the per-purchase cap is refused whatever the day.
	if _, err := f.svc.StartJob(ctx, testJob(5001)); !errors.Is(err, ledger.ErrBudget) {
		t.Errorf("job over max_booking_usd: %v", err)
	}
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	// Another purchase counts the hold.
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: 1500}}); !errors.Is(err, ledger.ErrBudget) {
		t.Errorf("fleet beside the hold: %v, want a budget refusal", err)
	}
	// The job's own launch is covered by its hold.
	if _, ok, _ := f.st.TakeLease(ctx, j.ID, "A", t0, t0.Add(time.Minute), nil); !ok {
		t.Fatal("lease")
	}
	m, err := f.st.RecordMove(ctx, j.ID, "A", ledger.JobMove{To: "aws", Key: j.ID + "-1"})
	if err != nil {
		t.Fatal(err)
	}
	spec.ClientToken = m.Key
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: 1500}, Job: j.ID}); err != nil {
		t.Errorf("the job's own launch: %v", err)
	}
	if spent, _ := f.st.DaySpent(ctx, t0); spent != 4000 {
		t.Errorf("day's spending after the job's launch: %v, want the hold alone (4000)", spent)
	}
	// Once the job ends, what it spent counts, not its hold.
	f.st.EndJob(ctx, j.ID, ledger.JobDone, "", time.Now())
	if spent, _ := f.st.DaySpent(ctx, t0); spent != 0 {
		t.Errorf("day's spending after the job ended having spent nothing recorded: %v", spent)
	}
}

// A job's hold covers the day, not any one purchase: a launch of the job
// dearer than max_booking_usd is refused, naming where the cap is set.
func TestJobLaunchOverThePerPurchaseCapRefused(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 5000, ConfigPath: "/etc/gpumarket.toml"})
	ctx := context.Background()
	j, err := f.svc.StartJob(ctx, testJob(4000))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := f.st.TakeLease(ctx, j.ID, "A", t0, t0.Add(time.Minute), nil); !ok {
		t.Fatal("lease")
	}
	m, err := f.st.RecordMove(ctx, j.ID, "A", ledger.JobMove{To: "aws", Key: j.ID + "-1"})
	if err != nil {
		t.Fatal(err)
	}
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2, ClientToken: m.Key}
	_, err = f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: 5000.01}, Job: j.ID})
	if !errors.Is(err, ledger.ErrBudget) || !strings.Contains(err.Error(), "max_booking_usd is set in /etc/gpumarket.toml") {
		t.Errorf("a job's launch over max_booking_usd: %v", err)
	}
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: 5000}, Job: j.ID}); err != nil {
		t.Errorf("a job's launch at max_booking_usd: %v", err)
	}
}
