package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// Tests that kill bugs put into the money path on purpose that every
// other test let through.

// TestHeldOfferingNotOfferedAgain: the provider still offers a block the
// ledger holds (a search lagging the sale; the simulated market of
// another process); the search hides it and says how many it hid.
func TestHeldOfferingNotOfferedAgain(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx := context.Background()
	if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); err != nil {
		t.Fatal(err)
	}
	offered, err := f.fake.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100"})
	if err != nil || len(offered) != 2 {
		t.Fatalf("the fake should still offer what it sold: %d offerings, %v", len(offered), err)
	}
	res := f.search(t)
	if len(res.Offerings) != 1 || res.Offerings[0].ID != "cb-dear" || res.Hidden != 1 {
		t.Fatalf("search after the sale: %+v, hidden %d; want only cb-dear, 1 hidden", res.Offerings, res.Hidden)
	}
	// An unknown outcome holds the offering too.
	g := newFixture(t, "", "aws", ledger.Budget{})
	g.search(t)
	g.fake.BookHook = func(context.Context, domain.BookRequest) error { return context.DeadlineExceeded }
	if _, err := g.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-dear"}); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if res := g.search(t); len(res.Offerings) != 1 || res.Offerings[0].ID != "cb-cheap" {
		t.Fatalf("an offering of unknown outcome was offered again: %+v", res.Offerings)
	}
}

// TestDailyCapBoundary: reaching a cap exactly is allowed; a cent over it
// is not (the caps are the most one may spend: "max").
func TestDailyCapBoundary(t *testing.T) {
	ctx := context.Background()
	t.Run("max_daily_usd", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 4000})
		f.fake = describedAs(ledgertest.New("aws",
			ledgertest.Offering("aws", "cb-a", t0.Add(24*time.Hour), 48, 1, 2000),
			ledgertest.Offering("aws", "cb-b", t0.Add(48*time.Hour), 48, 1, 2000),
			ledgertest.Offering("aws", "cb-c", t0.Add(72*time.Hour), 48, 1, 0.01)))
		f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Budget: ledger.Budget{MaxDailyUSD: 4000},
			Now: func() time.Time { return f.now }, Timeout: time.Second})
		f.search(t)
		for _, id := range []string{"cb-a", "cb-b"} {
			if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: id}); err != nil {
				t.Fatalf("%s up to the cap exactly: %v", id, err)
			}
		}
		_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-c"})
		var be *ledger.BudgetError
		if !errors.As(err, &be) || be.Cap != "max_daily_usd" || be.SpentUSD != 4000 {
			t.Fatalf("a cent over the cap: %v", err)
		}
	})
	t.Run("max_booking_usd", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 2000})
		f.search(t)
		if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); err != nil {
			t.Fatalf("a purchase of exactly the cap: %v", err)
		}
		if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-dear"}); !errors.Is(err, ledger.ErrBudget) {
			t.Fatalf("over the cap: %v", err)
		}
	})
	t.Run("unknown cost", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 2000})
		spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 1}
		if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec}); err == nil || !strings.Contains(err.Error(), "cost is unknown") {
			t.Fatalf("a fleet of unknown cost under a cap: %v", err)
		}
	})
}

// TestKeepDuringAPurchase: the reconcile loop (Service.Keep) runs while a
// purchase is on the wire — in the same process and in another one with a
// clock almost a day ahead (the block starts a day after t0) — and never
// takes the pending row for abandoned: the row's owner holds its call.
func TestKeepDuringAPurchase(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, "aws", ledger.Budget{})
	f.search(t)
	other := newFixture(t, dir, "aws", ledger.Budget{})
	other.now = t0.Add(23 * time.Hour)
	other.fake = f.fake
	other.svc = ledger.New(other.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return other.now }, Timeout: time.Millisecond})

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.fake.BookHook = func(context.Context, domain.BookRequest) error {
		once.Do(func() { close(started) })
		<-release
		return nil
	}
	ctx, stop := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	for _, svc := range []*ledger.Service{f.svc, other.svc} {
		loops.Add(1)
		go func() {
			defer loops.Done()
			svc.Keep(ctx, time.Millisecond)
		}()
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
		done <- err
	}()
	<-started
	// Let both loops reconcile many times while the call is out.
	for i := 0; i < 20; i++ {
		rep, err := other.svc.Reconcile(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range listRows(t, f.st) {
			if r.State != ledger.StatePending {
				t.Fatalf("reconcile moved a purchase in flight to %s: %+v", r.State, r)
			}
		}
		if len(rep.Unsettled) != 1 || !strings.Contains(rep.Unsettled[0].Reason, "in flight") {
			t.Fatalf("report %+v", rep)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(release)
	within(t, 10*time.Second, "the purchase", func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	stop()
	loops.Wait()
	rows := listRows(t, f.st)
	if len(rows) != 1 || rows[0].State != ledger.StateScheduled || f.fake.Calls("Book") != 1 || f.fake.Calls("FindBooking") != 0 {
		t.Fatalf("after the purchase: %+v, %d purchases, %d look-ups", rows, f.fake.Calls("Book"), f.fake.Calls("FindBooking"))
	}
}

// TestPaymentFailedIsFailed: a purchase the cloud took and then refused
// (AWS's payment-failed, which the provider answers as state failed) is
// failed in the ledger, said as an error, frees the offering and spends
// nothing — never read as scheduled.
func TestPaymentFailedIsFailed(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	f.fake.BookState, f.fake.BookMessage = ledger.StateFailed, "payment-failed: the payment method was declined"
	ctx := context.Background()
	res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err == nil || !strings.Contains(err.Error(), "payment-failed") {
		t.Fatalf("a failed payment reported as %v", err)
	}
	if res.Row.State != ledger.StateFailed || !strings.Contains(res.Row.Error, "payment-failed") {
		t.Fatalf("row %+v", res.Row)
	}
	if spent, err := f.st.DaySpent(ctx, f.now); err != nil || spent != 0 {
		t.Fatalf("day spent %v, %v", spent, err)
	}
	if s := f.search(t); len(s.Offerings) != 2 {
		t.Fatalf("the offering whose payment failed is not offered again: %+v", s.Offerings)
	}
}

// TestSimulatedErrorsAndCancelledContexts: the simulated market's errors
// are all a definite "no" (nothing real is bought) — but a cancelled or
// expired context is not an error of the market: the call may have gone
// through, so the outcome is unknown.
func TestSimulatedErrorsAndCancelledContexts(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("sim book: offering cb-cheap: offering already booked"), ledger.StateFailed},
		{fmt.Errorf("sim book cb-cheap: %w", context.Canceled), ledger.StateUnknown},
		{fmt.Errorf("sim book cb-cheap: %w", context.DeadlineExceeded), ledger.StateUnknown},
	} {
		f := newFixture(t, "", "sim", ledger.Budget{})
		f.search(t)
		f.fake.BookHook = func(context.Context, domain.BookRequest) error { return c.err }
		res, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
		if err == nil || res.Row.State != c.want {
			t.Errorf("%v: state %q (%v), want %q", c.err, res.Row.State, err, c.want)
		}
		if c.want == ledger.StateUnknown && !errors.Is(err, ledger.ErrUnknownOutcome) {
			t.Errorf("%v: %v, want an unknown outcome", c.err, err)
		}
	}
}

// TestCancelledFleetLaunchIsNotDeclined: the same for fleets at a
// provider whose every error is a "no".
func TestCancelledFleetLaunchIsNotDeclined(t *testing.T) {
	f := newFixture(t, "", "sim", ledger.Budget{})
	f.fake.LaunchHook = func(context.Context, domain.FleetSpec) error {
		return fmt.Errorf("sim launch fleet: %w", context.DeadlineExceeded)
	}
	spec := domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 1, MaxPriceUSD: domain.Float(10)}
	res, err := f.svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec})
	if !errors.Is(err, ledger.ErrUnknownOutcome) || res.Row.State != ledger.StateUnknown {
		t.Fatalf("%v, row %+v", err, res.Row)
	}
}
