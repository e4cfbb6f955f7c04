package cmd

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

func (cl *cli) ledgerCmd() *cobra.Command {
	var output string
	var timeout time.Duration
	var rebuild bool
	c := &cobra.Command{
		Use:   "ledger",
		Short: "What was booked or launched: state, cost, provider ids (reconciles unknown outcomes first)",
		Long: `ledger prints every recorded purchase, fleet launch and deletion, newest first.

Before printing it reconciles: every row whose outcome is unknown (the answer
was lost to a timeout or a crash) is looked up at its provider, within
--timeout, and recorded if found. Rows it cannot settle yet stay "unknown" and
are named on stderr; they are never retried. A row whose call another process
is still making (its owner's lock or heartbeat says so) is left alone, whatever
--timeout says. committed_usd is what a row may cost over its known window
(null for a fleet with no end), cost_so_far_usd what it has cost up to now (a
fleet at its hourly estimate over the hours it ran), cost_usd its final cost
once it is over (null before). start and end are when it became active and
when it ended — for a scheduled fleet (fleet launch --start/--for), its window
until then. A fleet that launched nothing costs 0.

Reconciling also keeps the schedules gpumarket keeps (where the cloud has none:
Azure scale sets): a fleet whose start has come is launched, one whose end has
come is deleted, at once, and the row's note says how late. A fleet whose
whole window passed with no gpumarket running is not launched (failed, nothing
spent). A scheduled fleet not launched yet is cancelled with fleet delete.

--rebuild re-creates the rows the ledger lacks from what the clouds show: every
purchase and launch carries tags naming its ledger row, and every provider in
--provider that can list them is asked. Rows the ledger has are left as they
are, so it may be run again. A ledger file that is empty or not a ledger is
refused by every command; --rebuild keeps it aside (renamed
gpumarket.db.unreadable-<time>) and starts a new ledger from the clouds.

On a data dir this user may not write, the ledger is opened read-only: it is
listed as recorded, and nothing is reconciled, released or rebuilt.`,
		Example: `  gpumarket ledger
  gpumarket ledger -o json
  gpumarket ledger --rebuild --provider aws,azure`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cl.withApp(cmd, func(a *runner) error {
				rows, err := a.LedgerRun(cmd.Context(), timeout, rebuild, output == formatTable, a.say)
				if err != nil {
					return err
				}
				return writeRows(a.out, output, present.LedgerRows(time.Now(), rows...))
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on the reconciliation of unknown outcomes")
	c.Flags().BoolVar(&rebuild, "rebuild", false, "re-create the rows the ledger lacks from what the clouds show (their tags); an unreadable ledger file is kept aside")
	return c
}
