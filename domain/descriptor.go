package domain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Descriptor says what a provider is and can do: code above the providers asks it, never a name.
type Descriptor struct {
	Name            string            // as users write it: Provider.Name
	Cloud           Cloud             // "" when it imitates several (sim)
	CloudTitle      string            // the cloud as people write it: "AWS", "Google Cloud"
	Simulated       bool              // nothing it shows or sells is real
	Ephemeral       bool              // what it sold lives in its process's memory
	IsRegion        func(string) bool // nil: any region
	RegionExample   string
	Sells           []*BookingTerms  // the terms of what it sells
	SchedulesFleets bool             // its cloud launches and ends a fleet at Start and End
	RecordedHistory bool             // no published price history: only what gpumarket recorded
	Declined        func(error) bool // whether an error is a definite "no"; see IsDeclined
}

// CloudName is the cloud as people write it: CloudTitle, else Cloud.
func (d Descriptor) CloudName() string {
	if d.CloudTitle != "" {
		return d.CloudTitle
	}
	return string(d.Cloud)
}

// KnowsRegion reports whether the provider has the region.
func (d Descriptor) KnowsRegion(r string) bool { return d.IsRegion == nil || d.IsRegion(r) }

// IsDeclined reports whether a paid call's err is a definite "no"; a context's end never is.
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
	KindCalendar    = "gcp-calendar"
	// KindTrainingPlan is a SageMaker training plan: reserved capacity in segments.
	KindTrainingPlan = "training-plan"
)

// BookingTerms are the rules a kind of offering is sold on, each kept once here.
type BookingTerms struct {
	Kind             string        // the ledger kind it makes
	Name             string        // what users call it: "capacity block"
	MaxInstances     int           // per offering
	MaxLead          time.Duration // how far ahead a start may be
	StartsOnPurchase bool          // it cannot be scheduled
	Upfront          bool          // paid at purchase, no refund; else billed hourly until released
	StartOfDayUTC    time.Duration // when scheduled capacity starts, if HasStartOfDay
	HasStartOfDay    bool
	MaxDuration      time.Duration
	StopsEarly       time.Duration // how long before the end its instances stop (AWS: 30 min)
	DurationForm     string        // the durations accepted, for messages
	CountForm        string        // the instance counts accepted, if not 1 to MaxInstances
	NoDryRun         bool          // the cloud cannot check a purchase without making it
	validHours       func(h int) bool
	validCount       func(n int) bool
}

// CapacityBlockTerms are AWS EC2 Capacity Blocks for ML (docs/DESIGN.md, "Facts it rests on").
var CapacityBlockTerms = &BookingTerms{
	Kind:          KindBlock,
	Name:          "capacity block",
	MaxInstances:  64,
	MaxLead:       8 * 7 * 24 * time.Hour,
	Upfront:       true,
	StartOfDayUTC: 11*time.Hour + 30*time.Minute,
	HasStartOfDay: true,
	StopsEarly:    30 * time.Minute,
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

// ReservationTerms are Azure's capacity reservations, sold for a window and deleted at its end.
var ReservationTerms = &BookingTerms{
	Kind:             KindReservation,
	Name:             "capacity reservation",
	StartsOnPurchase: true,
	MaxDuration:      182 * 24 * time.Hour,
	DurationForm:     "any whole number of hours up to 182 days",
	validHours:       func(h int) bool { return h >= 1 && h <= 4368 },
}

// CalendarTerms are Google's calendar-mode future reservations (docs/DESIGN.md, "Facts it rests on").
var CalendarTerms = &BookingTerms{
	Kind:         KindCalendar,
	Name:         "calendar-mode reservation",
	MaxLead:      8 * 7 * 24 * time.Hour,
	MaxDuration:  90 * 24 * time.Hour,
	DurationForm: "1 to 90 days in 1-day steps (whole days: 24h … 2160h)",
	validHours:   func(h int) bool { return h >= 24 && h <= 2160 && h%24 == 0 },
}

// TrainingPlanTerms are SageMaker training plans (docs/DESIGN.md, "Training plans").
var TrainingPlanTerms = &BookingTerms{
	Kind:         KindTrainingPlan,
	Name:         "training plan",
	MaxInstances: 64,
	MaxLead:      8 * 7 * 24 * time.Hour,
	Upfront:      true,
	// Assumed as for the capacity blocks a plan reserves; no SageMaker page says it.
	StopsEarly:   30 * time.Minute,
	MaxDuration:  182 * 24 * time.Hour,
	DurationForm: "whole days, 1 to 182 (24h … 4368h)",
	validHours:   func(h int) bool { return h >= 24 && h <= 4368 && h%24 == 0 },
	validCount:   func(n int) bool { return n > 0 && n <= 64 && n&(n-1) == 0 },
	CountForm:    "1, 2, 4, 8, 16, 32 or 64 instances",
	NoDryRun:     true,
}

// ValidCount reports whether an offering of the terms may hold n instances.
func (t *BookingTerms) ValidCount(n int) bool {
	if t.validCount != nil {
		return t.validCount(n)
	}
	return n >= 1 && (t.MaxInstances == 0 || n <= t.MaxInstances)
}

// ValidInstances checks an instance count against the terms, naming what is accepted.
func (t *BookingTerms) ValidInstances(n int) error {
	if t.ValidCount(n) {
		return nil
	}
	form := t.CountForm
	if form == "" {
		form = fmt.Sprintf("1 to %d instances", t.MaxInstances)
	}
	return fmt.Errorf("count %d: %ss hold %s", n, t.Name, form)
}

// ValidHours reports whether a request may ask for so many hours.
func (t *BookingTerms) ValidHours(h int) bool { return t.validHours(h) }

// ValidDuration checks a duration against the terms, naming what is accepted.
func (t *BookingTerms) ValidDuration(d time.Duration) error {
	if d <= 0 || d%time.Hour != 0 || !t.validHours(int(d/time.Hour)) {
		return fmt.Errorf("duration %s: %ss last %s", FormatWindow(d), t.Name, t.DurationForm)
	}
	return nil
}

// StartOfDay returns the terms' first start at or after t (t with no fixed time of day).
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

// TermsOfKind returns the terms that make ledger rows of the kind, or nil.
func TermsOfKind(kind string) *BookingTerms {
	for _, t := range AllTerms {
		if t.Kind == kind {
			return t
		}
	}
	return nil
}

// AllTerms are the terms of every kind of offering gpumarket sells.
var AllTerms = []*BookingTerms{CapacityBlockTerms, ReservationTerms, CalendarTerms, TrainingPlanTerms}

// Terms returns the terms the offering is sold on: by Kind, else by how it starts and its cloud.
func (o Offering) Terms() *BookingTerms {
	if t := TermsOfKind(o.Kind); t != nil {
		return t
	}
	if o.StartsOnPurchase || o.Cloud == CloudAzure {
		return ReservationTerms
	}
	return CapacityBlockTerms
}
