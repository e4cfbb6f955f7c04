package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// TestFreshTermsBeforePurchase: `book` bought at cached
// terms up to an hour old — the cloud had repriced the block to 3×, and
// the budget and the ledger used the old price. Right before the
// purchase the offering is described again; any change of price (to the
// cent: no $50 of slack), dates, count, type or zone refuses the purchase
// with the new terms, which the user confirms or not.
func TestFreshTermsBeforePurchase(t *testing.T) {
	for name, change := range map[string]func(*domain.Offering){
		"price 3x":       func(o *domain.Offering) { o.UpfrontUSD *= 3 },
		"price +$49":     func(o *domain.Offering) { o.UpfrontUSD += 49 },
		"price +1 cent":  func(o *domain.Offering) { o.UpfrontUSD += 0.01 },
		"price lower":    func(o *domain.Offering) { o.UpfrontUSD -= 100 },
		"start a day on": func(o *domain.Offering) { o.Start, o.End = o.Start.Add(24*time.Hour), o.End.Add(24*time.Hour) },
		"end a day on":   func(o *domain.Offering) { o.End = o.End.Add(24 * time.Hour) },
		"two instances":  func(o *domain.Offering) { o.InstanceCount = 2 },
		"another type":   func(o *domain.Offering) { o.InstanceType = "p5e.48xlarge" },
		"another zone":   func(o *domain.Offering) { o.Zone = "us-east-1b" },
		"another region": func(o *domain.Offering) { o.Region = "us-west-2" },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "", "aws", ledger.Budget{})
			f.search(t)
			ctx := context.Background()
			q, err := f.svc.Quote(ctx, "cb-cheap")
			if err != nil {
				t.Fatal(err)
			}
			f.fake.Reprice("cb-cheap", change)
			want, _ := f.fake.RefreshOffering(ctx, q.Offering)
			_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", Confirmed: q.Offering})
			var tc *ledger.TermsChangedError
			if !errors.As(err, &tc) || !errors.Is(err, ledger.ErrTermsChanged) {
				t.Fatalf("book at changed terms: %v", err)
			}
			if !ledger.SameTerms(tc.Now, want) || !ledger.SameTerms(tc.Shown, q.Offering) || tc.Now.UpfrontUSD != want.UpfrontUSD {
				t.Fatalf("the error carries shown %+v and now %+v; want the new terms %+v", tc.Shown, tc.Now, want)
			}
			if f.fake.Calls("Book") != 0 {
				t.Fatal("a purchase was sent at terms the user did not confirm")
			}
			noRows(t, f.st)
			// The new terms are kept: a Quote shows them, and confirming
			// them buys at them.
			q2, err := f.svc.Quote(ctx, tc.Now.ID)
			if err != nil || !ledger.SameTerms(q2.Offering, want) {
				t.Fatalf("quote after the change: %+v, %v", q2.Offering, err)
			}
			res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: tc.Now.ID, Confirmed: q2.Offering})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Row
			if r.CostUSD != want.UpfrontUSD || r.InstanceCount != want.InstanceCount || !r.Start.Equal(want.Start) || r.InstanceType != want.InstanceType || r.Zone != want.Zone {
				t.Fatalf("row %+v: want the new terms %+v", r, want)
			}
			if f.fake.Calls("Book") != 1 {
				t.Fatalf("%d purchases", f.fake.Calls("Book"))
			}
		})
	}
}

// TestUnchangedTermsBuyWithoutAsking: a re-description on the same terms
// is no reason to ask again; the purchase is sent once.
func TestUnchangedTermsBuyWithoutAsking(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx := context.Background()
	q, _ := f.svc.Quote(ctx, "cb-cheap")
	f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.Note = "re-described" })
	res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", Confirmed: q.Offering})
	if err != nil || f.fake.Calls("RefreshOffering") != 1 || f.fake.Calls("Book") != 1 || res.Offering.Note != "re-described" {
		t.Fatalf("book at unchanged terms: %v, refresh %d, book %d, offering %+v", err, f.fake.Calls("RefreshOffering"), f.fake.Calls("Book"), res.Offering)
	}
}

// TestBudgetUsesFreshPrice: the caps are checked against the price the
// cloud asks now, not the search's: a block repriced over the cap is
// refused once its new terms are confirmed, and never bought.
func TestBudgetUsesFreshPrice(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 5000})
	f.search(t)
	ctx := context.Background()
	q, _ := f.svc.Quote(ctx, "cb-cheap")
	f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD = 6000 })
	// Without a confirmation (--yes) the search's terms were all that was
	// shown: still refused.
	_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	var tc *ledger.TermsChangedError
	if !errors.As(err, &tc) || tc.Now.UpfrontUSD != 6000 || tc.Shown.UpfrontUSD != q.Offering.UpfrontUSD {
		t.Fatalf("unconfirmed book at new terms: %v", err)
	}
	q2, err := f.svc.Quote(ctx, "cb-cheap")
	var be *ledger.BudgetError
	if !errors.As(err, &be) || be.CostUSD != 6000 {
		t.Fatalf("quote of the new terms: %v", err)
	}
	_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", Confirmed: q2.Offering})
	if !errors.As(err, &be) || be.CostUSD != 6000 || f.fake.Calls("Book") != 0 {
		t.Fatalf("book over the cap at the fresh price: %v, %d purchases", err, f.fake.Calls("Book"))
	}
	noRows(t, f.st)
}

// TestPurchaseCostIsWhatTheCloudCharged: the ledger keeps what the
// provider says it charged when that differs from the terms.
func TestPurchaseCostIsWhatTheCloudCharged(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	f.fake.BookHook = nil
	res, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil || res.Row.CostUSD != 2000 {
		t.Fatalf("%v %+v", err, res.Row)
	}
}

// TestOfferingGoneOrUncheckable: an offering no longer on sale, or one
// the provider could not describe again, is not bought blind.
func TestOfferingGoneOrUncheckable(t *testing.T) {
	ctx := context.Background()
	t.Run("gone", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		f.search(t)
		f.fake.Withdraw("cb-cheap")
		_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
		if !errors.Is(err, domain.ErrOfferingGone) || !strings.Contains(err.Error(), "search again") || f.fake.Calls("Book") != 0 {
			t.Fatalf("gone: %v", err)
		}
		noRows(t, f.st)
	})
	t.Run("no answer", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		f.search(t)
		f.fake.RefreshHook = func(ctx context.Context, _ domain.Offering) error {
			<-ctx.Done()
			return ctx.Err()
		}
		var err error
		within(t, 5*time.Second, "book", func() { _, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}) })
		if err == nil || !strings.Contains(err.Error(), "could not be checked") || f.fake.Calls("Book") != 0 {
			t.Fatalf("unchecked: %v", err)
		}
		noRows(t, f.st)
	})
	t.Run("dry run", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		f.search(t)
		f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.UpfrontUSD = 2500 })
		_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", DryRun: true})
		if !errors.Is(err, ledger.ErrTermsChanged) || f.fake.Calls("BookDryRun") != 0 {
			t.Fatalf("dry run at changed terms: %v", err)
		}
	})
}

// TestSameTerms holds every term to account, one at a time, and an
// offering that starts on purchase (an Azure reservation) to its end and
// hourly rate: its start and total move with the time it is described.
func TestSameTerms(t *testing.T) {
	base := ledgertest.Offering("aws", "cb-1", t0, 48, 1, 2000)
	if !ledger.SameTerms(base, base) {
		t.Fatal("an offering differs from itself")
	}
	for name, change := range map[string]func(*domain.Offering){
		"provider": func(o *domain.Offering) { o.Provider = "sim" },
		"region":   func(o *domain.Offering) { o.Region = "us-west-2" },
		"zone":     func(o *domain.Offering) { o.Zone = "us-east-1b" },
		"type":     func(o *domain.Offering) { o.InstanceType = "p4d.24xlarge" },
		"count":    func(o *domain.Offering) { o.InstanceCount = 2 },
		"start":    func(o *domain.Offering) { o.Start = o.Start.Add(time.Hour) },
		"end":      func(o *domain.Offering) { o.End = o.End.Add(time.Hour) },
		"cent":     func(o *domain.Offering) { o.UpfrontUSD += 0.01 },
		"currency": func(o *domain.Offering) { o.Currency = "EUR" },
		"kind":     func(o *domain.Offering) { o.StartsOnPurchase = true },
	} {
		o := base
		change(&o)
		if ledger.SameTerms(base, o) || ledger.SameTerms(o, base) {
			t.Errorf("%s changed, yet the terms compare the same", name)
		}
	}
	// Less than half a cent is no change (the clouds price in cents).
	o := base
	o.UpfrontUSD += 0.004
	if !ledger.SameTerms(base, o) {
		t.Error("a fraction of a cent is a change")
	}
	az := base
	az.StartsOnPurchase, az.Start, az.End, az.UpfrontUSD = true, t0, t0.Add(10*time.Hour), 1000 // $100/h
	later := az
	later.Start, later.UpfrontUSD = t0.Add(2*time.Hour), 800 // the same $100/h, two hours on
	if !ledger.SameTerms(az, later) {
		t.Error("a reservation described two hours later at the same rate differs")
	}
	dearer := later
	dearer.UpfrontUSD = 800.10
	if ledger.SameTerms(az, dearer) {
		t.Error("a reservation's rate rose, yet the terms compare the same")
	}
}

// TestDescribedOfferingIDKeepsTheKey: a provider that makes ids from the
// terms re-describes an offering under another id; the ledger's key stays
// the id the user booked, so a second purchase of it is refused.
func TestDescribedOfferingIDKeepsTheKey(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	f.fake.Reprice("cb-cheap", func(o *domain.Offering) { o.ID = "cb-cheap-2" })
	ctx := context.Background()
	res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil || res.Row.IdemKey != "cb-cheap" {
		t.Fatalf("%v, row key %q", err, res.Row.IdemKey)
	}
	if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("second purchase: %v", err)
	}
}

// TestConfirmedTermsWithoutARefresher: a provider that cannot describe
// an offering again sells on the search's terms; if a later search
// re-priced the id after the user confirmed, nothing is bought.
func TestConfirmedTermsWithoutARefresher(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.svc = ledger.New(f.st, []domain.Provider{noRecords{f.fake}}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second})
	f.search(t)
	ctx := context.Background()
	q, err := f.svc.Quote(ctx, "cb-cheap")
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.st.Offering(ctx, "cb-cheap", f.now)
	if err != nil {
		t.Fatal(err)
	}
	c.Offering.UpfrontUSD = 2600
	if err := f.st.SaveOfferings(ctx, c.Query, []domain.Offering{c.Offering}, f.now); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", Confirmed: q.Offering})
	var tc *ledger.TermsChangedError
	if !errors.As(err, &tc) || tc.Now.UpfrontUSD != 2600 || f.fake.Calls("Book") != 0 || f.fake.Calls("RefreshOffering") != 0 {
		t.Fatalf("book at a price never confirmed: %v", err)
	}
	noRows(t, f.st)
}
