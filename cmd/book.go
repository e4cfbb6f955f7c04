package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// dryRunRow is what `book --dry-run` prints with -o json|csv.
type dryRunRow struct {
	OfferingID string  `json:"offering_id"`
	Provider   string  `json:"provider"`
	DryRun     bool    `json:"dry_run"`
	UpfrontUSD float64 `json:"upfront_usd" table:"%.2f"`
	Message    string  `json:"message"`
}

func (cl *cli) bookCmd() *cobra.Command {
	var output string
	var dryRun, yes bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "book OFFERING_ID",
		Short: "Buy a capacity block found by `gpumarket offerings` (asks for a yes first)",
		Long: `book buys a capacity block (or fixed-window reservation) that an earlier
` + "`gpumarket offerings`" + ` search (or the Blocks view) found. It shows the
instance type, count, GPUs, start and end (local and UTC), the total upfront
cost and $/GPU-hour, and asks you to type yes. Without --yes and with no
terminal on stdin it refuses (exit 2).

Right before the purchase the provider describes the offering again: if its
price (to the cent), dates, size, type or place changed since the search, nothing
is bought — the new terms are shown and, on a terminal, asked for again; with
--yes the command exits 1 with the new terms, and running it again buys at
them. The provider is also asked whether a purchase was already made from the
offering (a ledger lost or set aside): if so its row is re-created and nothing
is bought.

The purchase is recorded in the ledger before it is sent. A purchase whose
answer does not come within --timeout is left "unknown" and is never re-sent:
` + "`gpumarket ledger`" + ` looks it up at the provider. The same offering is never
bought twice. budget.max_booking_usd and budget.max_daily_usd are checked
first, at the price just described.`,
		Example: `  gpumarket offerings --gpu H100 --count 1 --duration 48h
  gpumarket book cb-0123456789abcdef0 --dry-run
  gpumarket book cb-0123456789abcdef0 --yes -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usagef("OFFERING_ID is empty: give an id from `gpumarket offerings`")
			}
			return cl.withApp(cmd, func(a *runner) error {
				return a.runBook(cmd.Context(), id, dryRun, yes, timeout, output)
			})
		},
	}
	addOutputFlag(c, &output)
	c.Flags().BoolVar(&dryRun, "dry-run", false, "only ask the provider whether the purchase would succeed; nothing is bought or recorded")
	c.Flags().BoolVar(&yes, "yes", false, "buy without asking (required when stdin is not a terminal)")
	c.Flags().DurationVar(&timeout, "timeout", ledger.DefaultTimeout, "bound on each call to the provider")
	return c
}

func (a *runner) runBook(ctx context.Context, id string, dryRun, yes bool, timeout time.Duration, output string) error {
	e := a.env
	if err := e.needsConfirmation("book", dryRun, yes); err != nil {
		return err
	}
	st, err := a.Ledger()
	if err != nil {
		return err
	}
	// The offering names its provider; an unknown id is refused below.
	c, _ := st.Offering(ctx, id, a.Now())
	ps, err := a.Providers(ctx, c.Offering.Provider)
	if err != nil {
		return err
	}
	svc, err := a.Booking(ps, timeout)
	if err != nil {
		return err
	}

	q, err := svc.Quote(ctx, id)
	if err != nil && dryRun && errors.Is(err, ledger.ErrBudget) {
		// A dry run over a cap says it would be refused, and still shows
		// what the cloud's dry run answers.
		fmt.Fprint(e.errOut, present.OfferingSummary(q.Offering, q.Offering.Simulated))
		res, derr := svc.Book(ctx, ledger.BookRequest{OfferingID: id, DryRun: true})
		if res.Booking.DryRun {
			fmt.Fprintf(e.out, "dry run: %s (nothing was bought)\n", domain.DryRunAnswer(res.Booking.Message, "the provider accepted the dry run"))
		}
		if derr != nil && !errors.Is(derr, ledger.ErrBudget) {
			return fmt.Errorf("a purchase would be %w; and the dry run: %w", err, derr)
		}
		return fmt.Errorf("a purchase would be %w", err)
	}
	if err != nil {
		if errors.Is(err, ledger.ErrOfferingUnknown) || errors.Is(err, ledger.ErrOfferingExpired) {
			return err // names the id and says to search again
		}
		if q.Offering.ID != "" {
			fmt.Fprint(e.errOut, present.OfferingSummary(q.Offering, q.Offering.Simulated))
		}
		return err
	}
	fmt.Fprint(e.errOut, present.OfferingSummary(q.Offering, q.Offering.Simulated))
	if b := svc.Budget(); b.MaxDailyUSD > 0 {
		fmt.Fprintf(e.errOut, "  budget     today's spending $%.2f of budget.max_daily_usd $%.2f\n", q.DaySpentUSD, b.MaxDailyUSD)
	}

	if dryRun {
		res, err := svc.Book(ctx, ledger.BookRequest{OfferingID: id, DryRun: true})
		var tc *ledger.TermsChangedError
		if errors.As(err, &tc) {
			return a.termsChanged(tc, " --dry-run")
		}
		if err != nil {
			return err
		}
		msg := domain.DryRunAnswer(res.Booking.Message, "the provider accepted the dry run: the purchase would succeed")
		if output == formatTable {
			fmt.Fprintf(e.out, "dry run: %s (nothing was bought)\n", msg)
			return nil
		}
		return writeRows(e.out, output, []dryRunRow{{OfferingID: id, Provider: q.Offering.Provider, DryRun: true, UpfrontUSD: res.Offering.UpfrontUSD, Message: msg}})
	}

	// What is bought is what was shown: the service describes the
	// offering again right before the purchase and refuses at any other
	// terms (a later search in another session, or the cloud repricing
	// it since the search). On a terminal the new terms are shown and
	// asked for again; a script (--yes) is told to run again.
	shown := q.Offering
	for asked := 0; ; asked++ {
		if !yes {
			if err := e.confirm("book", fmt.Sprintf("buy it for $%.2f", shown.UpfrontUSD)); err != nil {
				return err
			}
		}
		res, err := svc.Book(ctx, ledger.BookRequest{OfferingID: shown.ID, Confirmed: shown})
		var tc *ledger.TermsChangedError
		if errors.As(err, &tc) {
			switch {
			case yes:
				return a.termsChanged(tc, " --yes")
			case asked >= maxAsks-1:
				return a.termsChanged(tc, "")
			}
			fmt.Fprintf(e.errOut, "The terms changed since they were shown (%s); nothing was bought. The new terms:\n", tc.Why)
			nq, qerr := svc.Quote(ctx, tc.Now.ID)
			fmt.Fprint(e.errOut, present.OfferingSummary(tc.Now, tc.Now.Simulated))
			if qerr != nil {
				return qerr // over the budget at the new price, say
			}
			shown = nq.Offering
			continue
		}
		if err != nil {
			if res.Row.ID != "" {
				writeRows(e.out, output, present.LedgerRows(time.Now(), res.Row))
			}
			return err
		}
		fmt.Fprintf(e.errOut, "booked: %s, ledger row %s, state %s\n", res.Row.ProviderRef, res.Row.ID, res.Row.State)
		return writeRows(e.out, output, present.LedgerRows(time.Now(), res.Row))
	}
}

// maxAsks bounds how often `book` asks again when the terms keep
// changing under it.
const maxAsks = 3

// termsChanged shows the new terms of an offering and refuses: exit 1,
// with how to buy at them.
func (a *runner) termsChanged(tc *ledger.TermsChangedError, flags string) error {
	fmt.Fprintf(a.errOut, "The terms changed since they were shown (%s); nothing was bought. The new terms:\n", tc.Why)
	fmt.Fprint(a.errOut, present.OfferingSummary(tc.Now, tc.Now.Simulated))
	return fmt.Errorf("refused: the terms of %s changed (%s: now $%.2f for %d × %s from %s to %s; shown $%.2f for %d × %s from %s to %s); nothing was bought: run `gpumarket book %s%s` again to buy at the new terms",
		tc.Shown.ID, tc.Why, tc.Now.UpfrontUSD, tc.Now.InstanceCount, tc.Now.InstanceType, tc.Now.Start.UTC().Format(time.RFC3339),
		tc.Now.End.UTC().Format(time.RFC3339), tc.Shown.UpfrontUSD, tc.Shown.InstanceCount, tc.Shown.InstanceType,
		tc.Shown.Start.UTC().Format(time.RFC3339), tc.Shown.End.UTC().Format(time.RFC3339), tc.Now.ID, flags)
}
