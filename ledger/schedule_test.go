package ledger_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// clock is a clock a test moves while loops read it.
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
	c.t = t
}

// waitRow waits for the row to satisfy ok (a loop moves it), failing the
// test after a while with what it last was.
func waitRow(t *testing.T, st *ledger.Store, id, what string, ok func(ledger.Entry) bool) ledger.Entry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := st.Get(context.Background(), id)
		if err == nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the row is %+v (%v)", what, r, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// On the simulated market, with no account: a fleet
// scheduled from Thursday 14:00 for 3 h is recorded "scheduled" before
// anything is launched (the dry run only); the reconcile loop of a
// running gpumarket launches it when its start comes (ClientToken = the
// row id), it runs with its cost so far growing, and the loop deletes it
// when its end comes: scheduled → active → ended. A one-shot command does
// not launch a simulated fleet: it would end with that command.
func TestScheduledFleetKeptByTheLoopOnSim(t *testing.T) {
	c := &clock{t: t0}
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	market := sim.New(sim.Options{Seed: 1, Now: c.Now})
	svc := ledger.New(st, []domain.Provider{market}, ledger.Options{Now: c.Now, Timeout: time.Second, Actor: "organiser"})
	ctx := context.Background()
	start := t0.Add(29 * time.Hour) // Thursday 14:00 UTC
	end := start.Add(3 * time.Hour)
	spec := domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 30, Start: start, End: end}

	dry := spec
	dry.DryRun = true
	if res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: dry}); err != nil || !res.Fleet.DryRun {
		t.Fatalf("dry run: %+v, %v", res.Fleet, err)
	}
	res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	row := res.Row
	if row.State != ledger.StateScheduled || row.ProviderRef != "" || !row.Start.Equal(start) || !row.End.Equal(end) ||
		!strings.Contains(row.Note, "gpumarket starts and deletes it") || row.IdemKey != row.ID {
		t.Fatalf("scheduled row: %+v", row)
	}
	if sched, ok := ledger.ScheduleOf(row); !ok || sched.Keeper != ledger.KeptByGpumarket || !sched.Start.Equal(start) || !sched.End.Equal(end) {
		t.Fatalf("schedule of the row: %+v %v", sched, ok)
	}
	if fig := ledger.FiguresOf(row, end); !fig.Start.IsZero() || fig.SoFar != 0 {
		t.Fatalf("a fleet not launched yet has run: %+v", fig)
	}
	recs, _ := market.ListRecords(ctx, time.Time{})
	if len(recs) != 0 {
		t.Fatalf("launched at scheduling: %+v", recs)
	}

	// Before its start, nothing is due but its start.
	rep, err := svc.Reconcile(ctx)
	if err != nil || !rep.NextDue.Equal(start) {
		t.Fatalf("before the start: next due %v, %v", rep.NextDue, err)
	}
	// A one-shot command at the start leaves it to a running gpumarket.
	c.Set(start)
	rep, err = svc.Reconcile(ctx)
	if err != nil || len(rep.Unsettled) != 1 || !strings.Contains(rep.Unsettled[0].Reason, "running gpumarket") {
		t.Fatalf("one-shot at the start: %+v, %v", rep, err)
	}
	c.Set(start.Add(-time.Minute))

	// A running gpumarket's loop.
	loopCtx, stop := context.WithCancel(ctx)
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		svc.Keep(loopCtx, 2*time.Millisecond)
	}()
	defer func() { stop(); loop.Wait() }()

	time.Sleep(20 * time.Millisecond)
	if r, _ := st.Get(ctx, row.ID); r.State != ledger.StateScheduled {
		t.Fatalf("launched before its start: %+v", r)
	}
	launchAt := start.Add(10 * time.Second)
	c.Set(launchAt)
	active := waitRow(t, st, row.ID, "at its start", func(r ledger.Entry) bool { return r.State == ledger.StateActive })
	if active.ProviderRef == "" || !active.Start.Equal(launchAt) || !active.End.Equal(end) || active.Error != "" {
		t.Fatalf("launched row: %+v", active)
	}
	f, err := market.FindFleet(ctx, "us-east-1", row.ID)
	if err != nil || f == nil || f.ID != active.ProviderRef || f.Instances != 30 {
		t.Fatalf("the market's fleet by the row's client token: %+v, %v", f, err)
	}
	early := ledger.FiguresOf(active, start.Add(time.Hour)).SoFar
	later := ledger.FiguresOf(active, start.Add(2*time.Hour)).SoFar
	if !(early > 0) || !(later > early) || math.Abs(later-2*early) > 0.02*later {
		t.Fatalf("cost so far: $%.2f after 1h, $%.2f after 2h; want it growing with the hours", early, later)
	}
	now := ledger.New(st, []domain.Provider{market}, ledger.Options{Now: c.Now}).FleetsNow(ctx, []ledger.Entry{active})
	if got := now[row.ID]; got.Err != nil || got.Fleet.Instances != 30 || got.Fleet.Target != 30 {
		t.Fatalf("instances running now: %+v", got)
	}

	c.Set(end.Add(5 * time.Second))
	ended := waitRow(t, st, row.ID, "at its end", func(r ledger.Entry) bool { return r.State == ledger.StateEnded })
	if !ended.End.Equal(end.Add(5*time.Second)) || ended.Note != "deleted by gpumarket at its end" {
		t.Fatalf("ended row: %+v", ended)
	}
	if d, err := market.DescribeFleet(ctx, "us-east-1", active.ProviderRef); err != nil || d.Instances != 0 || d.State != "deleted" {
		t.Fatalf("the market's fleet after its end: %+v, %v", d, err)
	}
	atEnd := ledger.FiguresOf(ended, ended.End).SoFar
	dayAfter := ledger.FiguresOf(ended, end.Add(24*time.Hour)).SoFar
	if atEnd != dayAfter {
		t.Fatalf("cost so far went on after the end: $%.2f then $%.2f", atEnd, dayAfter)
	}
}

// scheduledOnFake schedules a fleet on the fixture's fake (a provider
// whose cloud keeps no schedule) from start for 3 h.
func scheduledOnFake(t *testing.T, f *fixture, start time.Time) ledger.Entry {
	t.Helper()
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2,
		Start: start, End: start.Add(3 * time.Hour)}
	res, err := f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec})
	if err != nil || res.Row.State != ledger.StateScheduled {
		t.Fatalf("schedule: %+v, %v", res.Row, err)
	}
	if f.fake.Calls("LaunchFleet") != 0 {
		t.Fatal("a launch was sent at scheduling")
	}
	return res.Row
}

// A lost answer to the loop's launch leaves the row unknown,
// and it is looked up by its client token (the row id), never re-sent.
func TestScheduledLaunchWhoseAnswerIsLostIsLookedUp(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	ctx := context.Background()
	row := scheduledOnFake(t, f, t0.Add(2*time.Hour))
	f.fake.LaunchThenFail = true
	f.fake.LaunchHook = func(context.Context, domain.FleetSpec) error { return context.DeadlineExceeded }
	f.now = t0.Add(2 * time.Hour)
	rep, err := f.svc.Reconcile(ctx)
	if err != nil || len(rep.Unsettled) != 1 || !strings.Contains(rep.Unsettled[0].Reason, "never re-sent") {
		t.Fatalf("the lost launch: %+v, %v", rep, err)
	}
	if r, _ := f.st.Get(ctx, row.ID); r.State != ledger.StateUnknown {
		t.Fatalf("after the lost answer: %+v", r)
	}
	f.fake.LaunchHook = nil
	if _, err := f.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := f.st.Get(ctx, row.ID)
	launched := f.fake.Launched()
	if r.State != ledger.StateActive || r.ProviderRef == "" || f.fake.Calls("LaunchFleet") != 1 || f.fake.Calls("FindFleet") == 0 ||
		len(launched) != 1 || launched[0].ClientToken != row.ID {
		t.Fatalf("after the look-up: %+v; %d launches %+v", r, f.fake.Calls("LaunchFleet"), launched)
	}
}

// When no gpumarket runs at a fleet's end, the next one
// deletes it at once and says how late; a delete that fails leaves it
// active with the reason, and is tried again.
func TestScheduledFleetDeletedLateSaysHowLate(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	ctx := context.Background()
	start := t0.Add(time.Hour)
	row := scheduledOnFake(t, f, start)
	f.now = start.Add(30 * time.Second)
	if _, err := f.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	active, _ := f.st.Get(ctx, row.ID)
	if active.State != ledger.StateActive || active.Note == "" || strings.Contains(active.Note, "after its start") {
		t.Fatalf("launched on time: %+v", active)
	}
	f.now = start.Add(5 * time.Hour) // 2 h after its end, no gpumarket ran
	f.fake.DeleteHook = func(context.Context, string) error { return errors.New("throttled") }
	rep, err := f.svc.Reconcile(ctx)
	if err != nil || len(rep.Unsettled) != 1 {
		t.Fatalf("failed delete: %+v, %v", rep, err)
	}
	r, _ := f.st.Get(ctx, row.ID)
	if r.State != ledger.StateActive || !strings.Contains(r.Error, "still running") || !strings.Contains(r.Error, "throttled") {
		t.Fatalf("after a failed delete: %+v", r)
	}
	f.fake.DeleteHook = nil
	f.now = start.Add(5*time.Hour + time.Minute)
	if _, err := f.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ = f.st.Get(ctx, row.ID)
	if r.State != ledger.StateEnded || !r.End.Equal(f.now) || r.Error != "" || !strings.Contains(r.Note, "2h 1m after its end") {
		t.Fatalf("deleted late: %+v", r)
	}
	if f.fake.Calls("DeleteFleet") != 2 {
		t.Fatalf("%d deletes, want the failed one and the one that went through", f.fake.Calls("DeleteFleet"))
	}
}

// A fleet whose whole window passed while no gpumarket ran was never
// launched: it is failed, saying so, and nothing is sent.
func TestScheduledFleetWholeWindowMissedIsNotLaunched(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	row := scheduledOnFake(t, f, t0.Add(time.Hour))
	f.now = t0.Add(5 * time.Hour)
	if _, err := f.svc.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, _ := f.st.Get(context.Background(), row.ID)
	if r.State != ledger.StateFailed || !strings.Contains(r.Error, "nothing was launched") || f.fake.Calls("LaunchFleet") != 0 {
		t.Fatalf("missed window: %+v, %d launches", r, f.fake.Calls("LaunchFleet"))
	}
}

// A scheduled fleet not launched yet is cancelled with no call, and
// costs nothing; the loop then leaves it alone.
func TestScheduledFleetCancelledBeforeItsStart(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	ctx := context.Background()
	row := scheduledOnFake(t, f, t0.Add(time.Hour))
	d, err := f.svc.DeleteFleet(ctx, row.ID, "carol")
	if err != nil || d.State != ledger.StateDeleted || !strings.Contains(d.Note, "cancelled by carol") {
		t.Fatalf("cancel: %+v, %v", d, err)
	}
	f.now = t0.Add(2 * time.Hour)
	if _, err := f.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if f.fake.Calls("LaunchFleet")+f.fake.Calls("DeleteFleet") != 0 {
		t.Fatal("a call for a cancelled schedule")
	}
	if fig := ledger.FiguresOf(d, f.now); !fig.Start.IsZero() || fig.SoFar != 0 || fig.Final != 0 {
		t.Fatalf("a cancelled schedule has run: %+v", fig)
	}
}

// A schedule no fleet can keep is refused before any row or call.
func TestFleetScheduleRefusedBeforeAnyRow(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	for name, c := range map[string]struct {
		start, end time.Time
		want       string
	}{
		"end before start": {t0.Add(2 * time.Hour), t0.Add(time.Hour), "after the start"},
		"end in the past":  {time.Time{}, t0.Add(-time.Hour), "after the start"},
		"too short":        {t0.Add(time.Hour), t0.Add(time.Hour + time.Minute), "at least 5m"},
		"too far ahead":    {t0.Add(91 * 24 * time.Hour), time.Time{}, "at most 90 days ahead"},
		"too long":         {t0.Add(time.Hour), t0.Add(time.Hour + 91*24*time.Hour), "at most 90 days"},
	} {
		spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2, Start: c.start, End: c.end}
		if _, err := f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	noRows(t, f.st)
	if f.fake.Calls("LaunchFleet")+f.fake.Calls("LaunchFleetDryRun") != 0 {
		t.Fatal("a call for a refused schedule")
	}
}

// Who keeps a schedule is the descriptor's to say, and the note tells the
// user what that asks of them.
func TestKeeperOfSaysWhoStartsAndStops(t *testing.T) {
	aws := domain.Descriptor{Name: "aws", Cloud: domain.CloudAWS, CloudTitle: "AWS", SchedulesFleets: true}
	if ledger.KeeperOf(aws) != ledger.KeptByCloud || ledger.KeeperNote(aws) != "AWS starts and ends it at the cloud; it ends on time even if gpumarket is not running (a fleet given no end runs until deleted)" {
		t.Errorf("AWS: %s, %q", ledger.KeeperOf(aws), ledger.KeeperNote(aws))
	}
	azure := domain.Descriptor{Name: "azure", Cloud: domain.CloudAzure}
	if ledger.KeeperOf(azure) != ledger.KeptByGpumarket || !strings.Contains(ledger.KeeperNote(azure), "a gpumarket TUI or `serve` must be running at those times (or run `gpumarket ledger`)") {
		t.Errorf("Azure: %s, %q", ledger.KeeperOf(azure), ledger.KeeperNote(azure))
	}
	// A market in gpumarket's memory keeps nothing when gpumarket stops,
	// whatever it honours.
	simd := domain.Descriptor{Name: "sim", Ephemeral: true, SchedulesFleets: true}
	if ledger.KeeperOf(simd) != ledger.KeptByGpumarket || !strings.Contains(ledger.KeeperNote(simd), "must be running") {
		t.Errorf("sim: %s, %q", ledger.KeeperOf(simd), ledger.KeeperNote(simd))
	}
}

func TestWindowTextSaysLocalAndUTC(t *testing.T) {
	est := time.FixedZone("EST", -5*3600)
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, est)
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, est)
	for _, c := range []struct {
		start, end time.Time
		want       string
	}{
		{start, start.Add(3 * time.Hour), "Thu 11-26 14:00 EST – 17:00 EST (19:00–22:00 UTC), 3h"},
		{start, start.Add(12 * time.Hour), "Thu 11-26 14:00 EST – Fri 11-27 02:00 EST (Thu 19:00 – Fri 07:00 UTC), 12h"},
		{time.Time{}, now.Add(90 * time.Minute), "now – Tue 11-24 10:30 EST (14:00–15:30 UTC), 1h 30m"},
		{start, time.Time{}, "from Thu 11-26 14:00 EST (19:00 UTC) until deleted"},
	} {
		if got := ledger.WindowText(c.start, c.end, now); got != c.want {
			t.Errorf("WindowText(%v, %v) = %q, want %q", c.start, c.end, got, c.want)
		}
	}
}

// The loop ticks every minute, but a schedule due before the
// next tick is sent at its time: Keep wakes for it.
func TestKeepWakesWhenAScheduleIsDue(t *testing.T) {
	c := &clock{t: t0}
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	svc := ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: c.Now, Timeout: time.Second})
	start := t0.Add(time.Second)
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2,
		Start: start, End: start.Add(time.Hour)}
	res, err := svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec})
	if err != nil || res.Row.State != ledger.StateScheduled {
		t.Fatalf("schedule: %+v, %v", res.Row, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.Keep(ctx, time.Hour)
	}()
	defer func() { stop(); <-done }()
	time.Sleep(100 * time.Millisecond) // its first pass: not due yet
	if r, _ := f.st.Get(ctx, res.Row.ID); r.State != ledger.StateScheduled {
		t.Fatalf("launched before its start: %+v", r)
	}
	c.Set(start)
	waitRow(t, f.st, res.Row.ID, "an hour's tick, but the start came", func(r ledger.Entry) bool { return r.State == ledger.StateActive })
}
