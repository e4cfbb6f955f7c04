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
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// releasingFake is a provider whose bookings bill until released, as
// Azure's capacity reservations do.
type releasingFake struct {
	*ledgertest.Fake
	mu       sync.Mutex
	released []string
	fail     error
}

func (f *releasingFake) ReleaseBooking(ctx context.Context, b domain.Booking) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.released = append(f.released, b.ProviderRef)
	return nil
}

func TestReservationReleasedWhenItsWindowEnds(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := ledgertest.Offering("azure", "azcr-1", t0.Add(time.Hour), 24, 1, 2400)
	o.Cloud = domain.CloudAzure
	fake := &releasingFake{Fake: ledgertest.New("azure", o), fail: errors.New("connection reset")}
	now := t0
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: func() time.Time { return now }, Timeout: time.Second, Actor: "tester"})
	ctx := context.Background()
	if _, err := svc.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	out, err := svc.Book(ctx, ledger.BookRequest{OfferingID: "azcr-1"})
	if err != nil || out.Row.Kind != ledger.KindReservation {
		t.Fatalf("book: %+v %v", out.Row, err)
	}
	// Inside the window: nothing to release.
	now = o.Start.Add(time.Hour)
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Get(ctx, out.Row.ID); r.State != ledger.StateActive || len(fake.released) != 0 {
		t.Fatalf("inside the window: %s, released %v", r.State, fake.released)
	}
	// The window ends; the release fails: the row says it is still billing.
	now = o.End.Add(time.Minute)
	rep, err := svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := st.Get(ctx, out.Row.ID)
	if r.State != ledger.StateActive || !strings.Contains(r.Error, "still billing") || len(rep.Unsettled) != 1 {
		t.Fatalf("failed release: %+v (report %+v)", r, rep)
	}
	// The next reconciliation releases it and records it ended, once.
	fake.fail = nil
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ = st.Get(ctx, out.Row.ID)
	if r.State != ledger.StateEnded || r.Error != "" {
		t.Fatalf("after release: %+v", r)
	}
	if len(fake.released) != 1 || fake.released[0] != r.ProviderRef {
		t.Fatalf("released %v, want [%s] once", fake.released, r.ProviderRef)
	}
}

// TestReservationNotEndedWithoutRelease: a reservation bills until it is
// released, so the clock alone never records it ended — not when the
// process that reconciles has no Azure provider (`gpumarket ledger` run
// with other providers), and not when a lost answer is found only after
// the window ended. Either way the ledger would say "ended" while Azure
// keeps billing, and nothing would ever release it.
func TestReservationNotEndedWithoutRelease(t *testing.T) {
	ctx := context.Background()
	o := ledgertest.Offering("azure", "azcr-1", t0.Add(time.Hour), 24, 1, 2400)
	o.Cloud = domain.CloudAzure

	t.Run("provider not in use", func(t *testing.T) {
		st, err := ledger.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		fake := &releasingFake{Fake: ledgertest.New("azure", o)}
		now := t0
		svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: func() time.Time { return now }, Timeout: time.Second})
		if _, err := svc.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		out, err := svc.Book(ctx, ledger.BookRequest{OfferingID: "azcr-1"})
		if err != nil {
			t.Fatal(err)
		}
		// After the window, a run without the azure provider.
		now = o.End.Add(time.Hour)
		other := ledger.New(st, []domain.Provider{ledgertest.New("aws")}, ledger.Options{Now: func() time.Time { return now }, Timeout: time.Second})
		rep, err := other.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := st.Get(ctx, out.Row.ID)
		if r.State == ledger.StateEnded {
			t.Fatalf("recorded ended without being released: %+v", r)
		}
		if len(rep.Unsettled) != 1 || !strings.Contains(rep.Unsettled[0].Reason, "azure") {
			t.Fatalf("the report should name the unreleased reservation and its provider: %+v", rep)
		}
		// A run with the azure provider releases it.
		if _, err := svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if r, _ := st.Get(ctx, out.Row.ID); r.State != ledger.StateEnded || len(fake.released) != 1 {
			t.Fatalf("after a run with azure: %+v, released %v", r, fake.released)
		}
	})

	t.Run("lost answer found after the window", func(t *testing.T) {
		st, err := ledger.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		fake := &releasingFake{Fake: ledgertest.New("azure", o)}
		fake.BuyThenFail = true
		fake.BookHook = func(context.Context, domain.BookRequest) error { return context.DeadlineExceeded }
		now := t0
		svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: func() time.Time { return now }, Timeout: time.Second})
		if _, err := svc.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		out, err := svc.Book(ctx, ledger.BookRequest{OfferingID: "azcr-1"})
		if !errors.Is(err, ledger.ErrUnknownOutcome) {
			t.Fatalf("lost answer: %v", err)
		}
		now = o.End.Add(time.Hour)
		if _, err := svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r, _ := st.Get(ctx, out.Row.ID)
		if len(fake.released) != 1 || r.State != ledger.StateEnded || r.ProviderRef == "" {
			t.Fatalf("found after its window: %+v, released %v (want released and ended)", r, fake.released)
		}
	})
}

// creatingFake shows a found reservation as still being created, as ARM
// does while a capacity reservation's provisioning state is Creating.
type creatingFake struct{ *ledgertest.Fake }

func (f creatingFake) FindBooking(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	b, err := f.Fake.FindBooking(ctx, req)
	if b != nil {
		b.State = ledger.StatePending
	}
	return b, err
}

// TestFoundBookingIsNeverPending: a reservation the provider shows exists
// (and bills), so the row that finds it is settled; "pending" would make
// it read as a call in flight, refuse the offering as "unknown outcome",
// and send it back to be looked up again.
func TestFoundBookingIsNeverPending(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := ledgertest.Offering("azure", "azcr-1", t0.Add(time.Hour), 24, 1, 2400)
	o.Cloud = domain.CloudAzure
	fake := creatingFake{ledgertest.New("azure", o)}
	fake.BuyThenFail = true
	fake.BookHook = func(context.Context, domain.BookRequest) error { return context.DeadlineExceeded }
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: func() time.Time { return t0 }, Timeout: time.Second})
	ctx := context.Background()
	if _, err := svc.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	out, err := svc.Book(ctx, ledger.BookRequest{OfferingID: "azcr-1"})
	if !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("lost answer: %v", err)
	}
	rep, err := svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := st.Get(ctx, out.Row.ID)
	if !r.Settled() || r.ProviderRef == "" || len(rep.Settled) != 1 {
		t.Fatalf("found reservation recorded %q (%s); report %+v", r.State, r.ProviderRef, rep)
	}
}
