package present

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// LedgerRow is a ledger row with its figures at Now; the Ledger view adds
// what its provider last said of a fleet (nil: not asked) and its Desc.
type LedgerRow struct {
	ledger.Entry
	Fig   ledger.Figures
	Now   time.Time
	Fleet *ledger.FleetNow
	Desc  domain.Descriptor
}

func NewLedgerRow(r ledger.Entry, now time.Time) LedgerRow {
	return LedgerRow{Entry: r, Fig: ledger.FiguresOf(r, now), Now: now}
}

// LedgerRows are rows with their figures at now.
func LedgerRows(now time.Time, rows ...ledger.Entry) []LedgerRow {
	out := make([]LedgerRow, len(rows))
	for i, r := range rows {
		out[i] = NewLedgerRow(r, now)
	}
	return out
}

type ledgerCol = Col[*LedgerRow]

// The view's START and END are when the row ran, else its window.
var (
	LedgerState = &ledgerCol{Title: "STATE", Width: 9, Cell: func(r *LedgerRow) string { return r.State },
		Field: "state", Value: func(r *LedgerRow) any { return r.State }}
	LedgerKind = &ledgerCol{Title: "KIND", Width: 5, Prio: 9, Cell: func(r *LedgerRow) string { return r.Kind },
		Field: "kind", Value: func(r *LedgerRow) any { return r.Kind }}
	LedgerWhat = &ledgerCol{Title: "WHAT", Width: 18, Prio: 1,
		Cell: func(r *LedgerRow) string { return fmt.Sprintf("%d×%s", r.InstanceCount, DisplayType(r.InstanceType)) }}
	LedgerWhere = &ledgerCol{Title: "WHERE", Width: 14, Prio: 5, MaxWidth: 18,
		Cell: func(r *LedgerRow) string { return Place(r.Region, r.Zone) }}
	LedgerRan = &ledgerCol{Title: "START (local)", Width: 15, Prio: 2, Cell: func(r *LedgerRow) string {
		if r.Fig.Start.IsZero() {
			return localCell(r.Start, r.Now)
		}
		return localCell(r.Fig.Start, r.Now)
	}}
	LedgerRanUntil = &ledgerCol{Title: "END (local)", Width: 15, Prio: 8, Cell: func(r *LedgerRow) string {
		if r.Fig.Start.IsZero() {
			return localCell(r.End, r.Now)
		}
		return localCell(r.Fig.End, r.Now)
	}}
	LedgerTimeLeft = &ledgerCol{Title: "TIME LEFT", Width: 16, Prio: 3, Cell: func(r *LedgerRow) string { return TimeLeft(r.Entry, r.Now) }}
	LedgerRun      = &ledgerCol{Title: "RUN", Width: 5, Right: true, Prio: 4, Cell: running}
	LedgerCost     = &ledgerCol{Title: "COST $", Width: 10, Right: true, Prio: 4, Cell: func(r *LedgerRow) string {
		switch {
		case r.Kind != ledger.KindFleet:
			return Money(r.CostUSD)
		case ledger.CostUnknown(r.Entry):
			return "-" // no price was known at launch
		}
		return Money(r.USDHour) + "/h"
	}}
	LedgerSoFar = &ledgerCol{Title: "SO FAR $", Width: 9, Right: true, Prio: 7, Cell: func(r *LedgerRow) string { return Money(r.Fig.SoFar) },
		Field: "cost_so_far_usd", Format: "%.2f", Value: func(r *LedgerRow) any { return r.Fig.SoFar }}
	LedgerBy = &ledgerCol{Title: "BY", Width: 14, Prio: 6, Cell: func(r *LedgerRow) string { return ActorName(r.Actor) },
		Field: "actor", Format: "-", Value: func(r *LedgerRow) any { return r.Actor }}
	LedgerKeptBy = &ledgerCol{Title: "KEPT BY", Width: 30, Prio: 12, Cell: func(r *LedgerRow) string {
		if sched, ok := ledger.ScheduleOf(r.Entry); ok {
			return keptBy(sched.Keeper, r.Desc, r.Cloud)
		}
		return "-"
	}}
	LedgerRef = &ledgerCol{Title: "PROVIDER ID", Width: 22, Prio: 10, Cell: func(r *LedgerRow) string { return orDash(r.ProviderRef) },
		Field: "provider_ref", Value: func(r *LedgerRow) any { return OptString(r.ProviderRef) }}
	LedgerID = &ledgerCol{Title: "LEDGER ID", Width: 26, Prio: 11, Cell: func(r *LedgerRow) string { return r.ID },
		Field: "id", Value: func(r *LedgerRow) any { return r.ID }}
	// LedgerNote is not in DESIGN.md's JSON and CSV fields.
	LedgerNote = &ledgerCol{Title: "NOTE", Width: 40, Prio: 13, Cell: func(r *LedgerRow) string { return orDash(r.Note) },
		Field: "note", TableOnly: true, Value: func(r *LedgerRow) any { return OptString(r.Note) }}

	ledgerProvider = &ledgerCol{Field: "provider", Value: func(r *LedgerRow) any { return r.Provider }}
	ledgerCloud    = &ledgerCol{Field: "cloud", Format: "-", Value: func(r *LedgerRow) any { return r.Cloud }}
	ledgerRegion   = &ledgerCol{Field: "region", Value: func(r *LedgerRow) any { return r.Region }}
	ledgerZone     = &ledgerCol{Field: "zone", Value: func(r *LedgerRow) any { return OptString(r.Zone) }}
	ledgerType     = &ledgerCol{Field: "instance_type", Value: func(r *LedgerRow) any { return r.InstanceType }}
	ledgerCount    = &ledgerCol{Field: "instance_count", Value: func(r *LedgerRow) any { return r.InstanceCount }}
	ledgerGPUs     = &ledgerCol{Field: "gpu_count", Format: "%g", Value: func(r *LedgerRow) any { return r.GPUCount }}
	ledgerStart    = &ledgerCol{Field: "start", Value: func(r *LedgerRow) any { return optTime(r.Start) }}
	ledgerEnd      = &ledgerCol{Field: "end", Value: func(r *LedgerRow) any { return optTime(r.End) }}
	ledgerCommit   = &ledgerCol{Field: "committed_usd", Format: "%.2f", Value: func(r *LedgerRow) any { return r.Fig.Committed }}
	ledgerFinal    = &ledgerCol{Field: "cost_usd", Format: "%.2f", Value: func(r *LedgerRow) any { return r.Fig.Final }}
	ledgerCreated  = &ledgerCol{Field: "created_at", Value: func(r *LedgerRow) any { return r.CreatedAt.UTC() }}
	ledgerError    = &ledgerCol{Field: "error", Value: func(r *LedgerRow) any { return OptString(r.Error) }}
)

// LedgerView: what decides a booking stays at 80 columns.
var LedgerView = []*Col[*LedgerRow]{LedgerState, LedgerKind, LedgerWhat, LedgerWhere, LedgerRan, LedgerRanUntil, LedgerTimeLeft,
	LedgerRun, LedgerCost, LedgerSoFar, LedgerBy, LedgerKeptBy, LedgerRef, LedgerID, LedgerNote}

// Ledger is in DESIGN.md's field order.
var Ledger = []*Col[*LedgerRow]{LedgerID, LedgerKind, ledgerProvider, ledgerCloud, ledgerRegion, ledgerZone, ledgerType, ledgerCount,
	ledgerGPUs, ledgerStart, ledgerEnd, ledgerCommit, LedgerSoFar, ledgerFinal, LedgerState, LedgerRef, LedgerBy, ledgerCreated,
	ledgerError, LedgerNote}

func localCell(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.In(now.Location()).Format("01-02 15:04 MST")
}

// running is "28/30" instances up; "?" when the provider never said.
func running(r *LedgerRow) string {
	f := r.Fleet
	switch {
	case !ledger.LiveFleet(r.Entry) || f == nil:
		return "-"
	case f.At.IsZero() || (f.Err != nil && f.Fleet.ID == "" && f.Fleet.Target == 0):
		return "?"
	}
	return fmt.Sprintf("%d/%d", f.Fleet.Instances, max(f.Fleet.Target, r.InstanceCount))
}

// keptBy says who starts and ends a scheduled fleet.
func keptBy(k ledger.Keeper, d domain.Descriptor, cloud string) string {
	if k == "" {
		k = ledger.KeeperOf(d)
	}
	if k == ledger.KeptByCloud {
		who := d.CloudName()
		if who == "" {
			who = cmp.Or(cloud, d.Name)
		}
		return who + ", at the cloud (on time)"
	}
	return "gpumarket: a TUI or serve must run"
}

// ActorName is the local user, or an SSH key's comment or fingerprint.
func ActorName(actor string) string {
	if a, ok := strings.CutPrefix(actor, "local:"); ok {
		return a
	}
	if a, ok := strings.CutPrefix(actor, "ssh:"); ok {
		if _, comment, ok := strings.Cut(a, " "); ok && comment != "" {
			return comment
		}
		return a
	}
	return orDash(actor)
}

// TimeLeft counts down to a start, then an end; a fleet's is its run time.
func TimeLeft(r ledger.Entry, now time.Time) string {
	if r.Kind == ledger.KindFleet {
		return fleetTimeLeft(r, now)
	}
	if !ledger.Booked(r.Kind) || r.Start.IsZero() {
		return "-"
	}
	switch {
	case now.Before(r.Start):
		return "starts in " + Span(r.Start.Sub(now))
	case now.Before(r.End):
		return "ends in " + Span(r.End.Sub(now))
	case r.Kind == ledger.KindReservation && (r.State == ledger.StateActive || r.State == ledger.StateScheduled):
		// Azure bills a reservation until it is deleted.
		return "over: billing until released"
	}
	return "ended"
}

func fleetTimeLeft(r ledger.Entry, now time.Time) string {
	sched, scheduled := ledger.ScheduleOf(r)
	switch {
	case scheduled && r.State == ledger.StateScheduled && now.Before(sched.Start):
		return "starts in " + Span(sched.Start.Sub(now))
	case scheduled && r.State == ledger.StateScheduled:
		return "start due"
	case scheduled && r.State == ledger.StateActive && !sched.End.IsZero() && now.Before(sched.End):
		return "ends in " + Span(sched.End.Sub(now))
	case scheduled && r.State == ledger.StateActive && !sched.End.IsZero():
		return "end due"
	case r.ProviderRef == "":
		return "-" // never launched
	}
	start, end := ledger.Span(r)
	switch {
	case start.IsZero():
		return "-"
	case end.IsZero():
		return "running " + Span(now.Sub(start))
	}
	return "ran " + Span(end.Sub(start))
}

// Span prints a duration as people read a countdown: 2d 4h, 3h 20m, 45m.
func Span(d time.Duration) string {
	if d > 0 && d < 30*time.Second {
		return "<1m" // "starts in 0m" read as started
	}
	d = d.Round(time.Minute)
	days := int(d / (24 * time.Hour))
	hours := int(d % (24 * time.Hour) / time.Hour)
	mins := int(d % time.Hour / time.Minute)
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	}
	return fmt.Sprintf("%dm", mins)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}
