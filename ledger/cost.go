package ledger

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

// unboundedHold is how long a fleet with no end is held against the caps.
const unboundedHold = 24 * time.Hour

// Span is when a row's capacity ran; zero for a row that never ran or failed.
func Span(r Entry) (start, end time.Time) {
	if r.State == StateFailed || (r.Kind == KindFleet && r.ProviderRef == "") {
		return time.Time{}, time.Time{}
	}
	start, end = r.Start, r.End
	if r.Kind != KindFleet {
		return start, end
	}
	if start.IsZero() {
		start = r.CreatedAt
	}
	if end.IsZero() && (r.State == StateDeleted || r.State == StateEnded) {
		end = r.UpdatedAt
	}
	return start, end
}

// CostUnknown reports whether a row's cost cannot be said.
func CostUnknown(r Entry) bool {
	if r.Kind == KindFleet {
		return math.IsNaN(r.USDHour)
	}
	return math.IsNaN(r.CostUSD)
}

// Figures are a row's money figures at a time; NaN is unknown.
type Figures struct {
	Start, End time.Time
	// Committed is what the row may cost over its known window; NaN with no end.
	Committed float64
	// SoFar is what it has cost up to the time asked (CostSoFar).
	SoFar float64
	// Final is its cost once it is over; NaN before.
	Final float64
}

// FiguresOf is a row's money figures at now, as every view shows them.
func FiguresOf(r Entry, now time.Time) Figures {
	f := Figures{Committed: math.NaN(), Final: math.NaN()}
	f.Start, f.End = Span(r)
	f.SoFar = CostSoFar(r, time.Time{}, now)
	over := r.State == StateEnded || r.State == StateDeleted || r.State == StateFailed
	switch {
	case r.Kind != KindFleet:
		f.Committed = r.CostUSD
		if r.State == StateFailed {
			f.Committed = 0
		}
	case over:
		f.Committed = f.SoFar
	default:
		from, until := holdWindow(r)
		if !r.Schedule.End.IsZero() {
			f.Committed = r.USDHour * until.Sub(from).Hours()
		}
	}
	if over {
		f.Final = f.SoFar
	}
	return f
}

// CostSoFar is what a row cost over [from, to] (zero from: since it began).
func CostSoFar(r Entry, from, to time.Time) float64 {
	start, end := Span(r)
	if start.IsZero() {
		return 0
	}
	if CostUnknown(r) {
		return math.NaN()
	}
	if t := domain.TermsOfKind(r.Kind); t != nil && t.Upfront {
		if from.IsZero() {
			return r.CostUSD
		}
		// Spread over its window, a day at a time, as usage splits it.
		return r.CostUSD * share(start, end, from, to)
	}
	rate := r.USDHour
	if r.Kind != KindFleet {
		if !end.After(start) {
			return math.NaN()
		}
		rate = r.CostUSD / end.Sub(start).Hours()
	}
	if from.IsZero() || from.Before(start) {
		from = start
	}
	if !end.IsZero() && end.Before(to) {
		to = end
	}
	return rate * max(to.Sub(from).Hours(), 0)
}

// share is the part of [start, end] inside [from, to], 0 to 1.
func share(start, end, from, to time.Time) float64 {
	if !end.After(start) {
		return 0
	}
	a, b := domain.Later(start, from), domain.Earlier(end, to)
	return max(b.Sub(a).Hours(), 0) / end.Sub(start).Hours()
}

// holdWindow is when a fleet not over holds its estimate against the caps.
func holdWindow(r Entry) (from, until time.Time) {
	if from, until = runWindow(r); until.IsZero() {
		until = from.Add(unboundedHold)
	}
	return from, until
}

// heldOn is what a row holds against day's cap; an unknown fleet estimate holds 0.
func heldOn(r Entry, day time.Time) float64 {
	next := day.Add(24 * time.Hour)
	if r.State == StateFailed {
		return 0
	}
	if r.Kind != KindFleet {
		if r.CreatedAt.Before(day) || !r.CreatedAt.Before(next) {
			return 0
		}
		return r.CostUSD
	}
	if math.IsNaN(r.USDHour) {
		return 0
	}
	from, until := holdWindow(r)
	if r.State == StateEnded || r.State == StateDeleted {
		if from, until = Span(r); from.IsZero() {
			return 0 // cancelled before its start: nothing ran
		}
	}
	a, b := domain.Later(from, day), domain.Earlier(until, next)
	return r.USDHour * max(b.Sub(a).Hours(), 0)
}

// Hold is a purchase's whole commitment and its part on each UTC day.
type Hold struct {
	Whole float64
	Days  []DayAmount
	// What says the commitment for a refusal: "90d at $4403.20/h".
	What string
}

// DayAmount is an amount on the UTC day starting at Day.
type DayAmount struct {
	Day time.Time
	USD float64
}

// HoldOf is what a row holds against the caps, whole and by UTC day.
func HoldOf(r Entry) Hold {
	h := Hold{}
	if r.Kind != KindFleet {
		day := r.CreatedAt.UTC().Truncate(24 * time.Hour)
		h.Whole = r.CostUSD
		h.Days = []DayAmount{{Day: day, USD: r.CostUSD}}
		return h
	}
	from, until := holdWindow(r)
	h.Whole = r.USDHour * until.Sub(from).Hours()
	h.What = fmt.Sprintf("%s at $%.2f/h", Countdown(until.Sub(from)), r.USDHour)
	if r.Schedule.End.IsZero() {
		h.What = fmt.Sprintf("its first %s at $%.2f/h; it has no end", Countdown(unboundedHold), r.USDHour)
	}
	for d := from.UTC().Truncate(24 * time.Hour); d.Before(until); d = d.Add(24 * time.Hour) {
		h.Days = append(h.Days, DayAmount{Day: d, USD: heldOn(r, d)})
	}
	return h
}

// DayHeld is what the ledger holds against t's UTC day but row except; NaN if a price is unknown.
func (s *Store) DayHeld(ctx context.Context, q sqlitedb.Querier, t time.Time, except string) (float64, error) {
	day := t.UTC().Truncate(24 * time.Hour)
	rows, err := s.rowsHeld(ctx, q, day, except)
	if err != nil || !s.hasJobs() {
		return rows, err
	}
	// Any other kind of hold is one more term of this sum: the jobs'.
	jobs, err := jobsDaySum(ctx, q, day)
	return rows + jobs, err
}

// rowsHeld sums heldOn over the rows that may hold something on day.
func (s *Store) rowsHeld(ctx context.Context, q sqlitedb.Querier, day time.Time, except string) (float64, error) {
	// A job's launches are covered by the job's hold (job.go).
	notJobs := ""
	if s.hasJobs() {
		notJobs = ` AND idem_key NOT IN (SELECT idem_key FROM job_launches)`
	}
	rows, err := s.rows(ctx, q, `WHERE state <> 'failed' AND id <> ? AND created_at < ? AND
		(kind = ? AND (end_at = '' OR end_at >= ?) OR created_at >= ?)`+notJobs, except, fmtTime(day.Add(24*time.Hour)), KindFleet, fmtTime(day), fmtTime(day))
	if err != nil {
		return 0, fmt.Errorf("sum of the day's spending: %w", err)
	}
	sum := 0.0
	for _, r := range rows {
		sum += heldOn(r, day)
	}
	return sum, nil
}

// JobSpent is what a job's rows have cost by now: its fleets' cost so far,
// the figure its limit is held to and every view shows.
func JobSpent(rows []Entry, now time.Time) float64 {
	sum := 0.0
	for _, r := range rows {
		if c := CostSoFar(r, time.Time{}, now); r.Kind == KindFleet && !math.IsNaN(c) {
			sum += c
		}
	}
	return sum
}
