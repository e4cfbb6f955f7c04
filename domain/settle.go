package domain

import (
	"context"
	"errors"
	"fmt"
)

// ErrDeclined marks an error of Book, LaunchFleet or DeleteFleet that is
// the cloud's definitive answer: the action was not done (no capacity, a
// bad request, a refused payment). Wrap it (fmt.Errorf("…: %w: %v",
// ErrDeclined, apiErr)) so the ledger records "failed". Any other error —
// a timeout, a lost connection, a server fault — leaves the outcome
// unknown, and the ledger reconciles it instead of retrying.
var ErrDeclined = errors.New("declined by the provider")

// ErrInvalidQuery is matched by a provider's refusal of a search whose
// terms it does not sell (a duration, a GPU, a count, a start out of its
// range): the user's input was wrong, and the command exits 2 with the
// provider's message, which names the value and what is accepted.
var ErrInvalidQuery = errors.New("invalid query")

// InvalidQueryf formats an error that matches ErrInvalidQuery and reads
// as its message alone.
func InvalidQueryf(format string, args ...any) error {
	return invalidQuery{fmt.Sprintf(format, args...)}
}

type invalidQuery struct{ msg string }

func (e invalidQuery) Error() string        { return e.msg }
func (e invalidQuery) Is(target error) bool { return target == ErrInvalidQuery }

// FleetFinder is a FleetLauncher that can find a fleet by the client token
// it was launched with, so an intent whose answer was lost can be settled
// (AWS: DescribeFleets and match FleetData.ClientToken). It returns nil,
// nil when no fleet has the token.
type FleetFinder interface {
	FindFleet(ctx context.Context, region, clientToken string) (*Fleet, error)
}

// BookingRememberer is a provider that forgets its bookings when the
// process ends (the simulated market). The ledger tells it, at start, the
// offerings that are booked, so it neither sells them again nor denies
// having sold them.
type BookingRememberer interface {
	RememberBookings(booked []BookedOffering)
}

// BookedOffering is an offering the ledger holds as bought (or being
// bought), with what is known of the booking.
type BookedOffering struct {
	Offering Offering
	Booking  Booking
}

// BookingReleaser is a Booker whose bookings bill until they are released
// (an Azure capacity reservation has no end date of its own): the ledger
// releases each one when its window ends, so a fixed-window booking costs
// its window and no more.
type BookingReleaser interface {
	ReleaseBooking(ctx context.Context, b Booking) error
}
