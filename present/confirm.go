package present

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
)

// OfferingSummary is the confirmation's text: everything that is bought,
// the total first.
func OfferingSummary(o domain.Offering, simulated bool) string {
	var b strings.Builder
	if simulated {
		fmt.Fprintln(&b, "SIMULATED MARKET: nothing real is bought.")
	}
	fmt.Fprintln(&b, o.CostTerms())
	if o.Note != "" {
		fmt.Fprintf(&b, "  note       %s\n", o.Note)
	}
	fmt.Fprintf(&b, "  offering   %s (%s)\n", o.ID, o.Provider)
	fmt.Fprintf(&b, "  instances  %d × %s in %s\n", o.InstanceCount, o.InstanceType, location(o.Region, o.Zone))
	fmt.Fprintf(&b, "  GPUs       %s × %s\n", GPUCount(o.GPUCount()), o.GPU.Model)
	fmt.Fprintf(&b, "  start      %s\n", BothZones(o.Start))
	fmt.Fprintf(&b, "  end        %s  (%g h)\n", BothZones(o.End), o.DurationHours())
	if o.FlexLength {
		fmt.Fprintf(&b, "  length     %g h: not the --duration searched for (listed by --flex-duration)\n", o.DurationHours())
	}
	for _, l := range o.PlanTerms() {
		fmt.Fprintf(&b, "  plan       %s\n", l)
	}
	return b.String()
}

// FleetSummary is a fleet launch's confirmation: the estimate first.
func FleetSummary(spec domain.FleetSpec, est ledger.FleetEstimate, simulated bool, schedule []string, now time.Time) string {
	var b strings.Builder
	if simulated {
		fmt.Fprintln(&b, "SIMULATED MARKET: nothing real is launched.")
	}
	bills := est.Billing(spec, now)
	if math.IsNaN(est.USDHour) {
		fmt.Fprintf(&b, "Estimated cost: unknown (%s); %s\n", est.Basis, bills)
	} else {
		fmt.Fprintf(&b, "Estimated cost: $%.2f per hour (%s); %s\n", est.USDHour, est.Basis, bills)
		if est.PricedGPUs > 0 {
			fmt.Fprintf(&b, "  per GPU    $%.4f per GPU-hour over %s GPUs\n", est.USDHour/est.PricedGPUs, GPUCount(est.PricedGPUs))
		}
	}
	fmt.Fprintf(&b, "  fleet      %d instances of %s in %s (%s)\n", spec.TargetCapacity, strings.Join(spec.InstanceTypes, ", "), spec.Region, spec.Provider)
	fmt.Fprintf(&b, "  on-demand  %d, spot %d, strategy %s\n", spec.OnDemandBase, spec.TargetCapacity-spec.OnDemandBase, spec.Strategy)
	if spec.MaxPriceUSD != nil {
		fmt.Fprintf(&b, "  max price  $%.4f per instance-hour\n", *spec.MaxPriceUSD)
	}
	if spec.LaunchTemplate != "" {
		fmt.Fprintf(&b, "  template   %s\n", spec.LaunchTemplate)
	}
	for _, l := range schedule {
		what, rest, _ := strings.Cut(l, ": ")
		fmt.Fprintf(&b, "  %-10s %s\n", strings.ToLower(what), rest)
	}
	return b.String()
}

// JobSummary is the confirmation: the whole hold first, the plan's
// figures, the pools, and what happens while no gpumarket runs.
func JobSummary(req job.Request, p job.Proposal, bu ledger.Budget, simulated bool) string {
	var b strings.Builder
	if simulated {
		fmt.Fprintln(&b, "SIMULATED MARKET: nothing real is launched.")
	}
	if req.MaxUSD > 0 {
		fmt.Fprintf(&b, "Hold: $%.2f against the budget (the larger of the plan's p95 $%.2f and --max-usd $%.2f)\n", p.HoldUSD, p.Result.P95CostUSD, req.MaxUSD)
	} else {
		fmt.Fprintf(&b, "Hold: $%.2f against the budget (the job's limit: its work on on-demand alone within budget.max_booking_usd, or the plan's p95 $%.2f if larger)\n", p.HoldUSD, p.Result.P95CostUSD)
	}
	fmt.Fprintf(&b, "  strategy   %s: expected $%.2f, p95 $%.2f, on time in %.0f%% of the plan's runs\n", req.Strategy,
		p.Result.ExpectedCostUSD, p.Result.P95CostUSD, p.Result.OnTimePct)
	fmt.Fprintf(&b, "  job        %d GPUs of %s for %g h of work\n", req.Job.GPUs, strings.Join(req.Job.Models, ","), req.Job.Hours)
	fmt.Fprintf(&b, "  start      %s\n", BothZones(req.Job.Start))
	fmt.Fprintf(&b, "  deadline   %s\n", BothZones(req.Job.Deadline))
	for i, l := range p.Live.Lanes {
		fmt.Fprintf(&b, "  spot %d     %d × %s in %s (%s), $%.2f/h\n", i+1, l.Instances, l.InstanceType, location(l.Region, l.Zone), l.Provider, l.USDHour)
	}
	if od := p.Live.OnDemand; od != nil {
		fmt.Fprintf(&b, "  on-demand  %d × %s in %s (%s), $%.2f/h\n", od.Instances, od.InstanceType, od.Region, od.Provider, od.USDHour)
	}
	fmt.Fprintf(&b, "  limit      $%.2f: past it the job ends what runs and fails; the safety net is not bought if its cost to the end would pass it (--max-usd sets it)\n",
		cmp.Or(req.MaxUSD, p.HoldUSD))
	if bu.MaxDailyUSD > 0 {
		fmt.Fprintf(&b, "  budget     the hold counts against budget.max_daily_usd $%.2f with every other purchase\n", bu.MaxDailyUSD)
	}
	fmt.Fprintf(&b, "  unattended %s\n", job.Unattended(job.Every))
	return b.String()
}
func location(region, zone string) string {
	if zone == "" {
		return region
	}
	return region + " (" + zone + ")"
}

// BothZones prints a time in local time and in UTC.
func BothZones(t time.Time) string {
	return fmt.Sprintf("%s  (%s)", t.Local().Format("Mon 2006-01-02 15:04 MST"), t.UTC().Format(time.RFC3339))
}
