package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Exit codes of DESIGN.md's CLI contract that the app decides.
const (
	ExitFailure = 1
	ExitUsage   = 2
)

// SaidError ends a command with its exit code, all said already.
type SaidError struct{ Code int }

func (e SaidError) Error() string { return fmt.Sprintf("exit %d (said above)", e.Code) }

// Offerings searches the query's providers, each bounded by timeout, and
// warns on stderr of each provider or region that did not answer. When
// every provider failed it says why of each and nothing more: a SaidError,
// of usage when all of them refused the terms.
func (a *App) Offerings(parent context.Context, q domain.OfferingQuery, timeout time.Duration) ([]domain.Offering, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	ps, down, err := a.Reachable(ctx)
	if err != nil {
		return nil, err
	}
	svc, err := a.Booking(ps, timeout)
	if err != nil {
		return nil, err
	}
	// The ledger's reads and writes have a context of their own, so a
	// hung region costs its warning and no more.
	res, err := svc.FindOfferings(parent, q)
	finders := 0
	for _, p := range ps {
		if _, ok := p.(domain.OfferingFinder); ok {
			finders++
		}
	}
	if err != nil && (finders == 0 || len(res.Failed) < finders) {
		return nil, err // not every provider's failure: the ledger's, say
	}
	say := func(prefix, who, msg string) {
		fmt.Fprintf(a.errOut, "gpumarket: %sofferings: %s: %s\n", prefix, who, msg)
	}
	if err != nil {
		// One line per provider (per line of its error: a provider may
		// name several regions), in the order of --provider.
		refused := 0
		for _, name := range a.s.Query.Providers {
			perr, ok := res.Failed[name]
			if !ok {
				continue
			}
			if errors.Is(perr, domain.ErrInvalidQuery) {
				refused++
			}
			for _, line := range strings.Split(strings.TrimSpace(perr.Error()), "\n") {
				say("", name, Unprefixed(name, line))
			}
		}
		for _, w := range down {
			say("", w.Provider, w.Cause)
		}
		if refused == len(res.Failed) && len(down) == 0 {
			return nil, SaidError{ExitUsage}
		}
		return nil, SaidError{ExitFailure}
	}
	for _, w := range down {
		say("warning: ", w.Provider, w.Cause)
	}
	for _, w := range res.Warnings {
		say("warning: ", strings.TrimSpace(w.Provider+" "+w.Region), Unprefixed(w.Provider, w.Err.Error()))
	}
	if res.SaveErr != nil {
		fmt.Fprintf(a.errOut, "gpumarket: warning: offerings: these offerings could not be kept for `gpumarket book ID`: %v\n", res.SaveErr)
	}
	if res.Hidden > 0 {
		fmt.Fprintf(a.errOut, "gpumarket: offerings: %d offering(s) already in the ledger left out\n", res.Hidden)
	}
	var out []domain.Offering
	for _, o := range res.Offerings {
		if q.WantsKind(o.Terms().Kind) {
			out = append(out, o)
		}
	}
	return out, nil
}

// OfferingTerms completes q with the query's GPU, regions and start range,
// refusing terms no provider in use sells, and a start in the past (a typo
// in the month: none is now).
func (a *App) OfferingTerms(q *domain.OfferingQuery, after, before string, now time.Time) error {
	if len(q.Kinds) == 1 {
		t := domain.TermsOfKind(q.Kinds[0])
		if err := t.ValidInstances(q.Instances); err != nil {
			return Usagef("--count %v", strings.TrimPrefix(err.Error(), "count "))
		}
		if err := t.ValidDuration(q.Duration); err != nil {
			return Usagef("--duration %v", strings.TrimPrefix(err.Error(), "duration "))
		}
	}
	if len(a.s.Query.GPUs) != 1 {
		return Usagef("--gpu %s: offerings searches one GPU model at a time", strings.Join(a.s.Query.GPUs, ","))
	}
	q.GPU, q.Regions = a.s.Query.GPUs[0], a.s.Query.Regions
	if err := a.table.CheckDuration(q.Duration, a.s.Query.Providers); err != nil {
		return err
	}
	if err := a.table.CheckCount(q.Instances, a.s.Query.Providers); err != nil {
		return err
	}
	var err error
	if after != "" {
		if q.StartAfter, err = domain.ParseWhen(after, now); err != nil {
			return Usagef("--start-after %s", err)
		}
	}
	if before != "" {
		if q.StartBefore, err = domain.ParseWhen(before, now); err != nil {
			return Usagef("--start-before %s", err)
		}
		if !q.StartBefore.After(now) {
			return Usagef("--start-before %s is in the past (it is %s now): nothing can start before it", before, LocalStamp(now))
		}
	}
	if !q.StartAfter.IsZero() && q.StartAfter.Before(now.Truncate(time.Minute)) {
		return Usagef("--start-after %s is %s, in the past (it is %s now): want a later start, or none for now",
			after, LocalStamp(q.StartAfter), LocalStamp(now))
	}
	if lead, ok := a.table.LongestLead(a.s.Query.Providers); ok && q.StartAfter.After(now.Add(lead)) {
		return Usagef("--start-after %s is too far ahead: blocks are sold to start at most %s ahead (by %s)",
			after, domain.FormatWindow(lead), LocalStamp(now.Add(lead)))
	}
	if !q.StartAfter.IsZero() && !q.StartBefore.IsZero() && !q.StartBefore.After(q.StartAfter) {
		return Usagef("--start-before %s is not after --start-after %s", before, after)
	}
	return nil
}

// LocalLayout is a time in the terminal's zone: "2026-12-02 09:00 EST".
const LocalLayout = "2006-01-02 15:04 MST"

// LocalStamp is a time in the terminal's zone, for one-line messages.
func LocalStamp(t time.Time) string { return t.Local().Format(LocalLayout) }
