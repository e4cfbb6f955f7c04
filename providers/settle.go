package providers

import (
	"context"
	"errors"
)

// ErrDeclined marks an error of Book, LaunchFleet or DeleteFleet that is
// the cloud's definitive answer: the action was not done (no capacity, a
// bad request, a refused payment). Wrap it (fmt.Errorf("…: %w: %v",
// ErrDeclined, apiErr)) so the ledger records "failed". Any other error —
// a timeout, a lost connection, a server fault — leaves the outcome
// unknown, and the ledger reconciles it instead of retrying.
var ErrDeclined = errors.New("declined by the provider")

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
