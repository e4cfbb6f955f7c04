package present

import (
	"fmt"
	"math"

	"github.com/gpumarket/gpumarket/ledger"
)

type usageCol = Col[*ledger.UsageRow]

var (
	UsageKind = &usageCol{Title: "KIND", Width: 11, Prio: 7, Cell: func(r *ledger.UsageRow) string { return r.Kind },
		Field: "kind", Value: func(r *ledger.UsageRow) any { return r.Kind }}
	UsageWhat = &usageCol{Title: "WHAT", Width: 17, Prio: 0, MaxWidth: 24, Cell: func(r *ledger.UsageRow) string {
		return fmt.Sprintf("%s GPU %s", GPUCount(r.GPUs), DisplayType(r.InstanceType))
	}}
	UsageBooked  = gpuHours("BOOKED", 2, "booked_gpu_hours", func(r *ledger.UsageRow) float64 { return r.BookedGPUHours })
	UsageRunning = gpuHours("RUNNING", 3, "running_gpu_hours", func(r *ledger.UsageRow) float64 { return r.RunningGPUHours })
	UsageBusy    = &usageCol{Title: "BUSY", Width: 10, Right: true, Prio: 1, Cell: func(r *ledger.UsageRow) string {
		switch {
		case r.NoMetrics():
			return "no metrics"
		case r.BookedGPUHours > 0 && !math.IsNaN(r.BusyGPUHours):
			return fmt.Sprintf("%s %2.0f%%", tenths(r.BusyGPUHours), 100*r.BusyGPUHours/r.BookedGPUHours)
		}
		return tenths(r.BusyGPUHours)
	}, Field: "busy_gpu_hours", Head: "BUSY GPU-H", Value: func(r *ledger.UsageRow) any { return Round(r.BusyGPUHours, 3) },
		Text: func(r *ledger.UsageRow) string {
			if r.NoMetrics() {
				return "no metrics"
			}
			return tenths(r.BusyGPUHours)
		}}
	UsageIdle = usd("IDLE $", 0, "idle_usd", func(r *ledger.UsageRow) float64 { return r.IdleUSD })
	UsageCost = usd("COST $", 4, "cost_usd", func(r *ledger.UsageRow) float64 { return r.CostUSD })
	UsageIntr = &usageCol{Title: "INTR", Width: 4, Right: true, Prio: 6, Cell: interruptions,
		Field: "interruptions", Text: interruptions, Value: func(r *ledger.UsageRow) any {
			if r.Interruptions < 0 {
				return nil
			}
			return r.Interruptions
		}}
	UsageBy = &usageCol{Title: "BY", Width: 12, Prio: 5, Cell: func(r *ledger.UsageRow) string { return ActorName(r.Actor) },
		Field: "actor", Value: func(r *ledger.UsageRow) any { return r.Actor }}
	UsageState = &usageCol{Title: "STATE", Width: 7, Prio: 8, Cell: func(r *ledger.UsageRow) string { return r.State }}
	UsageWhere = &usageCol{Title: "WHERE", Width: 12, Prio: 9, MaxWidth: 16,
		Cell: func(r *ledger.UsageRow) string { return Place(r.Region, r.Zone) }}
	UsageMetrics = &usageCol{Title: "METRICS", Width: 20, Prio: 10, MaxWidth: 40, Cell: metricsCell,
		Field: "metrics_source", Head: "METRICS", Text: metricsCell, Value: func(r *ledger.UsageRow) any { return OptString(r.MetricsSource) }}

	usageID       = &usageCol{Field: "id", Value: func(r *ledger.UsageRow) any { return r.ID }}
	usageProvider = &usageCol{Field: "provider", Value: func(r *ledger.UsageRow) any { return r.Provider }}
	usageCloud    = &usageCol{Field: "cloud", Format: "-", Value: func(r *ledger.UsageRow) any { return r.Cloud }}
	usageRegion   = &usageCol{Field: "region", Value: func(r *ledger.UsageRow) any { return r.Region }}
	usageType     = &usageCol{Field: "instance_type", Value: func(r *ledger.UsageRow) any { return r.InstanceType }}
	usageGPUs     = &usageCol{Field: "gpus", Value: func(r *ledger.UsageRow) any { return r.GPUs },
		Text: func(r *ledger.UsageRow) string { return GPUCount(r.GPUs) }}
	usageStart = &usageCol{Field: "start", Head: "START (UTC)", Value: func(r *ledger.UsageRow) any { return r.Start.UTC() },
		Text: func(r *ledger.UsageRow) string { return r.Start.UTC().Format("2006-01-02 15:04") }}
	usageEnd = &usageCol{Field: "end", Head: "END (UTC)", Value: func(r *ledger.UsageRow) any { return r.End.UTC() },
		Text: func(r *ledger.UsageRow) string { return r.End.UTC().Format("2006-01-02 15:04") }}
)

var UsageView = []*usageCol{UsageKind, UsageWhat, UsageBooked, UsageRunning, UsageBusy, UsageIdle, UsageCost, UsageIntr,
	UsageBy, UsageState, UsageWhere, UsageMetrics}

// Usage is in the README's field order.
var Usage = []*usageCol{usageID, UsageKind, usageProvider, usageCloud, usageRegion, usageType, usageGPUs, UsageBy, usageStart,
	usageEnd, UsageBooked, UsageRunning, UsageBusy, UsageIntr, UsageCost, UsageIdle, UsageMetrics}

func gpuHours[R any](title string, prio int, field string, f func(R) float64) *Col[R] {
	cell := func(r R) string { return tenths(f(r)) }
	return &Col[R]{Title: title, Width: 7, Right: true, Prio: prio, Cell: cell,
		Field: field, Head: title + " GPU-H", Text: cell, Value: func(r R) any { return Round(f(r), 3) }}
}

func usd(title string, prio int, field string, f func(*ledger.UsageRow) float64) *usageCol {
	return &usageCol{Title: title, Width: 9, Right: true, Prio: prio, Cell: func(r *ledger.UsageRow) string { return Money(f(r)) },
		Field: field, Head: title, Value: func(r *ledger.UsageRow) any { return Round(f(r), 2) },
		Text: func(r *ledger.UsageRow) string { return fixed(f(r), "%.2f") }}
}

func tenths(v float64) string { return fixed(v, "%.1f") }

func fixed(v float64, format string) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func interruptions(r *ledger.UsageRow) string {
	if r.Interruptions < 0 {
		return "-"
	}
	return fmt.Sprint(r.Interruptions)
}

func metricsCell(r *ledger.UsageRow) string {
	if r.MetricsSource == "" {
		return "no metrics"
	}
	return r.MetricsSource
}

// DayTotal is a UTC day's usage; Peak is the busiest day's booked
// GPU-hours, the scale of its bar, BarW the bar's cells.
type DayTotal struct {
	ledger.Total
	Peak float64
	BarW int
}

// ActorTotal is an actor's usage; All marks the row over every actor.
type ActorTotal struct {
	ledger.Total
	All bool
}

// DayBar is the days' bar of booked, running and busy GPU-hours.
var DayBar = &Col[*DayTotal]{Title: "█ busy ▓ running ▒ booked", Width: 8, MaxWidth: 40, Prio: 4, Cell: dayBar,
	Field: "bar", Head: "BOOKED ▒ RUNNING ▓ BUSY █", TableOnly: true, Value: func(r *DayTotal) any { return dayBar(r) }}

func dayBar(r *DayTotal) string {
	return ledger.Bar(r.BookedGPUHours, r.RunningGPUHours, r.BusyGPUHours, r.Peak, r.BarW)
}

// Days and Actors are `usage --by day` and `--by actor`'s columns in the
// README's field order, and the Usage view's tables below its rows.
var (
	Days = totals(&Col[*DayTotal]{Title: "DAY (UTC)", Width: 9, Cell: func(r *DayTotal) string { return r.Key[min(5, len(r.Key)):] },
		Field: "day", Head: "DAY (UTC)", Value: func(r *DayTotal) any { return r.Key }},
		func(r *DayTotal) *ledger.Total { return &r.Total }, true, DayBar)
	Actors = totals(&Col[*ActorTotal]{Title: "BY", Width: 10, Cell: func(r *ActorTotal) string {
		if r.All {
			return "ALL"
		}
		return ActorName(r.Key)
	}, Field: "actor", Value: func(r *ActorTotal) any { return r.Key }, Text: func(r *ActorTotal) string {
		if r.All {
			return "ALL"
		}
		return orDash(r.Key)
	}}, func(r *ActorTotal) *ledger.Total { return &r.Total }, false, nil)
)

// totals are the columns of a day's or an actor's totals after key; a
// day's table leaves out the row counts and shows the bar (nil: none) and
// the busy GPU-hours of rows without metrics; the TUI leaves out its cost.
func totals[R any](key *Col[R], t func(R) *ledger.Total, day bool, bar *Col[R]) []*Col[R] {
	// Totals count known hours only, never NaN.
	hours := func(field, title string, prio int, f func(*ledger.Total) float64) *Col[R] {
		return gpuHours(title, prio, field, func(r R) float64 { return f(t(r)) })
	}
	usd := func(field, title string, prio int, f func(*ledger.Total) float64) *Col[R] {
		return &Col[R]{Title: title, Width: 10, Right: true, Prio: prio, Cell: func(r R) string { return Dollars(f(t(r))) },
			Field: field, Head: title + " $", Value: func(r R) any { return Round(f(t(r)), 2) },
			Text: func(r R) string { return fmt.Sprintf("%.2f", f(t(r))) }}
	}
	hidden, busy, idle, cost := "", hours("busy_gpu_hours", "BUSY", 1, func(t *ledger.Total) float64 { return t.BusyGPUHours }),
		usd("idle_usd", "IDLE", 3, func(t *ledger.Total) float64 { return t.IdleUSD }),
		usd("cost_usd", "COST", 6, func(t *ledger.Total) float64 { return t.CostUSD })
	rows := &Col[R]{Title: "ROWS", Width: 4, Right: true, Prio: 7, Cell: func(r R) string { return fmt.Sprint(t(r).Rows) },
		Field: "rows", Value: func(r R) any { return t(r).Rows }}
	// Rows without metrics are no busy hours, not 0 busy.
	busy.Cell = func(r R) string {
		if x := t(r); x.NoMetrics == x.Rows {
			return "-"
		}
		return fmt.Sprintf("%.1f", t(r).BusyGPUHours)
	}
	idle.Width, idle.Cell = 11, func(r R) string {
		switch x := t(r); {
		case x.NoMetrics == x.Rows:
			return "no metrics"
		case x.NoMetrics > 0:
			return Dollars(x.IdleUSD) + "*"
		}
		return Dollars(t(r).IdleUSD)
	}
	if day {
		hidden, rows.Format, rows.Title, cost.Title = "-", "-", "", ""
		busy.Text = func(r R) string {
			if x := t(r); x.NoMetrics > 0 {
				return fmt.Sprintf("%.1f (%d without metrics)", x.BusyGPUHours, x.NoMetrics)
			}
			return fmt.Sprintf("%.1f", t(r).BusyGPUHours)
		}
	}
	cols := []*Col[R]{key, rows,
		hours("booked_gpu_hours", "BOOKED", 2, func(t *ledger.Total) float64 { return t.BookedGPUHours }),
		hours("running_gpu_hours", "RUNNING", 5, func(t *ledger.Total) float64 { return t.RunningGPUHours }), busy}
	if bar != nil {
		cols = append(cols, bar)
	}
	return append(cols, &Col[R]{Field: "interruptions", Value: func(r R) any { return t(r).Interruptions }}, cost, idle,
		&Col[R]{Field: "rows_without_metrics", Head: "WITHOUT METRICS", Format: hidden, Value: func(r R) any { return t(r).NoMetrics }})
}

// DayRows are the days, each with the busiest one's booked GPU-hours and
// barW cells for its bar.
func DayRows(days []ledger.Total, barW int) []DayTotal {
	peak := 0.0
	for _, d := range days {
		peak = math.Max(peak, d.BookedGPUHours)
	}
	out := make([]DayTotal, len(days))
	for i, d := range days {
		out[i] = DayTotal{Total: d, Peak: peak, BarW: barW}
	}
	return out
}

// ActorRows are the report's totals per actor.
func ActorRows(rep ledger.UsageReport) []ActorTotal {
	out := make([]ActorTotal, 0, len(rep.Actors)+1)
	for _, t := range rep.Actors {
		out = append(out, ActorTotal{Total: t})
	}
	return out
}
