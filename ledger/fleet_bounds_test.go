package ledger_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// TestFleetCountsBounded: `fleet launch --target 4294967298`
// was sent as TotalTargetCapacity 2 (the int32 wrapped) and recorded as
// 4294967298 instances. The service refuses any count over what a cloud
// launches in one fleet, before any call or row.
func TestFleetCountsBounded(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 1
	for _, n := range []int{4294967298, domain.MaxInstances + 1, -1} {
		spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: n}
		_, err := f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec})
		if err == nil || !strings.Contains(err.Error(), "10000") {
			t.Errorf("target %d: %v, want a refusal naming the limit", n, err)
		}
	}
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: domain.MaxInstances}
	if err := ledger.CheckFleet(spec); err != nil {
		t.Errorf("the limit itself: %v", err)
	}
	if f.fake.Calls("LaunchFleet")+f.fake.Calls("LaunchFleetDryRun")+f.fake.Calls("Fetch") != 0 {
		t.Fatal("a call was made for a count out of bounds")
	}
	noRows(t, f.st)
	_, err := f.svc.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 4294967298, Duration: 48 * time.Hour})
	if !errors.Is(err, domain.ErrInvalidQuery) || f.fake.Calls("FindOfferings") != 0 {
		t.Fatalf("search for 4294967298 instances: %v", err)
	}
}

// TestFleetDatesAndDeleteNote: the ledger showed no start,
// end, running time or cost so far for fleets, and an ordinary delete
// was written to the error column. A fleet is dated when it becomes
// active and when it is deleted; who deleted it is a note.
func TestFleetDatesAndDeleteNote(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	ctx := context.Background()
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Row.Start.Equal(t0) || !res.Row.End.IsZero() {
		t.Fatalf("launched fleet dated %v–%v, want from %v", res.Row.Start, res.Row.End, t0)
	}
	f.now = t0.Add(90 * time.Minute)
	if fig := ledger.FiguresOf(res.Row, f.now); !fig.Start.Equal(t0) || math.Abs(fig.SoFar-res.Row.USDHour*1.5) > 1e-9 || !math.IsNaN(fig.Final) {
		t.Fatalf("running from %v for $%v (final %v), want from %v at $%v/h for 1h30m", fig.Start, fig.SoFar, fig.Final, t0, res.Row.USDHour)
	}
	f.now = t0.Add(2 * time.Hour)
	d, err := f.svc.DeleteFleet(ctx, res.Row.ProviderRef, "carol@host")
	if err != nil {
		t.Fatal(err)
	}
	if d.Error != "" || d.Note != "deleted by carol@host" || !d.End.Equal(t0.Add(2*time.Hour)) || !d.Start.Equal(t0) {
		t.Fatalf("deleted row: error %q note %q dated %v–%v", d.Error, d.Note, d.Start, d.End)
	}
	// Ended, it costs no more however late it is read.
	if fig := ledger.FiguresOf(d, t0.Add(48*time.Hour)); fig.End.Sub(fig.Start) != 2*time.Hour || math.Abs(fig.SoFar-2*d.USDHour) > 1e-9 || fig.Final != fig.SoFar {
		t.Fatalf("ended fleet ran %v–%v for $%v (final %v)", fig.Start, fig.End, fig.SoFar, fig.Final)
	}
}

// TestSimFleetEndsWithItsProcess: a simulated fleet
// launched from the CLI lives in the memory of that process; once it
// ended, the ledger showed the fleet "active" for ever and it could not
// be deleted. While the launching process (store handle) lives the row
// stays active; once it is gone, the next reconciliation ends it with a
// note, not an error.
func TestSimFleetEndsWithItsProcess(t *testing.T) {
	dir := t.TempDir()
	launcher, err := ledger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	clock := func() time.Time { return now }
	svcA := ledger.New(launcher, []domain.Provider{sim.New(sim.Options{Seed: 1, Now: clock})}, ledger.Options{Now: clock, Timeout: time.Second})
	ctx := context.Background()
	spec := domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	res, err := svcA.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}

	other, err := ledger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	svcB := ledger.New(other, []domain.Provider{sim.New(sim.Options{Seed: 1, Now: clock})}, ledger.Options{Now: clock, Timeout: time.Second})
	if _, err := svcB.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := other.Get(ctx, res.Row.ID); r.State != ledger.StateActive {
		t.Fatalf("a fleet whose process still runs was moved to %s", r.State)
	}
	// Its own process keeps it too.
	if _, err := svcA.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	launcher.Close() // the CLI command ends
	now = t0.Add(time.Hour)
	rep, err := svcB.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := other.Get(ctx, res.Row.ID)
	if r.State != ledger.StateEnded || r.Error != "" || !strings.Contains(r.Note, "ended with the process") || !r.End.Equal(now) || len(rep.Settled) != 1 {
		t.Fatalf("row after its process ended: %+v (report %+v)", r, rep)
	}
	// And it can be deleted (nothing is left to delete; it says so).
	d, err := svcB.DeleteFleet(ctx, r.ID, "dave")
	if err != nil || d.State != ledger.StateDeleted || d.Error != "" {
		t.Fatalf("delete: %+v, %v", d, err)
	}
}

// TestFleetPricesReadAgainBeforeLaunch: with a budget cap, the estimate
// shown (minutes ago, before the confirmation) is checked again at the
// prices in force: dearer is refused with the new estimate to confirm;
// cheaper launches, and the ledger and the cap use the fresh figure.
func TestFleetPricesReadAgainBeforeLaunch(t *testing.T) {
	ctx := context.Background()
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	f := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 1000})
	f.fake.SpotUSDHour = 10
	shown := f.svc.EstimateFleet(ctx, spec)
	f.fake.SpotUSDHour = 11
	_, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: shown})
	var ec *ledger.EstimateChangedError
	if !errors.As(err, &ec) || ec.Now.USDHour != 22 || ec.Shown.USDHour != 20 || f.fake.Calls("LaunchFleet") != 0 {
		t.Fatalf("dearer since shown: %v", err)
	}
	noRows(t, f.st)
	f.fake.SpotUSDHour = 9
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ec.Now})
	if err != nil || res.Row.USDHour != 18 || res.Estimate.USDHour != 18 {
		t.Fatalf("cheaper since shown: %v, row cost %v", err, res.Row.USDHour)
	}
	// No cap: the estimate shown is not fetched again.
	g := newFixture(t, "", "aws", ledger.Budget{})
	g.fake.SpotUSDHour = 10
	shown = g.svc.EstimateFleet(ctx, spec)
	fetches := g.fake.Calls("Fetch")
	if _, err := g.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: shown}); err != nil || g.fake.Calls("Fetch") != fetches {
		t.Fatalf("uncapped launch: %v, %d fetches", err, g.fake.Calls("Fetch")-fetches)
	}
}

// TestReadOnlyLedgerSpendsNothing: on a ledger opened read-only nothing
// can be recorded before the call, so nothing is bought or launched (a
// dry run still answers), and reconciling says it cannot.
func TestReadOnlyLedgerSpendsNothing(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	f.search(t)
	ro, err := ledger.OpenReadOnly(f.st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	svc := ledger.New(ro, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second})
	ctx := context.Background()
	if _, err := svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); !errors.Is(err, ledger.ErrReadOnly) {
		t.Fatalf("book on a read-only ledger: %v", err)
	}
	if f.fake.Calls("RefreshOffering")+f.fake.Calls("ListRecords") != 0 {
		t.Fatal("the provider was asked about a purchase that could not be recorded")
	}
	if _, err := svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", DryRun: true}); err != nil || f.fake.Calls("BookDryRun") != 1 {
		t.Fatalf("dry run on a read-only ledger: %v", err)
	}
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 1}
	if _, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec}); !errors.Is(err, ledger.ErrReadOnly) {
		t.Fatalf("launch on a read-only ledger: %v", err)
	}
	if _, err := svc.Reconcile(ctx); !errors.Is(err, ledger.ErrReadOnly) {
		t.Fatalf("reconcile on a read-only ledger: %v", err)
	}
	if f.fake.Calls("Book")+f.fake.Calls("LaunchFleet")+f.fake.Calls("ListRecords") != 0 {
		t.Fatal("the provider was called for a purchase that could not be recorded")
	}
}
