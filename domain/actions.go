package domain

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// OfferingQuery asks for capacity blocks: GPU model, size, duration and
// the range the start may fall in.
type OfferingQuery struct {
	GPU string
	// Instances is the number of instances wanted. When zero, GPUs is
	// used and rounded up to whole instances of each type.
	Instances int
	GPUs      int
	Duration  time.Duration
	// StartAfter and StartBefore bound the block's start; zero means now
	// and the furthest the cloud allows (8 weeks for AWS).
	StartAfter, StartBefore time.Time
	Regions                 []string
	// FlexDuration, when positive, also accepts offerings whose length
	// differs from Duration by at most this much (AWS answers a search
	// with blocks of other lengths: one a little shorter, one a little
	// longer, ending at the same time of day). They are marked
	// FlexLength and ranked after those of the asked length. Zero keeps
	// only offerings of exactly Duration (`--flex-duration`).
	FlexDuration time.Duration
}

// Offering is a capacity block (or a fixed-window reservation) on sale.
type Offering struct {
	// ID is the cloud's offering id (AWS "cb-…"); for clouds that have no
	// offering ids, one gpumarket makes from the terms.
	ID            string
	Provider      string
	Cloud         Cloud
	Region, Zone  string
	InstanceType  string
	GPU           GPUSpec
	InstanceCount int
	Start, End    time.Time
	// UpfrontUSD is the offering's total for its window: a capacity
	// block's fee, or what a reservation billed by the hour costs over
	// the asked duration.
	UpfrontUSD float64
	// HourlyUSD is what the offering bills per hour while it is held,
	// every instance together, when it bills by the hour (Azure's
	// capacity reservations); 0 for one paid up front.
	HourlyUSD float64
	Currency  string
	Simulated bool
	// Note is what a buyer must know of the terms that the fields do not
	// say, shown before the confirmation; "" when there is nothing. Azure:
	// a capacity reservation starts now and bills until it is deleted.
	Note string
	// StartsOnPurchase is set when the reservation starts the moment it
	// is bought (Azure's capacity reservations cannot be scheduled): Start
	// is then the search time, and the offering stays bookable after it.
	StartsOnPurchase bool
	// Kind is the ledger kind the offering makes (KindBlock,
	// KindReservation): which BookingTerms it is sold on. See Terms.
	Kind string
	// FlexLength is set when the offering's length is not the duration
	// asked for: it was kept because the query allowed a flexible length
	// (OfferingQuery.FlexDuration), and is shown as such.
	FlexLength bool `json:",omitempty"`
}

// DurationHours is the block's length in hours.
func (o Offering) DurationHours() float64 { return o.End.Sub(o.Start).Hours() }

// GPUCount counts every GPU in the block.
func (o Offering) GPUCount() float64 { return o.GPU.Count * float64(o.InstanceCount) }

// USDPerGPUHour is the upfront fee spread over every GPU-hour of the block.
func (o Offering) USDPerGPUHour() float64 {
	gh := o.GPUCount() * o.DurationHours()
	if gh <= 0 {
		return math.NaN()
	}
	return o.UpfrontUSD / gh
}

// BookRequest asks a Booker to buy an offering.
type BookRequest struct {
	Offering Offering
	DryRun   bool
	// After is when the intent was recorded: a reconciliation looks only
	// at reservations made since.
	After time.Time
	// Ref is the ledger's id for the intent, for tagging where the cloud
	// allows it.
	Ref string
	// Actor is who buys, for tagging (TagActor).
	Actor string
}

// Booking is what a purchase bought (or, with DryRun, would buy).
type Booking struct {
	// ProviderRef is the cloud's id: "cr-…", an Azure resource id.
	ProviderRef   string
	Provider      string
	Region, Zone  string
	InstanceType  string
	InstanceCount int
	Start, End    time.Time
	CostUSD       float64
	// State is one of the ledger states: "scheduled", "active", "ended",
	// "failed", "deleted".
	State  string
	DryRun bool
	// Message is the cloud's own answer, shown to the user (a dry-run's
	// "would succeed", say).
	Message string
}

// DryRunAnswer is a provider's dry-run Message without its own "dry run:"
// lead (AWS's messages and the fakes' carry one; every confirmation writes
// its own), or def when the provider said nothing.
func DryRunAnswer(msg, def string) string {
	msg = strings.TrimSpace(msg)
	if len(msg) >= 8 && strings.EqualFold(msg[:8], "dry run:") {
		msg = strings.TrimSpace(msg[8:])
	}
	if msg == "" {
		return def
	}
	return msg
}

// Allocation strategies of a spot fleet.
const (
	StrategyPriceCapacityOptimized = "price-capacity-optimized"
	StrategyCapacityOptimized      = "capacity-optimized"
	StrategyLowestPrice            = "lowest-price"
	StrategyDiversified            = "diversified"
)

// Strategies lists the accepted allocation strategies, default first.
var Strategies = []string{StrategyPriceCapacityOptimized, StrategyCapacityOptimized, StrategyLowestPrice, StrategyDiversified}

// FleetSpec describes a spot fleet to launch.
type FleetSpec struct {
	Provider      string
	Region        string
	InstanceTypes []string
	// Zones restricts the fleet to these zones; empty means any.
	Zones []string
	// TargetCapacity is the number of instances in all.
	TargetCapacity int
	// OnDemandBase of them are on-demand, the rest spot.
	OnDemandBase int
	Strategy     string
	// MaxPriceUSD caps the spot price per instance-hour; nil means the
	// on-demand price.
	MaxPriceUSD *float64
	// LaunchTemplate is the AWS launch template id (or the Azure image
	// and network profile named in config).
	LaunchTemplate string
	// ClientToken makes the launch idempotent: the ledger intent's id.
	ClientToken string
	DryRun      bool
	// Actor is who launches, for tagging (TagActor).
	Actor string
	// Start and End schedule the fleet. Zero Start means now; zero End
	// means it runs until deleted. A provider whose descriptor says
	// SchedulesFleets has its cloud launch it at Start and end it at End,
	// whether or not gpumarket is running then; for the others the booking
	// service keeps the schedule (it sends the launch at Start and the
	// delete at End), and a provider given them may ignore them.
	Start time.Time `json:",omitzero"`
	End   time.Time `json:",omitzero"`
}

// Scheduled reports whether the spec has a schedule: a start after now,
// or an end.
func (s FleetSpec) Scheduled(now time.Time) bool { return s.Start.After(now) || !s.End.IsZero() }

// Bounds of a fleet's schedule. The clouds document no limit on how far
// ahead an EC2 Fleet's ValidFrom may be; these are gpumarket's own: the
// horizon of its other schedules (ParseWhen's offsets, history), so that
// a schedule kept by gpumarket does not outlive the people who set it
// without anyone noticing.
const (
	// MaxFleetLead is how far ahead a fleet may be scheduled to start.
	MaxFleetLead = MaxWindow
	// MinFleetLength and MaxFleetLength bound a scheduled fleet's
	// length. AWS refuses a ValidUntil within a minute of the start; a
	// fleet kept by gpumarket's minute loop needs a few.
	MinFleetLength = 5 * time.Minute
	MaxFleetLength = MaxWindow
)

// FleetLengthForm is what a fleet's length may be, for messages.
const FleetLengthForm = "a whole number and a unit m, h, d or w (such as 90m, 3h or 2d), from 5m to 90d"

// ScheduleError is a fleet schedule typed wrong: Field is "start" or
// "for" (the CLI's --start and --for, the Fleet form's Start and For),
// Value what was typed, Why what is wrong and what is accepted.
type ScheduleError struct {
	Field, Value, Why string
}

func (e *ScheduleError) Error() string { return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Why) }

// ParseFleetSchedule reads a fleet's schedule as people type it, the same
// in the CLI and the TUI: start in any form ParseWhen reads (empty: now),
// ahead of now by at most MaxFleetLead; length a span of minutes, hours,
// days or weeks (empty: until deleted) from MinFleetLength to
// MaxFleetLength, counted from the start. Errors are *ScheduleError.
func ParseFleetSchedule(start, length string, now time.Time) (from, to time.Time, err error) {
	if s := strings.TrimSpace(start); s != "" {
		if from, err = ParseWhen(s, now); err != nil {
			why := "want " + WhenForm
			if strings.Contains(err.Error(), "90 days") {
				why = "more than 90 days ahead"
			}
			return time.Time{}, time.Time{}, &ScheduleError{Field: "start", Value: start, Why: why}
		}
		switch {
		case !from.After(now):
			return time.Time{}, time.Time{}, &ScheduleError{Field: "start", Value: start, Why: fmt.Sprintf("%s has passed (now %s): want a time ahead",
				from.In(now.Location()).Format("Mon 2006-01-02 15:04 MST"), now.Format("Mon 2006-01-02 15:04 MST"))}
		case from.Sub(now) > MaxFleetLead:
			return time.Time{}, time.Time{}, &ScheduleError{Field: "start", Value: start, Why: fmt.Sprintf("a fleet is scheduled at most %d days ahead", int(MaxFleetLead.Hours()/24))}
		}
	}
	if s := strings.TrimSpace(length); s != "" {
		d, err := ParseSpan(s, "mhdw", MaxFleetLength)
		switch {
		case errors.Is(err, ErrSpanTooLong):
			return time.Time{}, time.Time{}, &ScheduleError{Field: "for", Value: length, Why: fmt.Sprintf("a scheduled fleet lasts at most %d days; want %s", int(MaxFleetLength.Hours()/24), FleetLengthForm)}
		case err != nil || d < MinFleetLength:
			return time.Time{}, time.Time{}, &ScheduleError{Field: "for", Value: length, Why: "want " + FleetLengthForm}
		}
		base := from
		if base.IsZero() {
			base = now
		}
		to = base.Add(d)
	}
	return from, to, nil
}

// CheckSchedule checks a fleet's schedule against now: an end after the
// start (or now, for a fleet that starts now) by at least MinFleetLength
// and at most MaxFleetLength, a start at most MaxFleetLead ahead. A start
// that has come (a confirmation left open past it) means now. The error
// names the field and what is accepted.
func (s FleetSpec) CheckSchedule(now time.Time) error {
	start := s.Start
	if start.Before(now) {
		start = now
	}
	if start.Sub(now) > MaxFleetLead {
		return fmt.Errorf("fleet start %s: at most %d days ahead", s.Start.UTC().Format(time.RFC3339), int(MaxFleetLead.Hours()/24))
	}
	if s.End.IsZero() {
		return nil
	}
	switch d := s.End.Sub(start); {
	case d < MinFleetLength:
		return fmt.Errorf("fleet end %s: want at least %s after the start (%s)", s.End.UTC().Format(time.RFC3339), FormatWindow(MinFleetLength), start.UTC().Format(time.RFC3339))
	case d > MaxFleetLength:
		return fmt.Errorf("fleet end %s: a scheduled fleet lasts at most %d days", s.End.UTC().Format(time.RFC3339), int(MaxFleetLength.Hours()/24))
	}
	return nil
}

// FleetValidator is a FleetLauncher that can check a spec against what
// its API takes without any call (counts, pools, a schedule), and fill its
// defaults: the booking service asks it before recording an intent, so a
// spec the cloud would refuse never becomes a ledger row.
type FleetValidator interface {
	ValidateFleet(spec FleetSpec) (FleetSpec, error)
}

// Fleet is a launched fleet's state.
type Fleet struct {
	ID            string // "fleet-…", an Azure scale set id
	Provider      string
	Region        string
	State         string // ledger state
	Instances     int    // running instances
	Target        int
	EstimatedUSDh float64 // current cost per hour, 0 if unknown
	DryRun        bool
	Message       string
}

// CostTerms says, for a confirmation, how the offering is paid: a capacity
// block's fee up front and non-refundable, or a reservation billed by the
// hour until it is deleted — with the total first either way.
func (o Offering) CostTerms() string {
	cur := o.Currency
	if cur == "" {
		cur = "USD"
	}
	if o.StartsOnPurchase {
		rate := ""
		if o.HourlyUSD > 0 {
			rate = fmt.Sprintf(" ($%.2f an hour)", o.HourlyUSD)
		}
		return fmt.Sprintf("Estimated cost: $%.2f %s to the end of the window%s, billed by the hour from purchase until the reservation is deleted (a running gpumarket, or `gpumarket ledger`, deletes it when the window ends) · $%.4f per GPU-hour",
			o.UpfrontUSD, cur, rate, o.USDPerGPUHour())
	}
	return fmt.Sprintf("Total upfront: $%.2f %s, non-refundable · $%.4f per GPU-hour", o.UpfrontUSD, cur, o.USDPerGPUHour())
}
