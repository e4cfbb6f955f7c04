package present

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gpumarket/gpumarket/planner"
)

// PlanRow is a strategy, its mark in the Plan view and the cap it is over.
type PlanRow struct {
	planner.Result
	Label, OverCap string
}

func NewPlanRow(r planner.Result, maxBookingUSD, maxDailyUSD float64) PlanRow {
	return PlanRow{Result: r, OverCap: planner.OverCap(r.ExpectedCostUSD, maxBookingUSD, maxDailyUSD)}
}

type planCol = Col[*PlanRow]

var (
	PlanLabel    = &planCol{Title: "#", Width: 2, Right: true, Cell: func(r *PlanRow) string { return r.Label }}
	PlanStrategy = &planCol{Title: "STRATEGY", Width: 24, Prio: 1, Cell: func(r *PlanRow) string { return r.Strategy },
		Field: "strategy", Value: func(r *PlanRow) any { return r.Strategy }}
	PlanExpected = planFigure("EXP $", 8, 2, Money, "expected_cost_usd", "%.2f", 2, func(r *PlanRow) float64 { return r.ExpectedCostUSD })
	PlanP95      = planFigure("P95 $", 8, 4, Money, "p95_cost_usd", "%.2f", 2, func(r *PlanRow) float64 { return r.P95CostUSD })
	PlanOnTime   = planFigure("ON TIME", 7, 3, func(v float64) string { return fmt.Sprintf("%.1f%%", v) }, "on_time_pct", "%.1f", 2,
		func(r *PlanRow) float64 { return r.OnTimePct })
	PlanIntr = planFigure("INTR", 5, 8, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "expected_interruptions", "%.1f", 3,
		func(r *PlanRow) float64 { return r.ExpectedInterruptions })
	PlanPerGPU = planFigure("$/GPU-h", 7, 5, Money, "usd_per_useful_gpu_hour", "%.3f", 4, func(r *PlanRow) float64 { return r.USDPerUsefulGPUHour })
	PlanWhere  = &planCol{Title: "WHERE", Width: 12, Prio: 6, MaxWidth: 44, Cell: func(r *PlanRow) string { return strings.Join(r.Regions, ",") },
		Field: "regions", Value: func(r *PlanRow) any { return strings.Join(r.Regions, ",") }}
	PlanInstances = &planCol{Title: "INSTANCES", Width: 16, Prio: 7, MaxWidth: 40,
		Cell: func(r *PlanRow) string { return fmt.Sprintf("%d×%s", r.Instances, DisplayTypes(r.InstanceType)) }}

	planProvider  = &planCol{Field: "provider", Format: "-", Value: func(r *PlanRow) any { return r.Provider }}
	planCloud     = &planCol{Field: "cloud", Value: func(r *PlanRow) any { return r.Cloud }}
	planType      = &planCol{Field: "instance_type", Value: func(r *PlanRow) any { return r.InstanceType }}
	planInstances = &planCol{Field: "instances", Value: func(r *PlanRow) any { return r.Instances }}
	planGPUs      = &planCol{Field: "gpus", Format: "%g", Value: func(r *PlanRow) any { return r.GPUs }}
	planStart     = &planCol{Field: "start", Format: "local", Value: func(r *PlanRow) any { return r.Start.UTC() }}
	planEnd       = &planCol{Field: "end", Format: "local", Value: func(r *PlanRow) any { return r.End.UTC() }}
	planEndP95    = &planCol{Field: "end_p95", Format: "-", Value: func(r *PlanRow) any { return r.EndP95.UTC() }}
	planOffering  = &planCol{Field: "offering_id", Value: func(r *PlanRow) any { return OptString(r.OfferingID) }}
	planOverCap   = &planCol{Field: "over_cap", Format: "-", Value: func(r *PlanRow) any { return OptString(r.OverCap) }}
	planAssume    = &planCol{Field: "assumptions", Format: "-", Value: func(r *PlanRow) any { return r.Assumptions }}
	planCap       = &planCol{Field: "cap", TableOnly: true, Value: func(r *PlanRow) any {
		if r.OverCap == "" {
			return ""
		}
		return "over " + r.OverCap
	}}
)

// PlanView: at 80 columns the strategy, its costs and odds stay.
var PlanView = []*planCol{PlanLabel, PlanStrategy, PlanExpected, PlanP95, PlanOnTime, PlanIntr, PlanPerGPU, PlanWhere, PlanInstances}

// Plan is in DESIGN.md's field order.
var Plan = []*planCol{PlanStrategy, planProvider, planCloud, PlanWhere, planType, planInstances, planGPUs, planStart, planEnd,
	planEndP95, PlanExpected, PlanP95, PlanOnTime, PlanIntr, PlanPerGPU, planOffering, planOverCap, planAssume, planCap}

func planFigure(title string, w, prio int, cell func(float64) string, field, format string, digits int, f func(*PlanRow) float64) *planCol {
	return &planCol{Title: title, Width: w, Right: true, Prio: prio, Cell: func(r *PlanRow) string { return cell(f(r)) },
		Field: field, Format: format, Value: func(r *PlanRow) any { return Round(f(r), digits) }}
}

// DisplayTypes is DisplayType of each type of a "+" and "," list.
func DisplayTypes(list string) string { return azurePrefix.ReplaceAllString(list, "$1") }

var azurePrefix = regexp.MustCompile(`(^|[,+])Standard_`)
