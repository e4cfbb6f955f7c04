package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// offeringRow is an offering as `offerings` writes it, through
// present.Offerings: DESIGN.md's fields; the table shows START and END in
// local time, LENGTH, and a reservation's hourly rate as $/H.
type offeringRow = present.OfferingRow

// offeringKinds are the kinds --kind accepts, from the terms gpumarket sells on.
func offeringKinds() []string {
	var out []string
	for _, t := range domain.AllTerms {
		out = append(out, t.Kind)
	}
	return out
}

// parseKinds reads --kind: a comma-separated list of offering kinds.
func parseKinds(s string) ([]string, error) {
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.ToLower(strings.TrimSpace(k))
		if domain.TermsOfKind(k) == nil {
			return nil, usagef("--kind %q: want one or more of %s, separated by commas", s, strings.Join(offeringKinds(), ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// checkKindTerms refuses, before any call, a count or length that a kind
// asked for by --kind alone is never sold in, naming what is.
func checkKindTerms(kinds []string, count int, d time.Duration) error {
	if len(kinds) != 1 {
		return nil
	}
	t := domain.TermsOfKind(kinds[0])
	if err := t.ValidInstances(count); err != nil {
		return usagef("--count %v", strings.TrimPrefix(err.Error(), "count "))
	}
	if err := t.ValidDuration(d); err != nil {
		return usagef("--duration %v", strings.TrimPrefix(err.Error(), "duration "))
	}
	return nil
}

// whenForm is the accepted form of --start-after and --start-before:
// the TUI's Blocks form reads them alike.
const whenForm = domain.WhenForm

// durationForm is the accepted form of --duration.
const durationForm = "a whole number of hours, days or weeks (48h, 2d, 1w), at most 182d"

// maxBlockSpan is the longest block the clouds sell (AWS: 182 days).
var maxBlockSpan = domain.CapacityBlockTerms.MaxDuration

// parseSpan reads a positive whole number and a unit h, d or w, at most
// 182 days.
func parseSpan(s string) (time.Duration, error) {
	d, err := domain.ParseSpan(s, "hdw", maxBlockSpan)
	if err != nil {
		return 0, fmt.Errorf("%q: want %s", s, durationForm)
	}
	return d, nil
}

func (cl *cli) offeringsCmd() *cobra.Command {
	var output, duration, flex, after, before, kind string
	var count int
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "offerings",
		Short: "Capacity blocks on sale for a GPU, size, duration and start range, cheapest $/GPU-h first",
		Long: `offerings searches every provider that sells capacity blocks (AWS Capacity
Blocks for ML; fixed-window reservations) for --count instances with the --gpu
model, lasting --duration and starting between --start-after and
--start-before. Rows are sorted by price per GPU-hour. gpu_count counts every
GPU in the block.

Only blocks of exactly --duration are listed. AWS answers a search with
blocks of other lengths too (a little shorter or longer, ending at the same
time of day): --flex-duration D lists those within D of --duration as well,
after the others, their LENGTH marked ~ in the table.

UPFRONT_USD is the total for the block's window for every cloud: an Azure
capacity reservation, billed by the hour until deleted, shows its total for
the asked duration there and its hourly rate in the table's $/H column.

What a search finds is kept in the data dir for an hour: book one with
` + "`gpumarket book ID`" + `. Offerings already in the ledger are left out.

A provider or region that does not answer within --timeout is named in a
warning on stderr, and the others' offerings are shown (exit 0); the command
fails only when none answered.`,
		Example: `  gpumarket offerings --gpu H100 --count 1 --duration 48h
  gpumarket offerings --gpu H100 --count 1 --duration 1d --flex-duration 20h
  gpumarket offerings --gpu H100 --count 2 --duration 2d --start-after +1d --start-before +2w -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if !cmd.Flags().Changed("gpu") {
				return usagef("--gpu is required: one GPU model such as H100 (one of %s)", strings.Join(domain.GPUModels, ", "))
			}
			if count < 1 || count > ledger.MaxInstances {
				return usagef("--count %d: want a whole number of instances, 1 to %d", count, ledger.MaxInstances)
			}
			if duration == "" {
				return usagef("--duration is required: want %s", durationForm)
			}
			d, err := parseSpan(duration)
			if err != nil {
				return usagef("--duration %s", err)
			}
			var fd time.Duration
			if flex != "" {
				if fd, err = domain.ParseSpan(flex, "hdw", maxBlockSpan); err != nil || fd >= d {
					return usagef("--flex-duration %q: want whole hours, days or weeks less than --duration %s, such as 20h or 1d (blocks within it of the duration are listed too)", flex, duration)
				}
			}
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			q := domain.OfferingQuery{Instances: count, Duration: d, FlexDuration: fd}
			if kind != "" {
				if q.Kinds, err = parseKinds(kind); err != nil {
					return err
				}
				if err := checkKindTerms(q.Kinds, count, d); err != nil {
					return err
				}
			}
			return cl.withApp(cmd, func(a *runner) error {
				if len(a.Query.GPUs) != 1 {
					return usagef("--gpu %s: offerings searches one GPU model at a time", strings.Join(a.Query.GPUs, ","))
				}
				q.GPU = a.Query.GPUs[0]
				q.Regions = a.Query.Regions
				if err := a.Table().CheckDuration(d, a.Query.Providers); err != nil {
					return err
				}
				if err := a.Table().CheckCount(count, a.Query.Providers); err != nil {
					return err
				}
				if err := a.startRange(&q, after, before, a.Now()); err != nil {
					return err
				}
				return a.runOfferings(cmd.Context(), q, timeout, output)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().IntVar(&count, "count", 1, "instances in the block (a p5.48xlarge has 8 GPUs)")
	c.Flags().StringVar(&duration, "duration", "", "length of the block: "+durationForm)
	c.Flags().StringVar(&flex, "flex-duration", "", "also list blocks whose length is within this of --duration (AWS sells some of other lengths), marked ~ in the table; same form, less than --duration")
	c.Flags().StringVar(&after, "start-after", "", "earliest start: "+whenForm+" (default now)")
	c.Flags().StringVar(&before, "start-before", "", "latest start, same forms (default: as far as the cloud sells, 8 weeks for AWS)")
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on the search")
	c.Flags().StringVar(&kind, "kind", "", "only these kinds, comma-separated: "+strings.Join(offeringKinds(), ",")+" (default every kind)")
	return c
}

func (a *runner) runOfferings(parent context.Context, q domain.OfferingQuery, timeout time.Duration, output string) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	ps, down, err := a.Reachable(ctx)
	if err != nil {
		return err
	}
	svc, err := a.Booking(ps, timeout)
	if err != nil {
		return err
	}
	// Each provider is bounded by --timeout inside the service; the
	// ledger's reads and writes have a context of their own, so a hung
	// region costs its warning and no more.
	res, err := svc.FindOfferings(parent, q)
	finders := 0
	for _, p := range ps {
		if _, ok := p.(domain.OfferingFinder); ok {
			finders++
		}
	}
	if err != nil && (finders == 0 || len(res.Failed) < finders) {
		return err // not every provider's failure: the ledger's, say
	}
	if err != nil {
		// Every provider failed: one line per provider (per line of its
		// error: a provider may name several regions), in the order of
		// --provider, and nothing more. All of them refusing the terms
		// is bad input.
		refused := 0
		for _, name := range a.Query.Providers {
			perr, ok := res.Failed[name]
			if !ok {
				continue
			}
			if errors.Is(perr, domain.ErrInvalidQuery) {
				refused++
			}
			for _, line := range strings.Split(strings.TrimSpace(perr.Error()), "\n") {
				fmt.Fprintf(a.errOut, "gpumarket: offerings: %s: %s\n", name, app.Unprefixed(name, line))
			}
		}
		for _, w := range down {
			fmt.Fprintf(a.errOut, "gpumarket: offerings: %s: %s\n", w.Provider, w.Cause)
		}
		if refused == len(res.Failed) && len(down) == 0 {
			return reported(exitUsage)
		}
		return reported(exitFailure)
	}
	// Some answered: a warning per provider that could not be set up,
	// and per provider or region that did not answer.
	for _, w := range down {
		fmt.Fprintf(a.errOut, "gpumarket: warning: offerings: %s: %s\n", w.Provider, w.Cause)
	}
	for _, w := range res.Warnings {
		where := w.Provider
		if w.Region != "" {
			where += " " + w.Region
		}
		fmt.Fprintf(a.errOut, "gpumarket: warning: offerings: %s: %s\n", where, app.Unprefixed(w.Provider, w.Err.Error()))
	}
	if res.SaveErr != nil {
		fmt.Fprintf(a.errOut, "gpumarket: warning: offerings: these offerings could not be kept for `gpumarket book ID`: %v\n", res.SaveErr)
	}
	if res.Hidden > 0 {
		fmt.Fprintf(a.errOut, "gpumarket: offerings: %d offering(s) already in the ledger left out\n", res.Hidden)
	}
	a.banner(output)
	rows := make([]offeringRow, 0, len(res.Offerings))
	for _, o := range res.Offerings {
		if q.WantsKind(o.Terms().Kind) {
			rows = append(rows, offeringRow{Offering: o})
		}
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.errOut, "gpumarket: offerings: nothing on sale for these terms; try other dates, a shorter duration or fewer instances")
	}
	if err := writeRows(a.out, output, rows); err != nil {
		return err
	}
	if output == formatTable {
		for _, o := range res.Offerings {
			if len(o.Segments) > 1 && q.WantsKind(o.Terms().Kind) {
				fmt.Fprintln(a.errOut, "gpumarket: offerings: a training plan's LENGTH is the hours its segments hold, between its START and END; -o json lists its segments")
				break
			}
		}
		for _, o := range res.Offerings {
			if o.FlexLength {
				fmt.Fprintf(a.errOut, "gpumarket: offerings: %s marks a length other than --duration %s, within --flex-duration %s\n",
					present.FlexMark, domain.FormatWindow(q.Duration), domain.FormatWindow(q.FlexDuration))
				break
			}
		}
	}
	return nil
}

// startRange reads --start-after and --start-before into q, against now.
// A start in the past is refused, as every command refuses a window in
// the past (a typo in the month); none is now. A --start-after
// later than any provider in use sells is refused, naming how far ahead
// they sell.
func (a *runner) startRange(q *domain.OfferingQuery, after, before string, now time.Time) error {
	var err error
	if after != "" {
		if q.StartAfter, err = domain.ParseWhen(after, now); err != nil {
			return usagef("--start-after %s", err)
		}
	}
	if before != "" {
		if q.StartBefore, err = domain.ParseWhen(before, now); err != nil {
			return usagef("--start-before %s", err)
		}
		if !q.StartBefore.After(now) {
			return usagef("--start-before %s is in the past (it is %s now): nothing can start before it", before, localStamp(now))
		}
	}
	if !q.StartAfter.IsZero() && q.StartAfter.Before(now.Truncate(time.Minute)) {
		return usagef("--start-after %s is %s, in the past (it is %s now): want a later start, or none for now",
			after, localStamp(q.StartAfter), localStamp(now))
	}
	if lead, ok := a.Table().LongestLead(a.Query.Providers); ok && q.StartAfter.After(now.Add(lead)) {
		return usagef("--start-after %s is too far ahead: blocks are sold to start at most %s ahead (by %s)",
			after, domain.FormatWindow(lead), localStamp(now.Add(lead)))
	}
	if !q.StartAfter.IsZero() && !q.StartBefore.IsZero() && !q.StartBefore.After(q.StartAfter) {
		return usagef("--start-before %s is not after --start-after %s", before, after)
	}
	return nil
}

// localStamp is a time in the terminal's zone, for one-line messages.
func localStamp(t time.Time) string { return t.Local().Format(localLayout) }
