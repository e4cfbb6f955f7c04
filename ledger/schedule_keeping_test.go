package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// scheduleOnFake schedules a fleet on the fixture's fake from start, for
// length (0: no end, as `fleet launch --start` without `--for`).
func scheduleOnFake(t *testing.T, f *fixture, start time.Time, length time.Duration) ledger.Entry {
	t.Helper()
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2, Start: start}
	if length > 0 {
		spec.End = start.Add(length)
	}
	// Several on the same terms are meant: each asked for again.
	res, err := f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec, Again: true})
	if err != nil {
		t.Fatalf("schedule: %+v, %v", res.Row, err)
	}
	return res.Row
}

func reconcileAt(t *testing.T, f *fixture, now time.Time) ledger.ReconcileReport {
	t.Helper()
	f.now = now
	rep, err := f.svc.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func rowNow(t *testing.T, f *fixture, id string) ledger.Entry {
	t.Helper()
	r, err := f.st.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A fleet given a start and no end is launched at its start and runs
// until deleted: no later reconcile deletes it, none says it is due.
func TestScheduledFleetWithNoEndRunsOn(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	start := t0.Add(time.Hour)
	row := scheduleOnFake(t, f, start, 0)
	reconcileAt(t, f, start.Add(30*time.Second))
	if r := rowNow(t, f, row.ID); r.State != ledger.StateActive {
		t.Fatalf("at its start: %+v", r)
	}
	for _, later := range []time.Duration{time.Hour, 30 * time.Hour} {
		reconcileAt(t, f, start.Add(later))
		r := rowNow(t, f, row.ID)
		if r.State != ledger.StateActive || f.fake.Calls("DeleteFleet") != 0 {
			t.Fatalf("%v after its start: %+v, %d deletes; want it running until deleted", later, r, f.fake.Calls("DeleteFleet"))
		}
		if ledger.ScheduleDue(r, f.now) {
			t.Errorf("%v after its start: a fleet with no end is said to be due", later)
		}
	}
}

// A fleet due at its start is said to be due from then; one running with
// an end, from its end.
func TestScheduleDueFromItsDates(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	start := t0.Add(time.Hour)
	row := scheduleOnFake(t, f, start, 3*time.Hour)
	if ledger.ScheduleDue(row, start.Add(-time.Second)) || !ledger.ScheduleDue(row, start) {
		t.Error("a scheduled row is due at its start, not before")
	}
	reconcileAt(t, f, start)
	r := rowNow(t, f, row.ID)
	if ledger.ScheduleDue(r, start.Add(3*time.Hour-time.Second)) || !ledger.ScheduleDue(r, start.Add(3*time.Hour)) {
		t.Error("a running row is due at its end, not before")
	}
}

// Launched by a gpumarket that came up minutes after the start, the row
// says how late; at a minute late (the loop's tick) it says nothing.
func TestScheduledLaunchMinutesLateSaysSo(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	start := t0.Add(time.Hour)
	row := scheduleOnFake(t, f, start, 3*time.Hour)
	reconcileAt(t, f, start.Add(5*time.Minute))
	if r := rowNow(t, f, row.ID); r.State != ledger.StateActive || !strings.Contains(r.Note, "launched by gpumarket 5m after its start") {
		t.Errorf("launched 5 minutes late: %+v", r)
	}
	onTime := scheduleOnFake(t, f, start.Add(time.Hour), 3*time.Hour)
	reconcileAt(t, f, start.Add(time.Hour+time.Minute))
	if r := rowNow(t, f, onTime.ID); r.State != ledger.StateActive || strings.Contains(r.Note, "after its start") {
		t.Errorf("launched a minute after its start: %+v", r)
	}
}

// Deleted minutes after its end (no gpumarket ran then), the row says how
// late and that it billed until then.
func TestScheduledDeleteMinutesLateSaysSo(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	start := t0.Add(time.Hour)
	row := scheduleOnFake(t, f, start, 3*time.Hour)
	reconcileAt(t, f, start)
	reconcileAt(t, f, start.Add(3*time.Hour+5*time.Minute))
	r := rowNow(t, f, row.ID)
	if r.State != ledger.StateEnded || !strings.Contains(r.Note, "5m after its end") || !strings.Contains(r.Note, "billed until now") {
		t.Errorf("deleted 5 minutes late: %+v", r)
	}
}

// A delete at a fleet's end that times out may still go through or not:
// the fleet may bill, so the row stays active with the reason, on a real
// cloud and on the simulated market alike.
func TestTimedOutDeleteAtTheEndIsNotAnEnd(t *testing.T) {
	for _, simulated := range []bool{false, true} {
		f := newFixture(t, "", "aws", ledger.Budget{})
		f.fake.SpotUSDHour = 10
		start := t0.Add(time.Hour)
		row := scheduleOnFake(t, f, start, 3*time.Hour)
		reconcileAt(t, f, start)
		if r := rowNow(t, f, row.ID); r.State != ledger.StateActive {
			t.Fatalf("simulated %v: not launched: %+v", simulated, r)
		}
		// A simulated market's fleet launches only in a running
		// gpumarket; the delete is what is tried here.
		f.fake.Desc.Ephemeral = simulated
		f.fake.DeleteHook = func(ctx context.Context, _ string) error { <-ctx.Done(); return ctx.Err() }
		reconcileAt(t, f, start.Add(3*time.Hour))
		r := rowNow(t, f, row.ID)
		if r.State != ledger.StateActive || !strings.Contains(r.Error, "still running") {
			t.Errorf("simulated %v: after a delete that timed out: %+v; want it active, still billing, with the reason", simulated, r)
		}
	}
}

// A scheduled row that already names a fleet (a launch recorded by
// another process) is never launched again at its start.
func TestScheduledRowWithAFleetIsNotLaunchedAgain(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	start := t0.Add(time.Hour)
	row := scheduleOnFake(t, f, start, 3*time.Hour)
	row.ProviderRef = "fleet-elsewhere"
	if _, err := f.st.UpdateFrom(context.Background(), row, ledger.StateScheduled); err != nil {
		t.Fatal(err)
	}
	reconcileAt(t, f, start.Add(time.Minute))
	if n := f.fake.Calls("LaunchFleet"); n != 0 {
		t.Errorf("%d launches for a scheduled row that names a fleet, want none", n)
	}
}

// An ended fleet never starts after it ends: a row whose start another
// host's clock put after this one's now is ended with its start at the
// end, not a negative run.
func TestEndedFleetStartsNoLaterThanItEnds(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	start := t0.Add(time.Hour)
	row := scheduleOnFake(t, f, start, 3*time.Hour)
	reconcileAt(t, f, start)
	r := rowNow(t, f, row.ID)
	r.Start = start.Add(4 * time.Hour) // as a clock ahead of this one said
	if _, err := f.st.UpdateFrom(context.Background(), r, ledger.StateActive); err != nil {
		t.Fatal(err)
	}
	reconcileAt(t, f, start.Add(3*time.Hour+time.Minute))
	ended := rowNow(t, f, row.ID)
	if ended.State != ledger.StateEnded || ended.Start.After(ended.End) {
		t.Errorf("ended row runs from %v to %v (%s); want its start no later than its end", ended.Start, ended.End, ended.State)
	}
}

// The bill of a fleet window counts from its start, or from now once the
// start has passed.
func TestBillingCountsTheWindow(t *testing.T) {
	e := ledger.FleetEstimate{USDHour: 10}
	now := t0
	future := domain.FleetSpec{Start: now.Add(2 * time.Hour), End: now.Add(5 * time.Hour)}
	if got := e.Billing(future, now); !strings.Contains(got, "about $30.00 for its 3h") {
		t.Errorf("a window from +2h to +5h: %q, want $30.00 for 3h", got)
	}
	begun := domain.FleetSpec{Start: now.Add(-time.Hour), End: now.Add(2 * time.Hour)}
	if got := e.Billing(begun, now); !strings.Contains(got, "about $20.00 for its 2h") {
		t.Errorf("a window begun an hour ago, ending in 2h: %q, want $20.00 for 2h", got)
	}
}

// A schedule the cloud keeps is asked about once its date has passed,
// not before (the end of a running fleet here); one running with no end
// is never asked about.
func TestCloudKeptFleetAskedOnlyOnceADatePassed(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	f.fake.Desc.SchedulesFleets = true
	start := t0.Add(2 * time.Hour)
	end := start.Add(3 * time.Hour)
	row := scheduleOnFake(t, f, start, 3*time.Hour)
	if row.ProviderRef == "" || row.State != ledger.StateActive || ledger.KeeperOf(f.fake.Describe()) != ledger.KeptByCloud {
		t.Fatalf("a fleet the cloud keeps, sent at once: %+v", row)
	}
	noEnd := scheduleOnFake(t, f, start, 0)
	asked := f.fake.Calls("DescribeFleet")
	rep := reconcileAt(t, f, end.Add(-30*time.Minute))
	if n := f.fake.Calls("DescribeFleet") - asked; n != 0 || !rep.NextDue.Equal(end) {
		t.Errorf("half an hour before its end: %d questions to the cloud, next due %v; want none, and %v", n, rep.NextDue, end)
	}
	rep = reconcileAt(t, f, end.Add(48*time.Hour))
	if f.fake.Calls("DescribeFleet") == asked {
		t.Error("the cloud was not asked how a fleet went once its end passed")
	}
	for _, u := range rep.Unsettled {
		if u.Row.ID == noEnd.ID {
			t.Errorf("a running fleet with no end, kept by the cloud, was asked about: %+v", u)
		}
	}
}
