package cmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/booking"
	"github.com/gpumarket/gpumarket/providers/store"
)

func init() { extraCommands = append(extraCommands, newBookCmd) }

// bookingForm is the accepted form of --timeout of the money commands.
const timeoutForm = "a positive duration such as 60s or 2m"

// checkTimeout refuses a --timeout that is not positive.
func checkTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return usagef("--timeout %s: want %s", timeout, timeoutForm)
	}
	return nil
}

// checkOutputTimeout checks the -o and --timeout flags every command
// that asks the clouds takes, before anything is loaded or fetched.
func checkOutputTimeout(output string, timeout time.Duration) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	return checkTimeout(timeout)
}

// openBooking opens the ledger in the data dir and a booking service over
// the sources. The caller closes the store.
func (e *env) openBooking(ps []providers.Provider, timeout time.Duration) (*booking.Service, *store.Store, error) {
	st, err := store.Open(e.dataDir)
	if err != nil {
		return nil, nil, err
	}
	return e.bookingOver(st, ps, timeout), st, nil
}

// bookingOver is a booking service over an open store.
func (e *env) bookingOver(st *store.Store, ps []providers.Provider, timeout time.Duration) *booking.Service {
	return booking.New(st, ps, booking.Options{
		Budget:  booking.Budget{MaxBookingUSD: e.cfg.Budget.MaxBookingUSD, MaxDailyUSD: e.cfg.Budget.MaxDailyUSD},
		Logger:  e.log,
		Timeout: timeout,
		Actor:   localActor(),
	})
}

// providersWith builds the run's sources plus the named ones: the
// provider an offering or a ledger row belongs to, so that `book ID` and
// `fleet delete ID` reach it without --provider.
func (e *env) providersWith(ctx context.Context, names ...string) ([]providers.Provider, error) {
	all := append([]string(nil), e.query.Providers...)
	for _, n := range names {
		if n != "" && !contains(all, n) {
			all = append(all, n)
		}
	}
	return buildProviders(ctx, e, all)
}

// localActor names who acts from this terminal: "user@host".
func localActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	if name == "" {
		name = "unknown"
	}
	if host == "" {
		return name
	}
	return name + "@" + host
}

// stdinIsTerminal reports whether r is a terminal a person can answer on.
func stdinIsTerminal(r io.Reader) bool {
	f, ok := r.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(f.Fd())
}

// confirm asks "Type yes to <what>" on a terminal and reports whether the
// answer was exactly yes. Without a terminal it refuses with a usage
// error (exit 2): a script must say --yes.
// needsConfirmation refuses at once, with one line, a purchase or launch
// that would have to ask but cannot: stdin is not a terminal and neither
// --yes nor --dry-run was given. Nothing is looked up or fetched first.
func (e *env) needsConfirmation(cmdName string, dryRun, yes bool) error {
	if dryRun || yes || stdinIsTerminal(e.stdin) {
		return nil
	}
	return usagef("%s needs a confirmation: pass --yes to go ahead without asking, or --dry-run (stdin is not a terminal)", cmdName)
}

func (e *env) confirm(cmdName, what string) error {
	if !stdinIsTerminal(e.stdin) {
		return usagef("%s needs a confirmation: pass --yes to %s without asking (stdin is not a terminal)", cmdName, what)
	}
	fmt.Fprintf(e.errOut, "Type yes to %s: ", what)
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read the confirmation: %w", err)
	}
	if strings.TrimSpace(line) != "yes" {
		return errors.New("not confirmed: nothing was done")
	}
	return nil
}

// offeringSummary is the confirmation's text: everything that is bought,
// the total first.
func offeringSummary(o providers.Offering, simulated bool) string {
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
	fmt.Fprintf(&b, "  GPUs       %g × %s\n", o.GPUCount(), o.GPU.Model)
	fmt.Fprintf(&b, "  start      %s\n", bothZones(o.Start))
	fmt.Fprintf(&b, "  end        %s  (%g h)\n", bothZones(o.End), o.DurationHours())
	return b.String()
}

func currency(c string) string {
	if c == "" {
		return "USD"
	}
	return c
}

func location(region, zone string) string {
	if zone == "" {
		return region
	}
	return region + " (" + zone + ")"
}

// bothZones prints a time in local time and in UTC.
func bothZones(t time.Time) string {
	return fmt.Sprintf("%s  (%s)", t.Local().Format("Mon 2006-01-02 15:04 MST"), t.UTC().Format(time.RFC3339))
}

// dryRunRow is what `book --dry-run` prints with -o json|csv.
type dryRunRow struct {
	OfferingID string  `json:"offering_id"`
	Provider   string  `json:"provider"`
	DryRun     bool    `json:"dry_run"`
	UpfrontUSD float64 `json:"upfront_usd" table:"%.2f"`
	Message    string  `json:"message"`
}

func newBookCmd() *cobra.Command {
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

The purchase is recorded in the ledger before it is sent. A purchase whose
answer does not come within --timeout is left "unknown" and is never re-sent:
` + "`gpumarket ledger`" + ` looks it up at the provider. The same offering is never
bought twice. budget.max_booking_usd and budget.max_daily_usd are checked
first.`,
		Example: `  gpumarket offerings --gpu H100 --count 1 --duration 48h
  gpumarket book cb-0123456789abcdef0 --dry-run
  gpumarket book cb-0123456789abcdef0 --yes -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutputTimeout(output, timeout); err != nil {
				return err
			}
			id := strings.TrimSpace(args[0])
			if id == "" {
				return usagef("OFFERING_ID is empty: give an id from `gpumarket offerings`")
			}
			e, err := setup(cmd)
			if err != nil {
				return err
			}
			return e.runBook(cmd.Context(), id, dryRun, yes, timeout, output)
		},
	}
	addOutputFlag(c, &output)
	c.Flags().BoolVar(&dryRun, "dry-run", false, "only ask the provider whether the purchase would succeed; nothing is bought or recorded")
	c.Flags().BoolVar(&yes, "yes", false, "buy without asking (required when stdin is not a terminal)")
	c.Flags().DurationVar(&timeout, "timeout", booking.DefaultTimeout, "bound on each call to the provider")
	return c
}

func (e *env) runBook(ctx context.Context, id string, dryRun, yes bool, timeout time.Duration, output string) error {
	if err := e.needsConfirmation("book", dryRun, yes); err != nil {
		return err
	}
	st, err := store.Open(e.dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	// The offering names its provider; an unknown id is refused below.
	c, _ := st.Offering(ctx, id, time.Now())
	ps, err := e.providersWith(ctx, c.Offering.Provider)
	if err != nil {
		return err
	}
	svc := e.bookingOver(st, ps, timeout)

	q, err := svc.Quote(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrOfferingUnknown) || errors.Is(err, store.ErrOfferingExpired) {
			return err // names the id and says to search again
		}
		if q.Offering.ID != "" {
			fmt.Fprint(e.errOut, offeringSummary(q.Offering, q.Offering.Simulated))
		}
		return err
	}
	fmt.Fprint(e.errOut, offeringSummary(q.Offering, q.Offering.Simulated))
	if b := svc.Budget(); b.MaxDailyUSD > 0 {
		fmt.Fprintf(e.errOut, "  budget     today's spending $%.2f of budget.max_daily_usd $%.2f\n", q.DaySpentUSD, b.MaxDailyUSD)
	}

	if dryRun {
		res, err := svc.Book(ctx, booking.BookRequest{OfferingID: id, DryRun: true})
		if err != nil {
			return err
		}
		msg := res.Booking.Message
		if msg == "" {
			msg = "the provider accepted the dry run: the purchase would succeed"
		}
		if output == formatTable {
			if !strings.HasPrefix(strings.ToLower(msg), "dry run") {
				msg = "dry run: " + msg
			}
			fmt.Fprintf(e.out, "%s (nothing was bought)\n", msg)
			return nil
		}
		return writeRows(e.out, output, []dryRunRow{{OfferingID: id, Provider: q.Offering.Provider, DryRun: true, UpfrontUSD: q.Offering.UpfrontUSD, Message: msg}})
	}

	if !yes {
		if err := e.confirm("book", fmt.Sprintf("buy it for $%.2f", q.Offering.UpfrontUSD)); err != nil {
			return err
		}
	}
	// What is bought is what was shown: the service refuses if a search
	// in another session changed the terms while we asked.
	res, err := svc.Book(ctx, booking.BookRequest{OfferingID: id, Confirmed: q.Offering})
	if err != nil {
		if res.Row.ID != "" {
			writeRows(e.out, output, []ledgerRow{ledgerRowOf(res.Row)})
		}
		return err
	}
	fmt.Fprintf(e.errOut, "booked: %s, ledger row %s, state %s\n", res.Row.ProviderRef, res.Row.ID, res.Row.State)
	return writeRows(e.out, output, []ledgerRow{ledgerRowOf(res.Row)})
}
