package cmd

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

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
			if !cmd.Flags().Changed("gpu") {
				return usagef("--gpu is required: one GPU model such as H100 (one of %s)", strings.Join(domain.GPUModels, ", "))
			}
			if count < 1 || count > domain.MaxInstances {
				return usagef("--count %d: want a whole number of instances, 1 to %d", count, domain.MaxInstances)
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
			q := domain.OfferingQuery{Instances: count, Duration: d, FlexDuration: fd}
			if kind != "" {
				if q.Kinds, err = parseKinds(kind); err != nil {
					return err
				}
			}
			return cl.withApp(cmd, func(a *runner) error {
				if err := a.OfferingTerms(&q, after, before, a.Now()); err != nil {
					return err
				}
				offs, err := a.Offerings(cmd.Context(), q, timeout)
				if err != nil {
					return err
				}
				return a.writeOfferings(q, offs, output)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().IntVar(&count, "count", 1, "instances in the block (a p5.48xlarge has 8 GPUs)")
	c.Flags().StringVar(&duration, "duration", "", "length of the block: "+durationForm)
	c.Flags().StringVar(&flex, "flex-duration", "", "also list blocks whose length is within this of --duration (AWS sells some of other lengths), marked ~ in the table; same form, less than --duration")
	c.Flags().StringVar(&after, "start-after", "", "earliest start: "+domain.WhenForm+" (default now)")
	c.Flags().StringVar(&before, "start-before", "", "latest start, same forms (default: as far as the cloud sells, 8 weeks for AWS)")
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on the search")
	c.Flags().StringVar(&kind, "kind", "", "only these kinds, comma-separated: "+strings.Join(offeringKinds(), ",")+" (default every kind)")
	return c
}

// writeOfferings prints what is on sale, with the table's notes on stderr.
func (a *runner) writeOfferings(q domain.OfferingQuery, offs []domain.Offering, output string) error {
	a.banner(output)
	rows := make([]present.OfferingRow, len(offs))
	for i, o := range offs {
		rows[i] = present.OfferingRow{Offering: o}
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.errOut, "gpumarket: offerings: nothing on sale for these terms; try other dates, a shorter duration or fewer instances")
	}
	if err := writeRows(a.out, output, rows); err != nil {
		return err
	}
	if output == formatTable {
		if slices.ContainsFunc(offs, func(o domain.Offering) bool { return len(o.Segments) > 1 }) {
			fmt.Fprintln(a.errOut, "gpumarket: offerings: a training plan's LENGTH is the hours its segments hold, between its START and END; -o json lists its segments")
		}
		if slices.ContainsFunc(offs, func(o domain.Offering) bool { return o.FlexLength }) {
			fmt.Fprintf(a.errOut, "gpumarket: offerings: %s marks a length other than --duration %s, within --flex-duration %s\n",
				present.FlexMark, domain.FormatWindow(q.Duration), domain.FormatWindow(q.FlexDuration))
		}
	}
	return nil
}
