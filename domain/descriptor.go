package domain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Descriptor says what a provider is and what it can do. The layers above
// the providers (the booking service, the hub, the TUI, the commands) ask
// it, and never compare a provider's name: adding a cloud is its package
// and one row in cmd's provider table, not an edit wherever "aws" or
// "sim" was spelled out.
type Descriptor struct {
	// Name is the provider's name as users write it (--provider): it
	// equals Provider.Name.
	Name string
	// Cloud is the cloud the provider speaks for; "" for one that
	// imitates several (the simulated market). Each Pool and Offering
	// still names its own cloud.
	Cloud Cloud
	// Simulated is set when nothing the provider shows or sells is real:
	// every screen says so, and nothing it "buys" costs money.
	Simulated bool
	// Ephemeral is set when the provider keeps what it sold and launched
	// in the memory of the process that did it: a purchase or launch it
	// does not know of was lost with that process (nothing was spent),
	// and a fleet it cannot find ended with it.
	Ephemeral bool
	// IsRegion reports whether the provider has the region; nil means it
	// takes any region name. RegionExample names one, for messages.
	IsRegion      func(string) bool
	RegionExample string
	// Sells lists the terms of the offerings the provider sells; empty
	// when it sells none.
	Sells []*BookingTerms
	// SchedulesFleets is set when the provider's cloud keeps a fleet's
	// schedule (FleetSpec.Start and End): it launches the fleet at Start
	// and ends it at End, whether or not gpumarket runs then. For a
	// provider without it, the booking service keeps the schedule: it
	// records the fleet scheduled and its reconcile loop (a running TUI or
	// serve, or `gpumarket ledger`) sends the launch at Start and the
	// delete at End.
	SchedulesFleets bool
	// Declined reports whether an error of a purchase, launch or delete
	// is the provider's definite "no" (nothing was done), as opposed to a
	// lost answer after which the action may or may not have happened.
	// It is asked only for errors that do not already match ErrDeclined
	// and are not a cancelled or expired context; nil answers false.
	Declined func(error) bool
}

// KnowsRegion reports whether the provider has the region.
func (d Descriptor) KnowsRegion(r string) bool { return d.IsRegion == nil || d.IsRegion(r) }

// IsDeclined reports whether err, returned by a call that spends money,
// is the provider's definite "no". A cancelled or expired context never
// is: the call may have reached the cloud.
func (d Descriptor) IsDeclined(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrDeclined) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	return d.Declined != nil && d.Declined(err)
}

// Ledger kinds of what is bought: the kinds of the ledger's rows.
const (
	KindBlock       = "block"
	KindReservation = "reservation"
	KindFleet       = "fleet"
)

// BookingTerms are the rules a kind of offering is sold on. Each exists
// once (CapacityBlockTerms, ReservationTerms), and every provider, fake and
// view that needs them asks these values.
type BookingTerms struct {
	// Kind is the ledger kind an offering on these terms makes.
	Kind string
	// Name is what users call it: "capacity block".
	Name string
	// MaxInstances is the most instances one offering holds.
	MaxInstances int
	// MaxLead is how far ahead a start may be; 0 when the capacity starts
	// when bought.
	MaxLead time.Duration
	// StartsOnPurchase is set when the capacity starts the moment it is
	// bought (Azure's capacity reservations cannot be scheduled).
	StartsOnPurchase bool
	// Upfront is set when the whole price is paid at purchase and is not
	// refunded; otherwise the capacity bills by the hour until released.
	Upfront bool
	// StartOfDayUTC is the time of day (UTC) the capacity starts and ends
	// when it is scheduled, and HasStartOfDay says whether there is one.
	StartOfDayUTC time.Duration
	HasStartOfDay bool
	// MaxDuration is the longest duration sold.
	MaxDuration time.Duration
	// DurationForm names the durations that may be asked for, for
	// messages.
	DurationForm string
	// validHours reports whether a request may ask for so many hours.
	validHours func(h int) bool
}

// CapacityBlockTerms are AWS EC2 Capacity Blocks for ML: 1-14 days in
// 1-day steps, then 7-day steps to 182 days; up to 64 instances; starting
// at 11:30 UTC up to 8 weeks ahead; paid up front, non-refundable. (AWS
// also answers a search with blocks of other lengths and starts: these
// are the terms of what may be asked for.)
var CapacityBlockTerms = &BookingTerms{
	Kind:          KindBlock,
	Name:          "capacity block",
	MaxInstances:  64,
	MaxLead:       8 * 7 * 24 * time.Hour,
	Upfront:       true,
	StartOfDayUTC: 11*time.Hour + 30*time.Minute,
	HasStartOfDay: true,
	MaxDuration:   182 * 24 * time.Hour,
	DurationForm:  "1 to 14 days in 1-day steps (whole days: 24h … 336h), or 21 to 182 days in 7-day steps (whole weeks: 504h … 4368h)",
	validHours: func(h int) bool {
		switch {
		case h >= 24 && h <= 336:
			return h%24 == 0
		case h > 336 && h <= 4368:
			return h%168 == 0
		}
		return false
	},
}

// ReservationTerms are Azure's on-demand capacity reservations as
// gpumarket sells them for a window: they start when made, last any whole
// number of hours, and bill at the on-demand rate by the hour until they
// are deleted.
var ReservationTerms = &BookingTerms{
	Kind:             KindReservation,
	Name:             "capacity reservation",
	StartsOnPurchase: true,
	MaxDuration:      182 * 24 * time.Hour,
	DurationForm:     "any whole number of hours up to 182 days",
	validHours:       func(h int) bool { return h >= 1 && h <= 4368 },
}

// ValidHours reports whether a request may ask for so many hours.
func (t *BookingTerms) ValidHours(h int) bool { return t.validHours(h) }

// ValidDuration checks a requested duration against the terms; the error
// names the duration and what is accepted.
func (t *BookingTerms) ValidDuration(d time.Duration) error {
	if d <= 0 || d%time.Hour != 0 || !t.validHours(int(d/time.Hour)) {
		return fmt.Errorf("duration %s: %ss last %s", FormatWindow(d), t.Name, t.DurationForm)
	}
	return nil
}

// StartOfDay returns the first start time of the terms at or after t, or
// t itself when the terms have no fixed time of day.
func (t *BookingTerms) StartOfDay(at time.Time) time.Time {
	if !t.HasStartOfDay {
		return at
	}
	u := at.UTC()
	s := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC).Add(t.StartOfDayUTC)
	if s.Before(u) {
		s = s.Add(24 * time.Hour)
	}
	return s
}

// TermsOfKind returns the terms that make ledger rows of the kind, nil for
// a kind no offering makes.
func TermsOfKind(kind string) *BookingTerms {
	switch kind {
	case KindBlock:
		return CapacityBlockTerms
	case KindReservation:
		return ReservationTerms
	}
	return nil
}

// Terms returns the terms the offering is sold on. Offerings recorded
// before they named their kind (ledger rows of earlier versions) are
// reservations when they start on purchase or come from Azure, which sold
// nothing else, and capacity blocks otherwise.
func (o Offering) Terms() *BookingTerms {
	if t := TermsOfKind(o.Kind); t != nil {
		return t
	}
	if o.StartsOnPurchase || o.Cloud == CloudAzure {
		return ReservationTerms
	}
	return CapacityBlockTerms
}
