package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Quote is what the confirmation shows before a purchase: the offering's
// terms, its total, and how it stands against the budget.
type Quote struct {
	Offering domain.Offering
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
		if ok, why := s.inFlight(r); ok {
			return q, fmt.Errorf("refused: a purchase of %s is in flight (ledger row %s, by %s: %s); it is not sent twice", offeringID, r.ID, r.Actor, why)
		}
		if !r.Settled() {
			return q, fmt.Errorf("refused: an earlier purchase of %s (ledger row %s) has an unknown outcome; it is not re-sent: reconcile with `gpumarket ledger`", offeringID, r.ID)
		}
		return q, alreadyBooked(r)
	} else if !errors.Is(err, ErrNotFound) {
		return q, err
	}
	if _, err := s.booker(c.Offering.Provider); err != nil {
		return q, err
	}
	return q, nil
}

func (s *Service) booker(provider string) (domain.Booker, error) {
	p, ok := s.provs[provider]
	if !ok {
		return nil, fmt.Errorf("provider %s is not in use in this run (add it to --provider)", provider)
	}
	b, ok := p.(domain.Booker)
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
	// when they said yes (a Quote's). If the terms to be bought differ
	// from it — a later search re-priced the same id, or the cloud sells
	// it on other terms now — nothing is bought: the user is never
	// charged a total other than the one shown.
	Confirmed domain.Offering
}

// SameTerms reports whether two descriptions of an offering sell the same
// thing at the same price: provider, place, type, count, dates and the
// total to the cent — with no tolerance: a $1 change is a change. An
// offering that starts when bought (an Azure reservation) starts at the
// time it was described, so its start is not a term; its hourly rate is
// (the total shrinks as the end draws nearer, at the same rate).
func SameTerms(a, b domain.Offering) bool {
	if a.Provider != b.Provider || a.Region != b.Region || a.Zone != b.Zone || a.InstanceType != b.InstanceType ||
		a.InstanceCount != b.InstanceCount || !a.End.Equal(b.End) || currency(a.Currency) != currency(b.Currency) ||
		a.StartsOnPurchase != b.StartsOnPurchase {
		return false
	}
	if a.StartsOnPurchase {
		return cents(hourlyRate(a)) == cents(hourlyRate(b))
	}
	return a.Start.Equal(b.Start) && cents(a.UpfrontUSD) == cents(b.UpfrontUSD)
}

func cents(usd float64) float64 { return math.Round(usd * 100) }

func currency(c string) string {
	if c == "" {
		return "USD"
	}
	return c
}

// hourlyRate is what an offering that starts on purchase costs per hour.
func hourlyRate(o domain.Offering) float64 {
	if h := o.DurationHours(); h > 0 {
		return o.UpfrontUSD / h
	}
	return math.NaN()
}

// ErrTermsChanged is matched by a *TermsChangedError.
var ErrTermsChanged = errors.New("the offering's terms changed")

// TermsChangedError is a purchase refused because the terms to be bought
// are not the ones shown: the cloud re-describes the offering right
// before money moves (its price, dates or size may have changed since the
// search, an hour ago at most), or a later search re-priced the id. Now
// holds the new terms — shown to the user, who confirms them (book
// Now.ID with Confirmed: Now) or not. Nothing was bought or recorded.
type TermsChangedError struct {
	// Shown is what the user saw and agreed to.
	Shown domain.Offering
	// Now is the offering on its current terms. Its ID may differ from
	// Shown's where the cloud has no offering ids and gpumarket makes them
	// from the terms; it is kept for a Quote or Book by id.
	Now domain.Offering
	// Why says what re-described it: the provider, or a later search.
	Why string
}

func (e *TermsChangedError) Error() string {
	return fmt.Sprintf("refused: the terms of %s changed since they were shown (%s): now $%.2f, %d × %s from %s to %s; shown $%.2f, %d × %s from %s to %s; nothing was bought: look at the new terms and confirm again",
		e.Shown.ID, e.Why, e.Now.UpfrontUSD, e.Now.InstanceCount, e.Now.InstanceType, rfc(e.Now.Start), rfc(e.Now.End),
		e.Shown.UpfrontUSD, e.Shown.InstanceCount, e.Shown.InstanceType, rfc(e.Shown.Start), rfc(e.Shown.End))
}

// Is lets errors.Is(err, ErrTermsChanged) match.
func (e *TermsChangedError) Is(target error) bool { return target == ErrTermsChanged }

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// BookResult is a purchase's outcome.
type BookResult struct {
	// Offering is what was bought (or would be): the terms the provider
	// described right before the purchase.
	Offering domain.Offering
	// Row is the ledger row (zero for a dry run).
	Row     Entry
	Booking domain.Booking
	DryRun  bool
}

// Book buys an offering: look it up, re-describe it at the provider
// (nothing is bought on terms other than those shown: a change is a
// *TermsChangedError carrying the new terms), make sure the provider
// shows no purchase already made from it, check the budget and the
// ledger, then — unless DryRun — record the intent durably, call the
// provider within the timeout, and record the outcome. The budget and the
// ledger use the terms just described, and the cost the provider says it
// charged. A timeout or lost answer leaves the row "unknown" and returns
// an *UnknownError; the purchase is never re-sent. A second Book of an
// offering the ledger holds is refused with a *ledger.DuplicateError
// (after reconciling it, if it was unknown).
func (s *Service) Book(ctx context.Context, req BookRequest) (BookResult, error) {
	s.remember(ctx)
	now := s.opt.Now()
	c, err := s.st.Offering(ctx, req.OfferingID, now)
	if err != nil {
		return BookResult{}, err
	}
	o := c.Offering
	res := BookResult{Offering: o, DryRun: req.DryRun}
	shown := o
	if req.Confirmed.ID != "" {
		if !SameTerms(req.Confirmed, o) {
			return res, &TermsChangedError{Shown: req.Confirmed, Now: o, Why: "a later search re-priced it"}
		}
		shown = req.Confirmed
	}
	b, err := s.booker(o.Provider)
	if err != nil {
		return res, err
	}
	if !req.DryRun && s.st.ReadOnly() {
		return res, fmt.Errorf("refused: %w, and a purchase is recorded before it is sent; nothing was bought", ErrReadOnly)
	}
	actor := req.Actor
	if actor == "" {
		actor = s.opt.Actor
	}
	if o, err = s.fresh(ctx, b, c, shown); err != nil {
		return res, err
	}
	res.Offering = o

	if req.DryRun {
		// A dry run spends nothing, so it writes no row; it still honours
		// the budget and the ledger so it never says "would succeed" for a
		// purchase Book would refuse. Over a cap the cloud is still asked:
		// its answer comes back with the refusal.
		_, overCap := s.Quote(ctx, req.OfferingID)
		if overCap != nil && !errors.Is(overCap, ErrBudget) {
			return res, overCap
		}
		cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
		defer cancel()
		bk, err := b.Book(cctx, domain.BookRequest{Offering: o, DryRun: true, After: now, Actor: actor})
		if err != nil {
			return res, fmt.Errorf("dry run of %s at %s: %w", o.ID, o.Provider, err)
		}
		bk.DryRun = true
		res.Booking = bk
		return res, overCap
	}

	// The ledger is the first record, the cloud the second: a purchase
	// the ledger lost (an emptied file, another data dir) is found at the
	// provider before the same capacity is bought again.
	if err := s.madeBefore(ctx, b, req.OfferingID, o, actor); err != nil {
		return res, err
	}

	reqJSON, err := json.Marshal(o)
	if err != nil {
		return res, fmt.Errorf("book %s: %w", o.ID, err)
	}
	// The key is the id the user booked: a provider that makes ids from
	// the terms may re-describe the same offering under another.
	intent := Entry{
		Kind: kindOf(o), Provider: o.Provider, Cloud: string(o.Cloud), Region: o.Region, Zone: o.Zone,
		InstanceType: o.InstanceType, InstanceCount: o.InstanceCount, GPUCount: o.GPUCount(),
		Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, State: StatePending, Actor: actor,
		CreatedAt: now, Request: reqJSON, IdemKey: req.OfferingID,
	}
	row, err := s.intent(ctx, intent, func(spent float64, existing *Entry) error {
		if existing != nil {
			return nil // reported as a duplicate below
		}
		return s.checkBudget(o.UpfrontUSD, spent)
	})
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			return res, s.duplicate(ctx, dup.Existing)
		}
		return res, err
	}
	res.Row = row
	s.opt.Logger.Info("purchase intent recorded", "row", row.ID, "offering", o.ID, "provider", o.Provider, "usd", o.UpfrontUSD)
	res.Row, err = s.transact(ctx, row, transaction{
		provider: o.Provider, noun: "purchase", subject: "purchase of " + o.ID, made: "bought",
		cancelled: func(r Entry) Entry {
			r.State, r.Error = StateFailed, "not sent: cancelled before the call; nothing was bought"
			return r
		},
		call: func(cctx context.Context) (func(Entry) Entry, string, error) {
			bk, err := b.Book(cctx, domain.BookRequest{Offering: o, After: now, Ref: row.ID, Actor: actor})
			if err == nil {
				res.Booking = bk
			}
			return func(r Entry) Entry { return settleBlock(r, bk, s.opt.Now()) }, bk.ProviderRef, err
		},
	})
	if err != nil {
		return res, err
	}
	if res.Row.State == StateFailed {
		// The cloud answered, and what it answered is a failure (AWS's
		// payment-failed): nothing is held, and the user must hear so.
		return res, fmt.Errorf("purchase of %s failed at %s: %s (ledger row %s)", o.ID, o.Provider, res.Row.Error, res.Row.ID)
	}
	return res, nil
}

// fresh re-describes the offering at its provider right before money
// moves and returns it on the terms it is sold on now. Terms other than
// those shown are a *TermsChangedError (the new terms are kept in the
// store, so they can be quoted and confirmed); an offering no longer on
// sale, or one the provider could not re-describe, is refused: nothing is
// bought on terms that were not just checked. A provider that cannot
// re-describe offerings (it has no OfferingRefresher) sells on the
// search's terms.
func (s *Service) fresh(ctx context.Context, b domain.Booker, c CachedOffering, shown domain.Offering) (domain.Offering, error) {
	o := c.Offering
	r, ok := b.(domain.OfferingRefresher)
	if !ok {
		return o, nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	now, err := r.RefreshOffering(cctx, o)
	cancel()
	switch {
	case errors.Is(err, domain.ErrOfferingGone):
		return o, fmt.Errorf("refused: %s is no longer on sale at %s (%w); nothing was bought: search again with `gpumarket offerings`", o.ID, o.Provider, err)
	case err != nil:
		return o, fmt.Errorf("refused: the terms of %s could not be checked at %s right before buying: %w; nothing was bought: try again", o.ID, o.Provider, err)
	}
	if !SameTerms(shown, now) {
		if now.ID == "" {
			now.ID = o.ID
		}
		if err := s.st.SaveOfferings(context.WithoutCancel(ctx), c.Query, []domain.Offering{now}, s.opt.Now()); err != nil {
			s.opt.Logger.Warn("keep the offering's new terms", "offering", now.ID, "err", err)
		}
		return o, &TermsChangedError{Shown: shown, Now: now, Why: o.Provider + " sells it on other terms now"}
	}
	if now.ID == "" {
		now.ID = o.ID
	}
	return now, nil
}

// recordSince bounds how far back a provider's records are searched for
// a purchase made from an offering: it was made after the offering went
// on sale, at most 8 weeks before its start, and nothing lasts longer
// than 182 days.
var recordSince = domain.CapacityBlockTerms.MaxLead + domain.CapacityBlockTerms.MaxDuration + 24*time.Hour

// madeBefore asks the provider whether a reservation was already made
// from the offering: by its tags (a RecordLister; key is the id the user
// booked), or else by its terms (FindBooking). If one was, the ledger had
// lost it: its row is re-created and the purchase refused. A look-up
// that fails refuses too — the purchase would be made blind.
func (s *Service) madeBefore(ctx context.Context, b domain.Booker, key string, o domain.Offering, actor string) error {
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	var found *domain.CloudRecord
	how := "by its tags"
	if rl, ok := b.(domain.RecordLister); ok {
		recs, err := rl.ListRecords(cctx, s.opt.Now().Add(-recordSince))
		if err != nil {
			return fmt.Errorf("refused: could not check at %s whether %s was already bought: %w; nothing was bought: try again", o.Provider, key, err)
		}
		for _, rec := range recs {
			if Booked(rec.Kind) && (rec.OfferingID == key || rec.OfferingID == o.ID) && rec.State != StateFailed {
				found = &rec
				break
			}
		}
	} else {
		how = "by its terms"
		bk, err := b.FindBooking(cctx, domain.BookRequest{Offering: o, Actor: actor})
		if err != nil {
			return fmt.Errorf("refused: could not check at %s whether %s was already bought: %w; nothing was bought: try again", o.Provider, key, err)
		}
		if bk != nil && bk.State != StateFailed {
			found = &domain.CloudRecord{Kind: kindOf(o), OfferingID: key, ProviderRef: bk.ProviderRef, Provider: o.Provider,
				Cloud: o.Cloud, Region: bk.Region, Zone: bk.Zone, InstanceType: bk.InstanceType, InstanceCount: bk.InstanceCount,
				Start: bk.Start, End: bk.End, CostUSD: bk.CostUSD, State: bk.State}
		}
	}
	if found == nil {
		return nil
	}
	rec := *found
	rec.OfferingID = key
	if rec.Kind == "" {
		rec.Kind = kindOf(o)
	}
	row, err := s.recreate(context.WithoutCancel(ctx), rec, o, fmt.Sprintf("found at %s %s before buying it again: the ledger had no row for it", o.Provider, how))
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			return s.duplicate(ctx, dup.Existing)
		}
		return fmt.Errorf("refused: %s was already bought (%s at %s), and its ledger row could not be re-created: %w; nothing new was bought", key, rec.ProviderRef, o.Provider, err)
	}
	return fmt.Errorf("refused: %s was already bought (%s at %s, found %s); the ledger had lost it, so row %s was re-created; nothing new was bought: %w",
		key, rec.ProviderRef, o.Provider, how, row.ID, ErrDuplicate)
}

// duplicate words the refusal of a second purchase of an offering. If
// the first one's outcome is unknown it is reconciled first, so the user
// learns whether it was bought.
func (s *Service) duplicate(ctx context.Context, existing Entry) error {
	if ok, why := s.inFlight(existing); ok {
		return fmt.Errorf("refused: a purchase of %s is in flight (ledger row %s, by %s: %s); it is not sent twice", existing.IdemKey, existing.ID, existing.Actor, why)
	}
	if !existing.Settled() {
		if r, settled, reason := s.reconcileRow(ctx, existing); settled {
			existing = r
		} else {
			return fmt.Errorf("refused: an earlier purchase of %s (ledger row %s) has an unknown outcome (%s); it is not re-sent: reconcile with `gpumarket ledger`",
				existing.IdemKey, existing.ID, reason)
		}
		if existing.State == StateFailed {
			return fmt.Errorf("refused for now: the earlier purchase of %s (ledger row %s) turned out failed; run the command again to retry", existing.IdemKey, existing.ID)
		}
	}
	return alreadyBooked(existing)
}

// bookedError is the refusal of an offering the ledger holds as bought:
// it matches ledger.ErrDuplicate and says so once.
type bookedError struct{ msg string }

func (e bookedError) Error() string        { return e.msg }
func (e bookedError) Is(target error) bool { return target == ErrDuplicate }

func alreadyBooked(r Entry) error {
	return bookedError{fmt.Sprintf("refused: already booked: ledger row %s (%s, state %s)", r.ID, r.ProviderRef, r.State)}
}

// settleBlock writes what a Booking says into a row.
func settleBlock(r Entry, bk domain.Booking, now time.Time) Entry {
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
	if r.State == "" || r.State == StatePending || r.State == StateUnknown {
		r.State = StateScheduled
	}
	if r.State == StateFailed && r.Error == "" {
		r.Error = bk.Message
	} else if r.State != StateFailed {
		r.Error = ""
	}
	return advance(r, now)
}

// advance moves a block along its dates: scheduled until the start,
// active until the end, then ended. Capacity blocks do so on their own at
// the cloud; the ledger follows the clock rather than ask. A reservation
// stays active past its end: it may bill until it is released (Azure),
// and only Reconcile, which releases it, records it ended.
func advance(r Entry, now time.Time) Entry {
	if !Booked(r.Kind) || r.Start.IsZero() {
		return r
	}
	switch r.State {
	case StateScheduled, StateActive:
		switch {
		case !now.Before(r.End) && r.Kind != KindReservation:
			r.State = StateEnded
		case !now.Before(r.Start):
			r.State = StateActive
		default:
			r.State = StateScheduled
		}
	}
	return r
}

// kindOf is the ledger kind of an offering: the kind of the terms it is
// sold on.
func kindOf(o domain.Offering) string { return o.Terms().Kind }

func offeringOf(r Entry) (domain.Offering, error) {
	var o domain.Offering
	if err := json.Unmarshal(r.Request, &o); err != nil {
		return o, fmt.Errorf("ledger row %s: stored offering: %w", r.ID, err)
	}
	return o, nil
}

func bookingOf(r Entry) domain.Booking {
	return domain.Booking{ProviderRef: r.ProviderRef, Provider: r.Provider, Region: r.Region, Zone: r.Zone,
		InstanceType: r.InstanceType, InstanceCount: r.InstanceCount, Start: r.Start, End: r.End, CostUSD: r.CostUSD, State: r.State}
}
