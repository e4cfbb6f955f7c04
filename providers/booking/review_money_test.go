package booking_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/booking/bookingtest"
)

// Tests of the money path found wanting by the review of issues 11, 13
// and 15 (reproduced with the real binary first).

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
			f := newFixture(t, "", "aws", booking.Budget{})
			f.fake = describedAs(bookingtest.New("aws",
				bookingtest.Offering("aws", "cb-a", t0.Add(24*time.Hour), 48, 1, 834.37),
				bookingtest.Offering("aws", "cb-b", t0.Add(48*time.Hour), 48, 1, 841.95)))
			f.svc = booking.New(f.st, []providers.Provider{f.fake}, booking.Options{Budget: booking.Budget{MaxDailyUSD: c.cap},
				Now: func() time.Time { return f.now }, Timeout: time.Second})
			f.search(t)
			if _, err := f.svc.Book(ctx, booking.BookRequest{OfferingID: "cb-a"}); err != nil {
				t.Fatalf("first purchase: %v", err)
			}
			if _, err := f.svc.Quote(ctx, "cb-b"); (err == nil) != c.second {
				t.Fatalf("quote of the second under a cap of $%.2f: %v, want allowed %v", c.cap, err, c.second)
			}
			_, err := f.svc.Book(ctx, booking.BookRequest{OfferingID: "cb-b"})
			if (err == nil) != c.second {
				t.Fatalf("second purchase under a cap of $%.2f: %v, want allowed %v", c.cap, err, c.second)
			}
			if !c.second && !errors.Is(err, booking.ErrBudget) {
				t.Fatalf("refusal is not a budget error: %v", err)
			}
		})
	}
}
