package aws

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// On the local EC2 endpoint: a fleet launched
// through the ledger with a start T and 3 h sends, after its dry run, one
// CreateFleet whose ValidFrom and ValidUntil are T and T+3h and that
// terminates its instances at expiry; its row is scheduled, then active
// once the fake's clock passes T (the reconcile loop asks AWS), then ended
// after T+3h — at T+3h, AWS having ended it whether or not gpumarket ran —
// with its cost so far growing in between and not after.
func TestScheduledFleetThroughTheLedger(t *testing.T) {
	clock := &testClock{t: testNow}
	f := newFixture(t, "us-east-1")
	f.fake.Now = clock.Now
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1"; o.Now = clock.Now })
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := ledger.New(st, []domain.Provider{p}, ledger.Options{Now: clock.Now, Timeout: 10 * time.Second, Actor: "organiser"})
	ctx := context.Background()
	start := testNow.Add(26 * time.Hour)
	end := start.Add(3 * time.Hour)
	spec := domain.FleetSpec{Provider: Name, Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 3, Start: start, End: end}

	if lines := svc.ScheduleLines(spec, clock.Now()); len(lines) != 2 || !strings.Contains(lines[1], "AWS starts and ends it at the cloud; it ends on time even if gpumarket is not running") {
		t.Fatalf("confirmation lines %q", lines)
	}
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
	var sent []ec2test.Call
	for _, c := range f.fake.Calls() {
		if c.Action == "CreateFleet" {
			sent = append(sent, c)
		}
	}
	if len(sent) != 2 || sent[0].Params.Get("DryRun") != "true" || sent[1].Params.Get("DryRun") == "true" {
		t.Fatalf("%d CreateFleet calls, want the dry run first, then one launch", len(sent))
	}
	q := sent[1].Params
	if q.Get("ValidFrom") != start.Format(time.RFC3339) || q.Get("ValidUntil") != end.Format(time.RFC3339) ||
		q.Get("TerminateInstancesWithExpiration") != "true" || q.Get("Type") != "request" || q.Get("ClientToken") != row.ID {
		t.Fatalf("CreateFleet ValidFrom %q ValidUntil %q TerminateInstancesWithExpiration %q Type %q ClientToken %q",
			q.Get("ValidFrom"), q.Get("ValidUntil"), q.Get("TerminateInstancesWithExpiration"), q.Get("Type"), q.Get("ClientToken"))
	}
	if row.State != ledger.StateScheduled || row.ProviderRef == "" || !row.Start.Equal(start) || !row.End.Equal(end) ||
		!strings.Contains(row.Note, "AWS starts and ends it") {
		t.Fatalf("scheduled row: %+v", row)
	}
	if sched, ok := ledger.ScheduleOf(row); !ok || sched.Keeper != ledger.KeptByCloud {
		t.Fatalf("schedule %+v %v", sched, ok)
	}
	if ledger.CostUnknown(row) || !(row.USDHour > 0) || math.Abs(ledger.FiguresOf(row, start).Committed-3*row.USDHour) > 1e-9 {
		t.Fatalf("no estimate to grow a cost so far from: %+v", row)
	}

	reconcile := func(at time.Time) ledger.Entry {
		t.Helper()
		clock.Set(at)
		if _, err := svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := st.Get(ctx, row.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := reconcile(start.Add(-time.Second)); r.State != ledger.StateScheduled {
		t.Fatalf("before T: %+v", r)
	}
	r := reconcile(start.Add(time.Minute))
	if r.State != ledger.StateActive || !r.Start.Equal(start) {
		t.Fatalf("after T: %+v", r)
	}
	now := svc.FleetsNow(ctx, []ledger.Entry{r})[row.ID]
	if now.Err != nil || now.Fleet.Instances != 3 || now.Fleet.Target != 3 {
		t.Fatalf("running now: %+v", now)
	}
	var last float64
	for _, h := range []float64{0.5, 1, 2, 2.9} {
		cost := ledger.FiguresOf(r, start.Add(time.Duration(h*float64(time.Hour)))).SoFar
		if !(cost > last) {
			t.Fatalf("cost so far at T+%gh: $%v, not more than $%v", h, cost, last)
		}
		last = cost
	}
	// Ended by AWS at T+3h; the ledger, read an hour later, says so.
	r = reconcile(end.Add(time.Hour))
	if r.State != ledger.StateEnded || !r.End.Equal(end) {
		t.Fatalf("after T+3h: %+v", r)
	}
	fig := ledger.FiguresOf(r, end.Add(24*time.Hour))
	if ran := fig.End.Sub(fig.Start); ran != 3*time.Hour || math.Abs(fig.Final-3*r.USDHour) > 1e-9 {
		t.Fatalf("ended: ran %v for $%v; want 3h at $%v/h", ran, fig.Final, r.USDHour)
	}
	if rec := f.fake.Fleets()[0]; !rec.TerminateAtEnd || !rec.ValidUntil.Equal(end) {
		t.Fatalf("fleet at the fake: %+v", rec)
	}
	if n := f.fake.Count("DeleteFleets", ""); n != 0 {
		t.Fatalf("%d DeleteFleets calls: AWS ends it, gpumarket does not", n)
	}
}
