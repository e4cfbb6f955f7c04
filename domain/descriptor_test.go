package domain

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestCapacityBlockHours(t *testing.T) {
	for h, want := range map[int]bool{0: false, 23: false, 24: true, 25: false, 48: true, 336: true, 360: false, 504: true, 511: false, 4368: true, 4536: false} {
		if CapacityBlockTerms.ValidHours(h) != want {
			t.Errorf("capacity block of %d h: valid %v, want %v", h, !want, want)
		}
	}
	for h, want := range map[int]bool{0: false, 1: true, 7: true, 4368: true, 4369: false} {
		if ReservationTerms.ValidHours(h) != want {
			t.Errorf("reservation of %d h: valid %v, want %v", h, !want, want)
		}
	}
	if err := CapacityBlockTerms.ValidDuration(30 * time.Hour); err == nil {
		t.Error("a 30 h capacity block was accepted")
	}
	if err := CapacityBlockTerms.ValidDuration(90 * time.Minute); err == nil {
		t.Error("a 90 min capacity block was accepted")
	}
}

func TestStartOfDay(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if got := CapacityBlockTerms.StartOfDay(at); !got.Equal(time.Date(2026, 12, 2, 11, 30, 0, 0, time.UTC)) {
		t.Errorf("first block start after 12:00 UTC: %s", got)
	}
	early := time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("X", 3600))
	if got := CapacityBlockTerms.StartOfDay(early); !got.Equal(time.Date(2026, 12, 1, 11, 30, 0, 0, time.UTC)) {
		t.Errorf("first block start after 08:00 UTC: %s", got)
	}
	if got := ReservationTerms.StartOfDay(at); !got.Equal(at) {
		t.Errorf("a reservation starts when made, got %s", got)
	}
}

func TestOfferingTerms(t *testing.T) {
	cases := []struct {
		o    Offering
		want *BookingTerms
	}{
		{Offering{Kind: KindBlock}, CapacityBlockTerms},
		{Offering{Kind: KindReservation}, ReservationTerms},
		// Rows recorded before offerings named their kind.
		{Offering{StartsOnPurchase: true}, ReservationTerms},
		{Offering{Cloud: CloudAzure}, ReservationTerms},
		{Offering{Cloud: CloudAWS}, CapacityBlockTerms},
	}
	for _, c := range cases {
		if got := c.o.Terms(); got != c.want {
			t.Errorf("%+v: terms %s, want %s", c.o, got.Name, c.want.Name)
		}
	}
}

func TestIsDeclined(t *testing.T) {
	no := errors.New("no")
	d := Descriptor{Declined: func(err error) bool { return errors.Is(err, no) }}
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("wrapped: %w", ErrDeclined), true},
		{no, true},
		{errors.New("connection reset"), false},
		// A lost answer is never a no, whatever the provider says of it.
		{errors.Join(no, context.DeadlineExceeded), false},
		{errors.Join(no, context.Canceled), false},
	}
	for _, c := range cases {
		if got := d.IsDeclined(c.err); got != c.want {
			t.Errorf("IsDeclined(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if (Descriptor{}).IsDeclined(no) {
		t.Error("a descriptor without Declined took an error for a no")
	}
}
