package domain

import (
	"context"
	"errors"
	"fmt"
)

// ErrDeclined, wrapped, marks the cloud's definite "no": nothing was done ("failed").
var ErrDeclined = errors.New("declined by the provider")

// Declined wraps err as a definite "no": it matches ErrDeclined and reads as err.
func Declined(err error) error { return declined{err} }

type declined struct{ error }

func (e declined) Unwrap() []error { return []error{e.error, ErrDeclined} }

// ErrInvalidQuery marks a search for terms the provider does not sell: bad usage (exit 2).
var ErrInvalidQuery = errors.New("invalid query")

// InvalidQueryf formats an error that matches ErrInvalidQuery and reads as its message.
func InvalidQueryf(format string, args ...any) error {
	return invalidQuery{fmt.Sprintf(format, args...)}
}

type invalidQuery struct{ msg string }

func (e invalidQuery) Error() string        { return e.msg }
func (e invalidQuery) Is(target error) bool { return target == ErrInvalidQuery }

// FleetFinder finds a fleet by its launch's client token, to settle a lost answer.
type FleetFinder interface {
	FindFleet(ctx context.Context, region, clientToken string) (*Fleet, error)
}

// BookingRememberer is an ephemeral provider told at start what the ledger holds as booked.
type BookingRememberer interface {
	RememberBookings(booked []BookedOffering)
}

// BookedOffering is an offering the ledger holds as bought, with its booking.
type BookedOffering struct {
	Offering Offering
	Booking  Booking
}

// BookingReleaser's bookings bill until released; the ledger releases each at its window's end.
type BookingReleaser interface {
	ReleaseBooking(ctx context.Context, b Booking) error
}
