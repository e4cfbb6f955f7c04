package domain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// OfferingQuery asks for capacity blocks: GPU model, size, duration and the start's range.
type OfferingQuery struct {
	GPU                     string
	Instances               int // 0: GPUs, rounded up to whole instances
	GPUs                    int
	Duration                time.Duration
	StartAfter, StartBefore time.Time // zero: now and the furthest the cloud allows
	Regions                 []string
	FlexDuration            time.Duration // also accept lengths this far off (FlexLength)
	Kinds                   []string      // the ledger kinds wanted; none: every kind
}

// WantsKind reports whether the query asks for offerings of the kind.
func (q OfferingQuery) WantsKind(kind string) bool {
	return len(q.Kinds) == 0 || slices.Contains(q.Kinds, kind)
}

// OnlyKind reports whether the query asks for the kind and no other.
func (q OfferingQuery) OnlyKind(kind string) bool { return len(q.Kinds) == 1 && q.Kinds[0] == kind }

// Segment is one window of reserved capacity an offering holds; a block has one.
type Segment struct {
	InstanceType  string    `json:"instance_type"`
	InstanceCount int       `json:"instance_count"`
	Zone          string    `json:"zone"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
}

// Target resources a training plan is sold for: it serves only the one it was bought for.
const (
	TargetTrainingJob     = "training-job"
	TargetHyperPodCluster = "hyperpod-cluster"
)

// Offering is a capacity block (or a fixed-window reservation) on sale.
type Offering struct {
	ID               string // the cloud's ("cb-…"), or made from the terms
	Provider         string
	Cloud            Cloud
	Region, Zone     string
	InstanceType     string
	GPU              GPUSpec
	InstanceCount    int
	Start, End       time.Time
	UpfrontUSD       float64 // the total for the window
	HourlyUSD        float64 // per hour held, every instance, when billed by the hour
	Currency         string
	Simulated        bool
	Note             string // terms the fields do not say, shown before confirming
	StartsOnPurchase bool   // Start is then the search time
	Kind             string // KindBlock or KindReservation: see Terms
	FlexLength       bool   `json:",omitempty"` // not the asked length (OfferingQuery.FlexDuration)
	// Segments are the windows a training plan holds, in order; nil for one window (Start–End).
	Segments       []Segment `json:",omitempty"`
	TargetResource string    `json:",omitempty"` // what a training plan serves: TargetTrainingJob …
}

// Windows are the offering's segments, or its one window as a segment.
func (o Offering) Windows() []Segment {
	if len(o.Segments) > 0 {
		return o.Segments
	}
	return []Segment{{InstanceType: o.InstanceType, InstanceCount: o.InstanceCount, Zone: o.Zone, Start: o.Start, End: o.End}}
}

// DurationHours is the block's length in hours.
func (o Offering) DurationHours() float64 { return o.End.Sub(o.Start).Hours() }

// GPUCount counts every GPU in the block.
func (o Offering) GPUCount() float64 { return o.GPU.Count * float64(o.InstanceCount) }

// HeldHours are the hours the offering holds capacity: its segments' sum, without the gaps between them.
func (o Offering) HeldHours() float64 {
	if len(o.Segments) == 0 {
		return o.DurationHours()
	}
	h := 0.0
	for _, s := range o.Segments {
		h += s.End.Sub(s.Start).Hours()
	}
	return h
}

// USDPerGPUHour is the upfront fee spread over every GPU-hour the offering holds.
func (o Offering) USDPerGPUHour() float64 {
	gh := o.GPUCount() * o.HeldHours()
	if gh <= 0 {
		return math.NaN()
	}
	return o.UpfrontUSD / gh
}

// BookRequest asks a Booker to buy an offering.
type BookRequest struct {
	Offering Offering
	DryRun   bool
	After    time.Time // when the intent was recorded; reconciliation looks after it
	Ref      string    // the ledger's id for the intent, for tags
	Actor    string    // who buys, for TagActor
}

// Booking is what a purchase bought (or, with DryRun, would buy).
type Booking struct {
	ProviderRef   string // the cloud's id: "cr-…", an Azure resource id
	Provider      string
	Region, Zone  string
	InstanceType  string
	InstanceCount int
	Start, End    time.Time
	CostUSD       float64
	State         string // a ledger state
	DryRun        bool
	Message       string // the cloud's own answer, shown to the user
}

// DryRunAnswer is a dry run's Message without its own "dry run:" lead, or def if empty.
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
	Provider       string
	Region         string
	InstanceTypes  []string
	Zones          []string // empty: any
	TargetCapacity int      // instances in all
	OnDemandBase   int      // of them on-demand, the rest spot
	Strategy       string
	MaxPriceUSD    *float64 // per instance-hour; nil: the on-demand price
	LaunchTemplate string   // AWS's id, or Azure's image and network from config
	ClientToken    string   // the ledger intent's id, for idempotency
	DryRun         bool
	Actor          string    // who launches, for TagActor
	Start          time.Time `json:",omitzero"` // zero: now
	End            time.Time `json:",omitzero"` // zero: until deleted
}

// Scheduled reports whether the spec starts after now or has an end.
func (s FleetSpec) Scheduled(now time.Time) bool { return s.Start.After(now) || !s.End.IsZero() }

// Bounds of a fleet's schedule: gpumarket's own (docs/DESIGN.md, "Scheduled fleets").
const (
	MaxFleetLead   = MaxWindow
	MinFleetLength = 5 * time.Minute
	MaxFleetLength = MaxWindow
)

// FleetLengthForm is what a fleet's length may be, for messages.
const FleetLengthForm = "a whole number and a unit m, h, d or w (such as 90m, 3h or 2d), from 5m to 90d"

// MaxInstances bounds any instance count sent: past it is a typo, or wraps in 32-bit fields.
const MaxInstances = 10_000

// FleetError is a fleet's term out of bounds. Field is the form's name of it
// (start, for, target, on-demand-base, strategy, max-price), Value as typed
// (strings quoted); each screen names Field its own way, Why is the same.
type FleetError struct {
	Field, Value, Why string
}

func (e *FleetError) Error() string { return fmt.Sprintf("%s %s: %s", e.Field, e.Value, e.Why) }

// CheckTerms refuses a fleet's size, split, strategy or max price that no
// launch takes; an empty strategy is the default.
func (s FleetSpec) CheckTerms() error {
	switch n, od := s.TargetCapacity, s.OnDemandBase; {
	case n < 1 || n > MaxInstances:
		return &FleetError{"target", strconv.Itoa(n), fmt.Sprintf("want a whole number of instances, 1 to %d", MaxInstances)}
	case od < 0 || od > n:
		return &FleetError{"on-demand-base", strconv.Itoa(od), fmt.Sprintf("want 0 to the target (%d)", n)}
	case s.Strategy != "" && !slices.Contains(Strategies, s.Strategy):
		return &FleetError{"strategy", strconv.Quote(s.Strategy), "want one of " + strings.Join(Strategies, ", ")}
	case s.MaxPriceUSD != nil && (!(*s.MaxPriceUSD > 0) || math.IsInf(*s.MaxPriceUSD, 0)):
		return &FleetError{"max-price", fmt.Sprint(*s.MaxPriceUSD), "want a positive price in $ per instance-hour"}
	}
	return nil
}

// ParseFleetSchedule reads a typed start (as ParseWhen; "": now) and length ("": until deleted).
func ParseFleetSchedule(start, length string, now time.Time) (from, to time.Time, err error) {
	if s := strings.TrimSpace(start); s != "" {
		if from, err = ParseWhen(s, now); err != nil {
			why := "want " + WhenForm
			if strings.Contains(err.Error(), "90 days") {
				why = "more than 90 days ahead"
			}
			return time.Time{}, time.Time{}, &FleetError{Field: "start", Value: strconv.Quote(start), Why: why}
		}
		switch {
		case !from.After(now):
			return time.Time{}, time.Time{}, &FleetError{Field: "start", Value: strconv.Quote(start), Why: fmt.Sprintf("%s has passed (now %s): want a time ahead",
				from.In(now.Location()).Format("Mon 2006-01-02 15:04 MST"), now.Format("Mon 2006-01-02 15:04 MST"))}
		case from.Sub(now) > MaxFleetLead:
			return time.Time{}, time.Time{}, &FleetError{Field: "start", Value: strconv.Quote(start), Why: fmt.Sprintf("a fleet is scheduled at most %d days ahead", int(MaxFleetLead.Hours()/24))}
		}
	}
	if s := strings.TrimSpace(length); s != "" {
		d, err := ParseSpan(s, "mhdw", MaxFleetLength)
		switch {
		case errors.Is(err, ErrSpanTooLong):
			return time.Time{}, time.Time{}, &FleetError{Field: "for", Value: strconv.Quote(length), Why: fmt.Sprintf("a scheduled fleet lasts at most %d days; want %s", int(MaxFleetLength.Hours()/24), FleetLengthForm)}
		case err != nil || d < MinFleetLength:
			return time.Time{}, time.Time{}, &FleetError{Field: "for", Value: strconv.Quote(length), Why: "want " + FleetLengthForm}
		}
		base := from
		if base.IsZero() {
			base = now
		}
		to = base.Add(d)
	}
	return from, to, nil
}

// CheckSchedule checks the schedule's bounds at now; a start that has passed means now.
func (s FleetSpec) CheckSchedule(now time.Time) error {
	start := Later(s.Start, now)
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

// FleetValidator checks and completes a spec without a call, before it becomes a ledger row.
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

// CostTerms says how the offering is paid, total first, for a confirmation.
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
	if !o.Terms().Upfront {
		return fmt.Sprintf("Total: $%.2f %s for the window, billed from its start to its end whether used or not · $%.4f per GPU-hour", o.UpfrontUSD, cur, o.USDPerGPUHour())
	}
	return fmt.Sprintf("Total upfront: $%.2f %s, non-refundable · $%.4f per GPU-hour", o.UpfrontUSD, cur, o.USDPerGPUHour())
}

// PlanTerms are a confirmation's lines of a multi-window or no-dry-run offering.
func (o Offering) PlanTerms() []string {
	var out []string
	if len(o.Segments) > 0 {
		for i, s := range o.Segments {
			out = append(out, fmt.Sprintf("segment %d of %d: %d × %s in %s, %s to %s UTC (%g h)", i+1, len(o.Segments), s.InstanceCount, s.InstanceType,
				s.Zone, s.Start.UTC().Format("Mon 2006-01-02 15:04"), s.End.UTC().Format("Mon 2006-01-02 15:04"), s.End.Sub(s.Start).Hours()))
		}
		out = append(out, fmt.Sprintf("held %g h in all; no capacity between the segments", o.HeldHours()))
	}
	if o.TargetResource != "" {
		out = append(out, "serves only: "+o.TargetResource+" (a plan for training jobs cannot hold a HyperPod cluster, nor the other way)")
	}
	if o.Terms().NoDryRun {
		out = append(out, fmt.Sprintf("no dry run: %s cannot check a purchase without making it; --dry-run re-reads the terms and sends nothing", o.Terms().Name+"s"))
	}
	return out
}

// ErrDeclined, wrapped, marks the cloud's definite "no": nothing was done ("failed").
var ErrDeclined = errors.New("declined by the provider")

// MarkDeclined wraps err as a definite "no": it matches ErrDeclined and reads as err.
func MarkDeclined(err error) error { return declined{err} }

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

// Tags on every purchase and launch make the cloud a second record (docs/DESIGN.md, "Money").
const (
	TagRef      = "gpumarket:ref"
	TagActor    = "gpumarket:actor" // "alice@host", "ssh:SHA256:… alice"
	TagTool     = "gpumarket:tool"
	TagOffering = "gpumarket:offering"
	ToolName    = "gpumarket" // TagTool's value
)

// Tags returns the tags of a purchase or launch, without empty values (clouds refuse them).
func Tags(ref, actor, offeringID string) map[string]string {
	out := map[string]string{TagTool: ToolName}
	for k, v := range map[string]string{TagRef: ref, TagActor: actor, TagOffering: offeringID} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// ErrOfferingGone is matched by RefreshOffering's error when the offering is off sale.
var ErrOfferingGone = errors.New("the offering is no longer on sale")

// OfferingRefresher describes an offering again as sold now, so only fresh terms are bought.
type OfferingRefresher interface {
	RefreshOffering(ctx context.Context, o Offering) (Offering, error)
}

// CloudRecord is what a cloud's tags show of one thing gpumarket bought or launched.
type CloudRecord struct {
	Kind          string
	Ref           string // TagRef's; "" when untagged
	Actor         string
	OfferingID    string
	ProviderRef   string // "cr-…", "fleet-…", an Azure id
	Provider      string
	Cloud         Cloud
	Region, Zone  string
	InstanceType  string
	InstanceCount int
	Start, End    time.Time
	CostUSD       float64 // NaN if unknown
	State         string  // a ledger state
	CreatedAt     time.Time
}

// RecordLister lists what a provider shows of gpumarket's doings since a time, from tags.
type RecordLister interface {
	ListRecords(ctx context.Context, since time.Time) ([]CloudRecord, error)
}

// SortRecords orders records by creation, then by the provider's id.
func SortRecords(rs []CloudRecord) {
	slices.SortStableFunc(rs, func(a, b CloudRecord) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ProviderRef, b.ProviderRef))
	})
}
