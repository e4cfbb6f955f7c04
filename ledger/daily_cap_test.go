package ledger_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// Tests of the money path: caps counted in cents, rows of unknown cost,
// quotes while a purchase is in flight.

// TestDailyCapReachedExactlyInCents: two purchases whose prices add up to
// the daily cap to the cent reach it and are allowed, although the
// float sum of $834.37 and $841.95 is 1676.3200000000002 (the binary
// refused the second: "$834.37 + this $841.95 = $1676.32 is over
// budget.max_daily_usd $1676.32"). A cent more is still refused.
func TestDailyCapReachedExactlyInCents(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		cap    float64
		second bool
	}{
		{"exactly", 1676.32, true},
		{"a cent short", 1676.31, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "", "aws", ledger.Budget{})
			f.fake = describedAs(ledgertest.New("aws",
				ledgertest.Offering("aws", "cb-a", t0.Add(24*time.Hour), 48, 1, 834.37),
				ledgertest.Offering("aws", "cb-b", t0.Add(48*time.Hour), 48, 1, 841.95)))
			f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Budget: ledger.Budget{MaxDailyUSD: c.cap},
				Now: func() time.Time { return f.now }, Timeout: time.Second})
			f.search(t)
			if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-a"}); err != nil {
				t.Fatalf("first purchase: %v", err)
			}
			if _, err := f.svc.Quote(ctx, "cb-b"); (err == nil) != c.second {
				t.Fatalf("quote of the second under a cap of $%.2f: %v, want allowed %v", c.cap, err, c.second)
			}
			_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-b"})
			if (err == nil) != c.second {
				t.Fatalf("second purchase under a cap of $%.2f: %v, want allowed %v", c.cap, err, c.second)
			}
			if !c.second && !errors.Is(err, ledger.ErrBudget) {
				t.Fatalf("refusal is not a budget error: %v", err)
			}
		})
	}
}

// TestRebuiltRowsOfUnknownCostLeaveTheDayUnknown: AWS does not say what a
// capacity block cost, so `ledger --rebuild` re-creates today's purchases
// with no cost. The day's spending must not read them as $0: with the
// binary, three blocks bought today for $8,565 and rebuilt showed
// "today's spending $0.00 of budget.max_daily_usd $20000.00", and a
// further $20,000 could be spent the same day. Under a daily cap the
// purchase is refused, saying why; without one it goes ahead.
func TestRebuiltRowsOfUnknownCostLeaveTheDayUnknown(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		budget ledger.Budget
		ok     bool
	}{
		{"daily cap", ledger.Budget{MaxDailyUSD: 20000}, false},
		{"per-purchase cap only", ledger.Budget{MaxBookingUSD: 5000}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, "", "aws", c.budget)
			f.fake.AddRecord(domain.CloudRecord{Kind: domain.KindBlock, Ref: "01OLDROW", OfferingID: "cb-lost", ProviderRef: "cr-lost",
				Provider: "aws", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge",
				InstanceCount: 1, Start: t0.Add(72 * time.Hour), End: t0.Add(120 * time.Hour), CostUSD: math.NaN(),
				State: "scheduled", CreatedAt: t0.Add(-time.Hour)})
			rep, err := f.svc.Rebuild(ctx)
			if err != nil || len(rep.Created) != 1 {
				t.Fatalf("rebuild: %+v, %v", rep, err)
			}
			spent, err := f.st.DaySpent(ctx, f.now)
			if err != nil {
				t.Fatal(err)
			}
			if !math.IsNaN(spent) {
				t.Fatalf("the day's spending with a re-created row of unknown cost reads $%v, want unknown (NaN)", spent)
			}
			f.search(t)
			_, qerr := f.svc.Quote(ctx, "cb-cheap")
			_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
			if c.ok {
				if qerr != nil || err != nil {
					t.Fatalf("no daily cap: quote %v, book %v", qerr, err)
				}
				return
			}
			for _, e := range []error{qerr, err} {
				if !errors.Is(e, ledger.ErrBudget) || !strings.Contains(e.Error(), "not known") || strings.Contains(e.Error(), "NaN") {
					t.Fatalf("under a daily cap with today's spending unknown: %v", e)
				}
			}
			if n := f.fake.Calls("Book"); n != 0 {
				t.Fatalf("%d purchases sent", n)
			}
		})
	}
}

// TestFleetOfUnknownCostCountsItsFirstHourOnly: a fleet counts its first
// hour's estimate against the day, $0 when its prices were not known (a
// fleet launched with no cap; one re-created from AWS, which shows no
// price of a fleet). That must not make the whole day unknown: with the
// binary, a rebuild that re-created one scheduled fleet refused every
// purchase for the rest of the day.
func TestFleetOfUnknownCostCountsItsFirstHourOnly(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "", "aws", ledger.Budget{})
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: domain.FleetSpec{Provider: "aws", Region: "us-east-1",
		InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !ledger.CostUnknown(res.Row) {
		t.Fatalf("the fake knows no price, yet the fleet's cost is known: %+v", res.Row)
	}
	f.fake.AddRecord(domain.CloudRecord{Kind: domain.KindFleet, Ref: "01OLDFLEET", ProviderRef: "fleet-old", Provider: "aws",
		Cloud: domain.CloudAWS, Region: "us-east-1", InstanceType: "g6.xlarge", InstanceCount: 2, CostUSD: math.NaN(),
		State: "active", CreatedAt: t0.Add(-time.Hour)})
	if rep, err := f.svc.Rebuild(ctx); err != nil || len(rep.Created) != 1 {
		t.Fatalf("rebuild: %+v, %v", rep, err)
	}
	if spent, err := f.st.DaySpent(ctx, f.now); err != nil || spent != 0 {
		t.Fatalf("the day's spending with two fleets of unknown prices: $%v, %v; want $0 (their first hours)", spent, err)
	}
	g := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 20000})
	g.fake = f.fake
	g.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Budget: ledger.Budget{MaxDailyUSD: 20000},
		Now: func() time.Time { return f.now }, Timeout: time.Second})
	g.search(t)
	if _, err := g.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); err != nil {
		t.Fatalf("a purchase under the daily cap after fleets of unknown prices: %v", err)
	}
}

// TestQuoteWhileAPurchaseIsInFlight: `book` quotes before it buys; while
// another process's purchase of the offering was on the wire the quote
// said "an earlier purchase … has an unknown outcome; … reconcile with
// `gpumarket ledger`", and `ledger` then said the call was still in
// flight. The quote says what the ledger says: in flight, by whom.
func TestQuoteWhileAPurchaseIsInFlight(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx := context.Background()
	release, first := bookInFlight(t, f, "alice@host")
	_, err := f.svc.Quote(ctx, "cb-cheap")
	close(release)
	if err == nil || !strings.Contains(err.Error(), "in flight") || !strings.Contains(err.Error(), "alice@host") || strings.Contains(err.Error(), "unknown outcome") {
		t.Errorf("quote while the purchase is on the wire: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// Once its answer is lost, the quote says so.
	g := newFixture(t, "", "aws", ledger.Budget{})
	g.search(t)
	g.fake.BookHook = func(context.Context, domain.BookRequest) error { return context.DeadlineExceeded }
	if _, err := g.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	if _, err := g.svc.Quote(ctx, "cb-cheap"); err == nil || !strings.Contains(err.Error(), "unknown outcome") {
		t.Errorf("quote after a lost answer: %v", err)
	}
}
