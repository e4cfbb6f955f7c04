package cmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

func (cl *cli) fleetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Launch or delete a spot fleet (through the ledger)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("fleet needs a subcommand: launch or delete (see gpumarket fleet --help)")
		},
	}
	c.AddCommand(cl.fleetLaunchCmd(), cl.fleetDeleteCmd())
	return c
}

// fleetLaunchFlags are `fleet launch`'s own flags.
type fleetLaunchFlags struct {
	types          string
	target, odBase int
	strategy       string
	maxPrice       float64
	template       string
	dryRun, yes    bool
	again          bool
	timeout        time.Duration
	output         string
	// start and length schedule the fleet (--start, --for).
	start, length string
}

func (cl *cli) fleetLaunchCmd() *cobra.Command {
	var f fleetLaunchFlags
	c := &cobra.Command{
		Use:   "launch --region R --instance-types T1,T2 --target N [--start WHEN] [--for LENGTH]",
		Short: "Launch or schedule a spot fleet (asks for a yes first)",
		Long: `fleet launch launches a fleet of --target instances of the given types in one
region (--region, exactly one), --on-demand-base of them on-demand and the rest
spot, with the allocation strategy and an optional max spot price per
instance-hour. It shows the estimated cost per hour first and asks you to type
yes; without --yes and with no terminal on stdin it refuses (exit 2).

The launch is recorded in the ledger before it is sent, and its ledger id is
the fleet's ClientToken, so the cloud itself never launches it twice. The
whole commitment is checked against budget.max_booking_usd and
budget.max_daily_usd: a fleet with an end (--for) at its hourly estimate over
its window, spread over the UTC days it bills; one with no end at its first 24
hours (it bills until ` + "`gpumarket fleet delete`" + `). A fleet on the same
terms as one already scheduled or running over the same time is refused as a
duplicate unless --again. With a budget cap, the prices
are read again right before the launch: if the fleet would now cost more per
hour than shown, nothing is launched — the new estimate is shown and asked for
again (with --yes the command exits 1 with it, and running it again launches).
The provider is asked for a dry run before you are asked.

--start schedules the fleet and --for ends it: "--start 'Thu 14:00' --for 3h"
runs it from the next Thursday 14:00 (local time) for three hours; --for alone
runs it from now. The confirmation says the window, in local time and UTC, and
who starts and stops it:
  - AWS keeps the schedule at the cloud (an EC2 Fleet of type request with
    ValidFrom, ValidUntil and TerminateInstancesWithExpiration): it starts and
    ends on time even if gpumarket is not running.
  - Elsewhere (Azure scale sets, the simulated market) gpumarket keeps it: the
    row is recorded "scheduled" now (nothing is launched), and a running
    gpumarket TUI or ` + "`serve`" + ` launches it at its start and deletes it at its
    end, on time (its reconcile loop wakes for them). If none is running then,
    the next one to start — or ` + "`gpumarket ledger`" + ` — does it at once and the
    ledger row says how late. The simulated market lives in the process that
    runs it, so only a TUI or serve launches a simulated fleet.
--start takes ` + domain.WhenForm + `, ahead of now and at most 90 days
ahead; --for takes ` + domain.FleetLengthForm + `.`,
		Example: `  gpumarket fleet launch --region us-east-1 --instance-types p5.48xlarge,p4d.24xlarge --target 4 --dry-run
  gpumarket fleet launch --provider aws --region us-east-1 --instance-types p5.48xlarge --target 2 --on-demand-base 1 --max-price 60 --yes
  gpumarket fleet launch --provider aws --region us-east-1 --instance-types g6.xlarge --target 30 --start "Thu 14:00" --for 3h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed(flagRegion) {
				return usagef("--region is required: one region such as us-east-1")
			}
			types := domain.SplitList(f.types)
			if len(types) == 0 {
				return usagef("--instance-types is required: a comma list of GPU instance types such as p5.48xlarge,p4d.24xlarge")
			}
			for i, t := range types {
				name, err := domain.InstanceTypeName(t)
				if err != nil {
					return usagef("--instance-types: %v", err)
				}
				types[i] = name
			}
			spec := domain.FleetSpec{InstanceTypes: types, TargetCapacity: f.target, OnDemandBase: f.odBase, Strategy: f.strategy,
				LaunchTemplate: f.template, DryRun: f.dryRun}
			if cmd.Flags().Changed("max-price") {
				spec.MaxPriceUSD = domain.Float(f.maxPrice)
			}
			if err := app.CheckFleetTerms(spec); err != nil {
				return err
			}
			if cmd.Flags().Changed("start") && strings.TrimSpace(f.start) == "" {
				return usagef("--start is empty: want %s", domain.WhenForm)
			}
			if cmd.Flags().Changed("for") && strings.TrimSpace(f.length) == "" {
				return usagef("--for is empty: want %s", domain.FleetLengthForm)
			}
			return cl.withApp(cmd, func(a *runner) error {
				spec, err := a.FleetSpec(spec, f.start, f.length)
				if err != nil {
					return err
				}
				return a.runFleetLaunch(cmd.Context(), spec, f)
			})
		},
	}
	addOutputFlag(c, &f.output)
	fl := c.Flags()
	fl.StringVar(&f.types, "instance-types", "", "instance types the fleet may use, a comma list such as p5.48xlarge,p4d.24xlarge")
	fl.IntVar(&f.target, "target", 0, "instances in all")
	fl.IntVar(&f.odBase, "on-demand-base", 0, "how many of them are on-demand (the rest are spot)")
	fl.StringVar(&f.strategy, "strategy", domain.Strategies[0], "spot allocation strategy: "+strings.Join(domain.Strategies, ", "))
	fl.Float64Var(&f.maxPrice, "max-price", 0, "highest spot price to pay, $ per instance-hour (default: the on-demand price)")
	fl.StringVar(&f.template, "launch-template", "", "AWS launch template id (default: config aws.launch_template)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "only ask the provider whether the launch would succeed; nothing is launched or recorded")
	fl.BoolVar(&f.yes, "yes", false, "launch without asking (required when stdin is not a terminal)")
	fl.BoolVar(&f.again, "again", false, "launch it even though a fleet on the same terms is already scheduled or running over the same time")
	fl.DurationVar(&f.timeout, "timeout", ledger.DefaultTimeout, "bound on each call to the provider")
	fl.StringVar(&f.start, "start", "", "schedule the fleet to start then: "+domain.WhenForm+" (default now)")
	fl.StringVar(&f.length, "for", "", "end the fleet after this long: "+domain.FleetLengthForm+" (default: it runs until deleted)")
	return c
}

// fleetDryRunRow is what `fleet launch --dry-run` prints with -o json|csv.
type fleetDryRunRow struct {
	Provider string  `json:"provider"`
	Region   string  `json:"region"`
	DryRun   bool    `json:"dry_run"`
	USDHour  float64 `json:"estimated_usd_hour" table:"%.2f"`
	Message  string  `json:"message"`
}

func (a *runner) runFleetLaunch(ctx context.Context, spec domain.FleetSpec, f fleetLaunchFlags) error {
	e := a.env
	if err := e.needsConfirmation("fleet launch", spec.DryRun, f.yes); err != nil {
		return err
	}
	ps, err := a.Providers(ctx)
	if err != nil {
		return err
	}
	svc, err := a.Booking(ps, f.timeout)
	if err != nil {
		return err
	}
	if !svc.CanLaunch(spec.Provider) {
		return fmt.Errorf("provider %s does not launch fleets", spec.Provider)
	}
	if err := a.CheckFleet(ctx, spec, f.timeout); err != nil {
		return err
	}
	est := svc.EstimateFleet(ctx, spec)
	simulated := svc.Describe(spec.Provider).Simulated
	fmt.Fprint(e.errOut, present.FleetSummary(spec, est, simulated, svc.ScheduleLines(spec, a.Now()), a.Now()))
	if !spec.DryRun {
		// Dry run first: the provider's "no" comes before the question.
		dry := spec
		dry.DryRun = true
		dres, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: dry, Estimate: est, Again: f.again})
		if dres.Fleet.DryRun {
			fmt.Fprintf(e.errOut, "  dry run    %s\n", domain.DryRunAnswer(dres.Fleet.Message, "the provider accepted the dry run"))
		}
		if err != nil {
			return fmt.Errorf("%w; nothing was launched", err)
		}
	}
	verb := "launch"
	if spec.Start.After(a.Now()) {
		verb = "schedule"
	}
	var res ledger.FleetResult
	for asked := 0; ; asked++ {
		if !spec.DryRun && !f.yes {
			what := verb + " it"
			if !math.IsNaN(est.USDHour) {
				what = fmt.Sprintf("%s it at about $%.2f per hour", verb, est.USDHour)
			}
			if err := e.confirm("fleet launch", what); err != nil {
				return err
			}
		}
		res, err = svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: est, Again: f.again})
		var ec *ledger.EstimateChangedError
		if !errors.As(err, &ec) {
			break
		}
		fmt.Fprintln(e.errOut, "The fleet's prices went up since they were shown; nothing was launched. The new estimate:")
		fmt.Fprint(e.errOut, present.FleetSummary(spec, ec.Now, simulated, svc.ScheduleLines(spec, a.Now()), a.Now()))
		if f.yes || asked >= maxAsks-1 {
			return fmt.Errorf("refused: the fleet now costs about $%.2f per hour (shown $%.2f); nothing was launched: run the command again to launch at the new prices", ec.Now.USDHour, ec.Shown.USDHour)
		}
		est = ec.Now
	}
	if spec.DryRun {
		if err != nil && res.Fleet.DryRun {
			// Over a cap: the launch would be refused, and the cloud's
			// answer is still worth showing.
			fmt.Fprintf(e.out, "dry run: %s (nothing was launched)\n", domain.DryRunAnswer(res.Fleet.Message, "the provider accepted the dry run"))
			return fmt.Errorf("a launch would be %w", err)
		}
		if err != nil {
			return err
		}
		msg := domain.DryRunAnswer(res.Fleet.Message, "the provider accepted the dry run: the launch would succeed")
		if f.output == formatTable {
			fmt.Fprintf(e.out, "dry run: %s (nothing was launched)\n", msg)
			return nil
		}
		return writeRows(e.out, f.output, []fleetDryRunRow{{Provider: spec.Provider, Region: spec.Region, DryRun: true, USDHour: est.USDHour, Message: msg}})
	}
	if res.Row.ID != "" {
		if werr := writeRows(e.out, f.output, present.LedgerRows(time.Now(), res.Row)); werr != nil && err == nil {
			err = werr
		}
	}
	switch {
	case err != nil:
	case res.Row.State == ledger.StateScheduled && res.Row.ProviderRef == "":
		fmt.Fprintf(e.errOut, "scheduled: ledger row %s, %s; %s\n", res.Row.ID, ledger.WindowText(res.Row.Start, res.Row.End, a.Now()),
			ledger.KeeperNote(svc.Describe(spec.Provider)))
	case res.Row.State == ledger.StateScheduled:
		fmt.Fprintf(e.errOut, "scheduled at the cloud: %s, ledger row %s, %s\n", res.Row.ProviderRef, res.Row.ID, ledger.WindowText(res.Row.Start, res.Row.End, a.Now()))
	case res.Row.State == ledger.StateFailed:
		// The cloud took the request and launched nothing (no spot
		// capacity, no pool under the max price): a failure, exit 1.
		fmt.Fprintf(e.errOut, "gpumarket: fleet launch: not launched: %s (ledger row %s, %s)\n", res.Row.Error, res.Row.ID, res.Row.ProviderRef)
		return reported(exitFailure)
	default:
		fmt.Fprintf(e.errOut, "launched: %s, ledger row %s, state %s\n", res.Row.ProviderRef, res.Row.ID, res.Row.State)
		if s := res.Short(); s != "" {
			fmt.Fprintf(e.errOut, "warning: %s\n", s)
		}
	}
	return err
}

func (cl *cli) fleetDeleteCmd() *cobra.Command {
	var yes bool
	var timeout time.Duration
	var output string
	c := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a fleet launched by gpumarket (its fleet id or ledger id) and terminate its instances",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cl.withApp(cmd, func(a *runner) error {
				return a.runFleetDelete(cmd.Context(), strings.TrimSpace(args[0]), yes, timeout, output)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().BoolVar(&yes, "yes", false, "delete without asking (required when stdin is not a terminal)")
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on the call to the provider")
	return c
}

func (a *runner) runFleetDelete(ctx context.Context, id string, yes bool, timeout time.Duration, output string) error {
	e := a.env
	ledger, err := a.Booking(nil, timeout)
	if err != nil {
		return err
	}
	r, err := ledger.FleetRow(ctx, id)
	if err != nil {
		return err
	}
	ps, err := a.Providers(ctx, r.Provider)
	if err != nil {
		return err
	}
	svc, err := a.Booking(ps, timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.errOut, "fleet %s (ledger row %s): %d × %s in %s, state %s\n", r.ProviderRef, r.ID, r.InstanceCount, r.InstanceType, r.Region, r.State)
	if !yes {
		if err := e.confirm("fleet delete", "delete it and terminate its instances"); err != nil {
			return err
		}
	}
	r, err = svc.DeleteFleet(ctx, id, app.LocalActor())
	if err != nil {
		return err
	}
	fmt.Fprintf(e.errOut, "deleted: %s\n", r.ProviderRef)
	return writeRows(e.out, output, present.LedgerRows(time.Now(), r))
}
