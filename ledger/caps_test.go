package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// p5Fleet is n p5.48xlarge on the fake, from start (zero: now) for
// length (zero: until deleted).
func p5Fleet(n int, start time.Time, length time.Duration) domain.FleetSpec {
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: n, Start: start}
	if length > 0 {
		from := start
		if from.IsZero() {
			from = t0
		}
		spec.End = from.Add(length)
	}
	return spec
}

// TestCapsHoldTheWholeCommitment: a fleet with an end is held against
// max_booking_usd at its estimate over its whole window, one with no end
// at its first 24 hours; the refusal names the cap, the figure, the key
// and the config file.
func TestCapsHoldTheWholeCommitment(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 5000, MaxDailyUSD: 20000, ConfigPath: "/home/alice/.config/gpumarket/config.yaml"})
	f.fake.SpotUSDHour = 10 // $10 per instance-hour

	// 3 hours of 2 instances: $60, under every cap, committed as such.
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(2, time.Time{}, 3*time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := ledger.FiguresOf(res.Row, t0).Committed; got != 60 {
		t.Errorf("a 3-hour fleet at $20/h commits $%v, want $60", got)
	}

	// 90 days of the same: $43,200, over the $5,000 per purchase.
	_, err = f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(2, time.Time{}, 90*24*time.Hour), Again: true})
	var be *ledger.BudgetError
	if !errors.As(err, &be) || be.Cap != "max_booking_usd" || be.CostUSD != 43200 {
		t.Fatalf("a 90-day fleet: %v, want refused by max_booking_usd at $43200", err)
	}
	for _, want := range []string{"$43200.00", "budget.max_booking_usd", "$5000.00", "/home/alice/.config/gpumarket/config.yaml", "90d at $20.00/h"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	// No end: its first day, 24 × $220/h = $5,280 > $5,000 (its first
	// hour, $220, would pass).
	_, err = f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(22, time.Time{}, 0)})
	if !errors.As(err, &be) || be.Cap != "max_booking_usd" || be.CostUSD != 24*220 {
		t.Fatalf("a fleet with no end: %v, want refused at its first 24 hours, $5280", err)
	}
	// Exactly at the cap passes: 25 hours of 20 instances at $10 is $5,000.
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(20, time.Time{}, 25*time.Hour)}); err != nil {
		t.Fatalf("$5000 exactly, at the cap: %v", err)
	}
	if n := f.fake.Calls("LaunchFleet"); n != 2 {
		t.Fatalf("%d launches, want the two under the caps", n)
	}
}

// TestFleetsAtOnceCannotPassACapTogether: two 3-hour fleets launched at
// once under a daily cap that admits one: the check and the intent row
// are one step, so exactly one launches. They differ in strategy: the
// same fleet twice at once would be refused as in flight instead.
func TestFleetsAtOnceCannotPassACapTogether(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 90})
	f.fake.SpotUSDHour = 10
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			spec := p5Fleet(3, time.Time{}, 3*time.Hour)
			spec.Strategy = domain.Strategies[i]
			_, errs[i] = f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec, Again: true})
		})
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ledger.ErrBudget):
			refused++
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	if ok != 1 || refused != 1 || f.fake.Calls("LaunchFleet") != 1 {
		t.Fatalf("%d launched, %d refused, %d calls: want one of each and one call ($90 each under a $90 day)", ok, refused, f.fake.Calls("LaunchFleet"))
	}
}

// TestScheduledFleetsHoldTheDaysTheyRun: five fleets scheduled from
// tomorrow for 90 days at $300/h ($7,200 a day) under a $20,000 day:
// two fit the days they run, the third is refused naming that day; and
// they hold nothing today, whose purchases go on.
func TestScheduledFleetsHoldTheDaysTheyRun(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 20000})
	f.fake.SpotUSDHour = 10
	start := t0.Add(24 * time.Hour)
	var accepted int
	var last error
	for range 5 {
		_, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(30, start, 90*24*time.Hour), Again: true})
		if err == nil {
			accepted++
		} else {
			last = err
		}
	}
	var be *ledger.BudgetError
	if accepted != 2 || !errors.As(last, &be) || be.Cap != "max_daily_usd" || !be.Day.After(t0) || be.Today {
		t.Fatalf("%d of 5 scheduled; last %v: want 2, then refused on a day they run", accepted, last)
	}
	if !strings.Contains(last.Error(), be.Day.Format("2006-01-02")) {
		t.Errorf("the refusal does not name the day: %v", last)
	}
	// Today holds none of them: a 3-hour fleet of $19,800 fits today.
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(660, time.Time{}, 3*time.Hour)}); err != nil {
		t.Fatalf("today's launch under the schedules of other days: %v", err)
	}
}

// TestScheduledFleetCheckedAgainAtItsStart: a scheduled fleet is checked
// again when it starts, against that day's spending under the caps then
// in force: over them, it is not launched and its row says why.
func TestScheduledFleetCheckedAgainAtItsStart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 1000})
	f.fake.SpotUSDHour = 10
	start := t0.Add(2 * time.Hour)
	sched, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(2, start, 3*time.Hour)}) // $60
	if err != nil || sched.Row.State != ledger.StateScheduled {
		t.Fatalf("schedule: %+v, %v", sched.Row, err)
	}
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(30, time.Time{}, 3*time.Hour)}); err != nil { // $900
		t.Fatal(err)
	}
	// The cap is lowered before its start (the config changed): $960
	// held that day, over $950.
	lower := ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Budget: ledger.Budget{MaxDailyUSD: 950},
		Now: func() time.Time { return f.now }, Timeout: time.Second})
	f.now = start
	if _, err := lower.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := f.st.Get(ctx, sched.Row.ID)
	if r.State != ledger.StateFailed || !strings.Contains(r.Error, "not launched at its start") || !strings.Contains(r.Error, "budget.max_daily_usd") {
		t.Fatalf("at its start over the cap: %+v", r)
	}
	if n := f.fake.Calls("LaunchFleet"); n != 1 {
		t.Fatalf("%d launches, want only the fleet launched at once", n)
	}

	// Under the cap at its start, it launches.
	g := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 1000})
	g.fake.SpotUSDHour = 10
	s2, err := g.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: p5Fleet(2, start, 3*time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	g.now = start
	if _, err := g.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := g.st.Get(ctx, s2.Row.ID); r.State != ledger.StateActive {
		t.Fatalf("under the cap at its start: %+v", r)
	}
}

// TestSameFleetTwiceRefused: the same fleet as one scheduled (or
// running) over the same time is refused, naming its row, unless asked
// for again; another window is another fleet.
func TestSameFleetTwiceRefused(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	start := t0.Add(24 * time.Hour)
	first := scheduledOnFake(t, f, start)
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2,
		Start: start.Add(time.Minute), End: start.Add(3 * time.Hour)} // "+1d" read a minute later
	_, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err == nil || !strings.Contains(err.Error(), first.ID) || !strings.Contains(err.Error(), "--again") {
		t.Fatalf("the same scheduled fleet twice: %v, want refused naming %s", err, first.ID)
	}
	// Its dry run says so before anyone confirms, with the cloud's answer.
	dry := spec
	dry.DryRun = true
	if res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: dry}); err == nil || !strings.Contains(err.Error(), first.ID) || !res.Fleet.DryRun {
		t.Fatalf("the dry run of the same fleet: %+v, %v", res.Fleet, err)
	}
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Again: true}); err != nil {
		t.Fatalf("asked for again: %v", err)
	}
	later := spec
	later.Start, later.End = start.Add(4*time.Hour), start.Add(6*time.Hour)
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: later}); err != nil {
		t.Fatalf("the same fleet at another time: %v", err)
	}
	// Running now: the same again is refused too.
	now := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 4}
	running, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: now}); err == nil || !strings.Contains(err.Error(), running.Row.ID) {
		t.Fatalf("the same running fleet twice: %v", err)
	}
}
