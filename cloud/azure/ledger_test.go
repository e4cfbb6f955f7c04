package azure

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// A reservation books through the ledger (intent, then the PUTs, then the
// outcome) and, since Azure bills it until it is deleted, the ledger
// deletes it when its window ends.
func TestReservationThroughTheLedger(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := testNow
	svc := ledger.New(st, []domain.Provider{p}, ledger.Options{Now: func() time.Time { return now }, Timeout: 10 * time.Second, Actor: "organizer"})
	ctx := context.Background()
	res, err := svc.FindOfferings(ctx, domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"eastus"}})
	if err != nil || len(res.Offerings) == 0 {
		t.Fatalf("offerings: %+v, %v", res, err)
	}
	off := res.Offerings[0]
	out, err := svc.Book(ctx, ledger.BookRequest{OfferingID: off.ID})
	if err != nil {
		t.Fatal(err)
	}
	row := out.Row
	if row.Kind != ledger.KindReservation || row.State != ledger.StateActive || row.Actor != "organizer" ||
		!strings.Contains(row.ProviderRef, "/capacityReservations/gpumarket-"+row.ID) || row.CostUSD != off.UpfrontUSD {
		t.Fatalf("ledger row %+v", row)
	}
	if f.resources[strings.ToLower(row.ProviderRef)] == nil {
		t.Fatalf("no reservation at the fake ARM for %s", row.ProviderRef)
	}
	// The same offering again is refused by the ledger, before any PUT.
	puts := f.putCount("")
	if _, err := svc.Book(ctx, ledger.BookRequest{OfferingID: off.ID}); err == nil {
		t.Fatal("booked the same offering twice")
	}
	if f.putCount("") != puts {
		t.Fatal("a refused second booking reached ARM")
	}
	// The window ends: reconciliation deletes the reservation.
	now = row.End.Add(time.Minute)
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Get(ctx, row.ID)
	if got.State != ledger.StateEnded {
		t.Fatalf("after the window: %+v", got)
	}
	if f.resources[strings.ToLower(row.ProviderRef)] != nil {
		t.Fatal("the reservation still exists (and bills) after its window")
	}
}

// TestLedgerKeepsReleasingWhileVMsAreAssociated: when the window ends and
// the release is refused because VMs are associated with the reservation,
// the ledger row stays active (it bills) with the refusal's message, which
// says what to do; the next reconciliation tries again and ends it once
// the VMs are gone.
func TestLedgerKeepsReleasingWhileVMsAreAssociated(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := testNow
	svc := ledger.New(st, []domain.Provider{p}, ledger.Options{Now: func() time.Time { return now }, Timeout: 10 * time.Second, Actor: "organizer"})
	ctx := context.Background()
	res, err := svc.FindOfferings(ctx, domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 2 * time.Hour, Regions: []string{"eastus"}})
	if err != nil || len(res.Offerings) == 0 {
		t.Fatalf("offerings: %+v, %v", res, err)
	}
	out, err := svc.Book(ctx, ledger.BookRequest{OfferingID: res.Offerings[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	row := out.Row
	if !row.End.Equal(row.Start.Add(2 * time.Hour)) {
		t.Fatalf("row window %v – %v, want the asked 2 h", row.Start, row.End)
	}
	f.edit(row.ProviderRef, func(r map[string]any) {
		r["properties"].(map[string]any)["virtualMachinesAssociated"] = []any{map[string]any{"id": rgPath + "/virtualMachines/train-0"}}
	})
	now = row.End.Add(time.Minute)
	for range 2 {
		if _, err := svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := st.Get(ctx, row.ID)
		if got.State != ledger.StateActive || !strings.Contains(got.Error, "still billing") || !strings.Contains(got.Error, "train-0") ||
			!strings.Contains(got.Error, "set its capacity reservation group to none") {
			t.Fatalf("after a refused release: %s %q", got.State, got.Error)
		}
	}
	if n := f.count(func() int { return f.deletes[strings.ToLower(row.ProviderRef)] }); n != 2 {
		t.Errorf("%d delete attempts, want one per reconciliation", n)
	}
	f.edit(row.ProviderRef, func(r map[string]any) { delete(r["properties"].(map[string]any), "virtualMachinesAssociated") })
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Get(ctx, row.ID); got.State != ledger.StateEnded || f.resource(row.ProviderRef) != nil {
		t.Fatalf("after the VMs left: %s, reservation %v", got.State, f.resource(row.ProviderRef))
	}
}

// Azure scale sets have no schedule, so gpumarket keeps it:
// scheduling sends nothing (Azure has no dry run; the local checks run),
// the reconcile loop creates the scale set when the start comes — named
// after the row, so a lost answer is found — and deletes it when the end
// comes.
func TestScheduledScaleSetKeptByTheLoop(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, fleetOptions(f))
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := testNow
	svc := ledger.New(st, []domain.Provider{p}, ledger.Options{Now: func() time.Time { return now }, Timeout: 10 * time.Second, Actor: "organizer"})
	ctx := context.Background()
	start, end := testNow.Add(26*time.Hour), testNow.Add(29*time.Hour)
	spec := domain.FleetSpec{Provider: "azure", Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4"}, TargetCapacity: 2,
		Start: start, End: end, MaxPriceUSD: domain.Float(2)}
	if lines := svc.ScheduleLines(spec, now); len(lines) != 2 || !strings.Contains(lines[1], "gpumarket starts and deletes it") {
		t.Fatalf("confirmation lines %q", lines)
	}
	res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	row := res.Row
	if row.State != ledger.StateScheduled || row.ProviderRef != "" || !strings.Contains(row.Note, "gpumarket starts and deletes it") || f.putCount("") != 0 {
		t.Fatalf("scheduled: %+v, %d PUTs", row, f.putCount(""))
	}
	now = start.Add(30 * time.Second)
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Get(ctx, row.ID)
	if got.State != ledger.StateActive || !strings.HasSuffix(got.ProviderRef, "/virtualMachineScaleSets/gpumarket-"+row.ID) || f.resource(got.ProviderRef) == nil {
		t.Fatalf("at its start: %+v", got)
	}
	if fl := svc.FleetsNow(ctx, []ledger.Entry{got})[row.ID]; fl.Err != nil || fl.Fleet.Instances != 2 {
		t.Fatalf("running now: %+v", fl)
	}
	now = end.Add(20 * time.Second)
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	ended, _ := st.Get(ctx, row.ID)
	if ended.State != ledger.StateEnded || !ended.End.Equal(now) || f.resource(got.ProviderRef) != nil ||
		f.count(func() int { return f.deletes[strings.ToLower(got.ProviderRef)] }) != 1 {
		t.Fatalf("at its end: %+v; the scale set %v", ended, f.resource(got.ProviderRef))
	}
}
