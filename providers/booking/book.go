package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/store"
)

// Quote is what the confirmation shows before a purchase: the offering's
// terms, its total, and how it stands against the budget.
type Quote struct {
	Offering providers.Offering
	// SearchedAt is when the search found it.
	SearchedAt time.Time
	CostUSD    float64
	// DaySpentUSD is today's (UTC) ledger sum before this purchase.
	DaySpentUSD float64
}

// Quote looks the offering up in the store and checks it against the
// budget and the ledger, without writing or calling anything. Book does
// the same checks again, under the ledger's lock.
func (s *Service) Quote(ctx context.Context, offeringID string) (Quote, error) {
	c, err := s.st.Offering(ctx, offeringID, s.opt.Now())
	if err != nil {
		return Quote{}, err
	}
	q := Quote{Offering: c.Offering, SearchedAt: c.SearchedAt, CostUSD: c.Offering.UpfrontUSD}
	if q.DaySpentUSD, err = s.st.DaySpent(ctx, s.opt.Now()); err != nil {
		return q, err
	}
	if err := s.checkBudget(q.CostUSD, q.DaySpentUSD); err != nil {
		return q, err
	}
	if r, err := s.st.Holder(ctx, kindOf(c.Offering), offeringID); err == nil {
		if !r.Settled() {
			return q, fmt.Errorf("refused: an earlier purchase of %s (ledger row %s) has an unknown outcome; it is not re-sent: reconcile with `gpumarket ledger`", offeringID, r.ID)
		}
		return q, fmt.Errorf("refused: already booked: ledger row %s (%s, state %s): %w", r.ID, r.ProviderRef, r.State, store.ErrDuplicate)
	} else if !errors.Is(err, store.ErrNotFound) {
		return q, err
	}
	if _, err := s.booker(c.Offering.Provider); err != nil {
		return q, err
	}
	return q, nil
}

func (s *Service) booker(provider string) (providers.Booker, error) {
	p, ok := s.provs[provider]
	if !ok {
		return nil, fmt.Errorf("provider %s is not in use in this run (add it to --provider)", provider)
	}
	b, ok := p.(providers.Booker)
	if !ok {
		return nil, fmt.Errorf("provider %s does not sell capacity blocks", provider)
	}
	return b, nil
}

// BookRequest asks to buy an offering found by an earlier search.
type BookRequest struct {
	OfferingID string
	// DryRun asks the provider whether the purchase would succeed; nothing
	// is bought and nothing is written to the ledger.
	DryRun bool
	// Actor is who buys; "" means Options.Actor.
	Actor string
	// Confirmed, when its ID is set, is the offering as the user saw it
	// when they said yes (a Quote's). If the stored terms differ — a
	// later search re-priced the same id meanwhile — nothing is bought:
	// the user is never charged a total other than the one shown.
	Confirmed providers.Offering
}

// sameTerms reports whether two offerings sell the same thing at the same
// price, to the cent.
func sameTerms(a, b providers.Offering) bool {
	return a.ID == b.ID && a.Provider == b.Provider && a.Region == b.Region && a.Zone == b.Zone &&
		a.InstanceType == b.InstanceType && a.InstanceCount == b.InstanceCount &&
		a.Start.Equal(b.Start) && a.End.Equal(b.End) && math.Round(a.UpfrontUSD*100) == math.Round(b.UpfrontUSD*100)
}

// BookResult is a purchase's outcome.
type BookResult struct {
	Offering providers.Offering
	// Row is the ledger row (zero for a dry run).
	Row     store.Row
	Booking providers.Booking
	DryRun  bool
}

// Book buys an offering: look it up, check the budget and the ledger,
// then — unless DryRun — record the intent durably, call the provider
// within the timeout, and record the outcome. A timeout or lost answer
// leaves the row "unknown" and returns an *UnknownError; the purchase is
// never re-sent. A second Book of an offering the ledger holds is refused
// with a *store.DuplicateError (after reconciling it, if it was unknown).
func (s *Service) Book(ctx context.Context, req BookRequest) (BookResult, error) {
	s.remember(ctx)
	now := s.opt.Now()
	c, err := s.st.Offering(ctx, req.OfferingID, now)
	if err != nil {
		return BookResult{}, err
	}
	o := c.Offering
	res := BookResult{Offering: o, DryRun: req.DryRun}
	if req.Confirmed.ID != "" && !sameTerms(req.Confirmed, o) {
		return res, fmt.Errorf("refused: the terms of %s changed since they were shown (now $%.2f, %d × %s from %s; shown $%.2f, %d × %s from %s); nothing was bought: look at the new terms and confirm again",
			o.ID, o.UpfrontUSD, o.InstanceCount, o.InstanceType, o.Start.UTC().Format(time.RFC3339),
			req.Confirmed.UpfrontUSD, req.Confirmed.InstanceCount, req.Confirmed.InstanceType, req.Confirmed.Start.UTC().Format(time.RFC3339))
	}
	b, err := s.booker(o.Provider)
	if err != nil {
		return res, err
	}
	actor := req.Actor
	if actor == "" {
		actor = s.opt.Actor
	}

	if req.DryRun {
		// A dry run spends nothing, so it writes no row; it still honours
		// the budget and the ledger so it never says "would succeed" for a
		// purchase Book would refuse.
		if _, err := s.Quote(ctx, req.OfferingID); err != nil {
			return res, err
		}
		cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
		defer cancel()
		bk, err := b.Book(cctx, providers.BookRequest{Offering: o, DryRun: true, After: now})
		if err != nil {
			return res, fmt.Errorf("dry run of %s at %s: %w", o.ID, o.Provider, err)
		}
		bk.DryRun = true
		res.Booking = bk
		return res, nil
	}

	reqJSON, err := json.Marshal(o)
	if err != nil {
		return res, fmt.Errorf("book %s: %w", o.ID, err)
	}
	intent := store.Row{
		Kind: kindOf(o), Provider: o.Provider, Cloud: string(o.Cloud), Region: o.Region, Zone: o.Zone,
		InstanceType: o.InstanceType, InstanceCount: o.InstanceCount, GPUCount: o.GPUCount(),
		Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, State: store.StatePending, Actor: actor,
		CreatedAt: now, Request: reqJSON, IdemKey: o.ID,
	}
	row, err := s.intent(ctx, intent, func(spent float64, existing *store.Row) error {
		if existing != nil {
			return nil // reported as a duplicate below
		}
		return s.checkBudget(o.UpfrontUSD, spent)
	})
	if err != nil {
		var dup *store.DuplicateError
		if errors.As(err, &dup) {
			return res, s.duplicate(ctx, dup.Existing)
		}
		return res, err
	}
	res.Row = row
	s.opt.Logger.Info("purchase intent recorded", "row", row.ID, "offering", o.ID, "provider", o.Provider, "usd", o.UpfrontUSD)

	// Cancelled (ctrl+c, a closed session) between the intent and the
	// call: nothing is sent, and the ledger says so rather than leave an
	// "unknown" no look-up could ever settle.
	if err := ctx.Err(); err != nil {
		row.State, row.Error = store.StateFailed, "not sent: cancelled before the call; nothing was bought"
		if res.Row, err = s.update(context.WithoutCancel(ctx), row); err != nil {
			return res, fmt.Errorf("record cancelled purchase %s: %w", row.ID, err)
		}
		return res, fmt.Errorf("purchase of %s not sent: %w", o.ID, ctx.Err())
	}

	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	bk, callErr := b.Book(cctx, providers.BookRequest{Offering: o, After: now, Ref: row.ID})
	cancel()
	// The outcome is written even when ctx is done: the purchase may have
	// happened, and the ledger must say so.
	wctx := context.WithoutCancel(ctx)
	if callErr != nil {
		if s.declined(o.Provider, callErr) {
			row.State, row.Error = store.StateFailed, callErr.Error()
			res.Row, err = s.update(wctx, row)
			if err != nil {
				return res, fmt.Errorf("record failed purchase %s: %w (purchase error: %v)", row.ID, err, callErr)
			}
			return res, fmt.Errorf("purchase of %s declined by %s: %w", o.ID, o.Provider, callErr)
		}
		row.State, row.Error = store.StateUnknown, "no answer: "+callErr.Error()
		res.Row, err = s.update(wctx, row)
		if err != nil {
			return res, fmt.Errorf("record unknown purchase %s: %w (purchase error: %v)", row.ID, err, callErr)
		}
		s.opt.Logger.Warn("purchase outcome unknown", "row", row.ID, "err", callErr)
		return res, &UnknownError{Row: res.Row, Cause: callErr}
	}
	res.Booking = bk
	res.Row, err = s.update(wctx, settleBlock(row, bk, s.opt.Now()))
	if err != nil {
		return res, fmt.Errorf("record purchase %s (bought: %s): %w", row.ID, bk.ProviderRef, err)
	}
	return res, nil
}

// duplicate words the refusal of a second purchase of an offering. If
// the first one's outcome is unknown it is reconciled first, so the user
// learns whether it was bought.
func (s *Service) duplicate(ctx context.Context, existing store.Row) error {
	if existing.State == store.StatePending && s.opt.Now().Sub(existing.UpdatedAt) < s.opt.Timeout+inFlightGrace {
		return fmt.Errorf("refused: a purchase of %s is in flight (ledger row %s, by %s); it is not sent twice", existing.IdemKey, existing.ID, existing.Actor)
	}
	if !existing.Settled() {
		if r, settled, reason := s.reconcileRow(ctx, existing); settled {
			existing = r
		} else {
			return fmt.Errorf("refused: an earlier purchase of %s (ledger row %s) has an unknown outcome (%s); it is not re-sent: reconcile with `gpumarket ledger`",
				existing.IdemKey, existing.ID, reason)
		}
		if existing.State == store.StateFailed {
			return fmt.Errorf("refused for now: the earlier purchase of %s (ledger row %s) turned out failed; run the command again to retry", existing.IdemKey, existing.ID)
		}
	}
	return fmt.Errorf("refused: already booked: ledger row %s (%s, state %s): %w", existing.ID, existing.ProviderRef, existing.State, store.ErrDuplicate)
}

// settleBlock writes what a Booking says into a row.
func settleBlock(r store.Row, bk providers.Booking, now time.Time) store.Row {
	r.ProviderRef = bk.ProviderRef
	if bk.Zone != "" {
		r.Zone = bk.Zone
	}
	if bk.InstanceCount > 0 {
		r.InstanceCount = bk.InstanceCount
	}
	if !bk.Start.IsZero() {
		r.Start, r.End = bk.Start, bk.End
	}
	if bk.CostUSD > 0 {
		r.CostUSD = bk.CostUSD
	}
	// A booking the provider answered for or shows exists: while it is
	// still being made (ARM's Creating) or in a state gpumarket does not
	// know, it is scheduled and follows its dates. The ledger's pending
	// and unknown mean a call with no answer, which is looked up again
	// and keeps the offering refused as "outcome unknown".
	r.State = bk.State
	if r.State == "" || r.State == store.StatePending || r.State == store.StateUnknown {
		r.State = store.StateScheduled
	}
	if r.State == store.StateFailed && r.Error == "" {
		r.Error = bk.Message
	} else if r.State != store.StateFailed {
		r.Error = ""
	}
	return advance(r, now)
}

// advance moves a block along its dates: scheduled until the start,
// active until the end, then ended. Capacity blocks do so on their own at
// the cloud; the ledger follows the clock rather than ask. A reservation
// stays active past its end: it may bill until it is released (Azure),
// and only Reconcile, which releases it, records it ended.
func advance(r store.Row, now time.Time) store.Row {
	if !store.Booked(r.Kind) || r.Start.IsZero() {
		return r
	}
	switch r.State {
	case store.StateScheduled, store.StateActive:
		switch {
		case !now.Before(r.End) && r.Kind != store.KindReservation:
			r.State = store.StateEnded
		case !now.Before(r.Start):
			r.State = store.StateActive
		default:
			r.State = store.StateScheduled
		}
	}
	return r
}

// kindOf is the ledger kind of an offering: the kind of the terms it is
// sold on.
func kindOf(o providers.Offering) string { return o.Terms().Kind }

func offeringOf(r store.Row) (providers.Offering, error) {
	var o providers.Offering
	if err := json.Unmarshal(r.Request, &o); err != nil {
		return o, fmt.Errorf("ledger row %s: stored offering: %w", r.ID, err)
	}
	return o, nil
}

func bookingOf(r store.Row) providers.Booking {
	return providers.Booking{ProviderRef: r.ProviderRef, Provider: r.Provider, Region: r.Region, Zone: r.Zone,
		InstanceType: r.InstanceType, InstanceCount: r.InstanceCount, Start: r.Start, End: r.End, CostUSD: r.CostUSD, State: r.State}
}
