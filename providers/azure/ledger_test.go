package azure

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/store"
)

// A reservation books through the ledger (intent, then the PUTs, then the
// outcome) and, since Azure bills it until it is deleted, the ledger
// deletes it when its window ends.
func TestReservationThroughTheLedger(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := testNow
	svc := booking.New(st, []providers.Provider{p}, booking.Options{Now: func() time.Time { return now }, Timeout: 10 * time.Second, Actor: "organizer"})
	ctx := context.Background()
	res, err := svc.FindOfferings(ctx, providers.OfferingQuery{GPU: "A100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"eastus"}})
	if err != nil || len(res.Offerings) == 0 {
		t.Fatalf("offerings: %+v, %v", res, err)
	}
	off := res.Offerings[0]
	out, err := svc.Book(ctx, booking.BookRequest{OfferingID: off.ID})
	if err != nil {
		t.Fatal(err)
	}
	row := out.Row
	if row.Kind != store.KindReservation || row.State != store.StateActive || row.Actor != "organizer" ||
		!strings.Contains(row.ProviderRef, "/capacityReservations/gpumarket-"+row.ID) || row.CostUSD != off.UpfrontUSD {
		t.Fatalf("ledger row %+v", row)
	}
	if f.resources[strings.ToLower(row.ProviderRef)] == nil {
		t.Fatalf("no reservation at the fake ARM for %s", row.ProviderRef)
	}
	// The same offering again is refused by the ledger, before any PUT.
	puts := f.putCount("")
	if _, err := svc.Book(ctx, booking.BookRequest{OfferingID: off.ID}); err == nil {
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
	if got.State != store.StateEnded {
		t.Fatalf("after the window: %+v", got)
	}
	if f.resources[strings.ToLower(row.ProviderRef)] != nil {
		t.Fatal("the reservation still exists (and bills) after its window")
	}
}
