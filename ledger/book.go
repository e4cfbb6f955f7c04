package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Quote is what a confirmation shows: terms, total and the budget's verdict.
type Quote struct {
	Offering domain.Offering
	// SearchedAt is when the search found it.
	SearchedAt time.Time
	CostUSD    float64
	// DaySpentUSD is today's (UTC) ledger sum before this purchase.
	DaySpentUSD float64
}

// Quote checks an offering against the budget and the ledger, writing nothing.
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
		return q, s.duplicate(ctx, r, false)
	} else if !errors.Is(err, ErrNotFound) {
		return q, err
	}
	_, err = ability[domain.Booker](s, c.Offering.Provider, "does not sell capacity blocks")
	return q, err
}

// ability is the provider in use that can do T; cannot says what it cannot: "does not launch fleets".
func ability[T any](s *Service, provider, cannot string) (T, error) {
	p, ok := s.provs[provider]
	if !ok {
		return *new(T), fmt.Errorf("provider %s is not in use in this run (add it to --provider)", provider)
	}
	t, ok := p.(T)
	if !ok {
		return t, fmt.Errorf("provider %s %s", provider, cannot)
	}
	return t, nil
}

// BookRequest asks to buy an offering found by an earlier search.
type BookRequest struct {
	OfferingID string
	// DryRun asks the provider only; nothing is bought or written.
	DryRun bool
	// Actor is who buys; "" means Options.Actor.
	Actor string
	// Confirmed, when set, is the offering as shown: other terms are refused.
	Confirmed domain.Offering
}

// SameTerms reports whether two offerings sell the same thing at the same price, to the cent.
func SameTerms(a, b domain.Offering) bool {
	if a.Provider != b.Provider || a.Region != b.Region || a.Zone != b.Zone || a.InstanceType != b.InstanceType ||
		a.InstanceCount != b.InstanceCount || !a.End.Equal(b.End) || cmp.Or(a.Currency, "USD") != cmp.Or(b.Currency, "USD") ||
		a.StartsOnPurchase != b.StartsOnPurchase {
		return false
	}
	if a.StartsOnPurchase {
		return cents(hourlyRate(a)) == cents(hourlyRate(b))
	}
	return a.Start.Equal(b.Start) && cents(a.UpfrontUSD) == cents(b.UpfrontUSD)
}

func cents(usd float64) float64 { return math.Round(usd * 100) }

// hourlyRate is what an offering that starts on purchase costs per hour.
func hourlyRate(o domain.Offering) float64 {
	if h := o.DurationHours(); h > 0 {
		return o.UpfrontUSD / h
	}
	return math.NaN()
}

// ErrTermsChanged is matched by a *TermsChangedError.
var ErrTermsChanged = errors.New("the offering's terms changed")

// TermsChangedError refuses a purchase on terms other than those shown; Now holds the new ones.
type TermsChangedError struct {
	// Shown is what the user saw and agreed to.
	Shown domain.Offering
	// Now is the offering on its current terms, its ID kept for Quote or Book.
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
	// Offering is what was bought (or would be), as described right before.
	Offering domain.Offering
	// Row is the ledger row (zero for a dry run).
	Row     Entry
	Booking domain.Booking
	DryRun  bool
}

// Book buys an offering through the ledger (docs/DESIGN.md, "Money").
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
	b, err := ability[domain.Booker](s, o.Provider, "does not sell capacity blocks")
	if err != nil {
		return res, err
	}
	if !req.DryRun && s.st.ReadOnly() {
		return res, fmt.Errorf("refused: %w, and a purchase is recorded before it is sent; nothing was bought", ErrReadOnly)
	}
	actor := cmp.Or(req.Actor, s.opt.Actor)
	if o, err = s.fresh(ctx, b, c, shown); err != nil {
		return res, err
	}
	res.Offering = o

	if req.DryRun {
		// A dry run writes no row, but never says "would succeed" where Book would refuse.
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

	// A purchase the ledger lost is found at the provider before buying again.
	if err := s.madeBefore(ctx, b, req.OfferingID, o, actor); err != nil {
		return res, err
	}

	reqJSON, err := json.Marshal(o)
	if err != nil {
		return res, fmt.Errorf("book %s: %w", o.ID, err)
	}
	// The key is the id the user booked; a re-description may carry another.
	intent := Entry{
		Kind: kindOf(o), Provider: o.Provider, Cloud: string(o.Cloud), Region: o.Region, Zone: o.Zone,
		InstanceType: o.InstanceType, InstanceCount: o.InstanceCount, GPUCount: o.GPUCount(),
		Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, State: StatePending, Actor: actor,
		CreatedAt: now, Request: reqJSON, IdemKey: req.OfferingID,
	}
	row, err := s.st.RecordIntent(ctx, intent, func(spent Spending, existing *Entry, _ []Entry) error {
		if existing != nil {
			return nil // reported as a duplicate below
		}
		return s.checkHold(HoldOf(intent), spent)
	})
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			return res, s.duplicate(ctx, dup.Existing, true)
		}
		return res, err
	}
	res.Row = row
	s.opt.Logger.Info("purchase intent recorded", "row", row.ID, "offering", o.ID, "provider", o.Provider, "usd", o.UpfrontUSD)
	res.Row, err = s.transact(ctx, row, transaction{
		provider: o.Provider, noun: "purchase", subject: "purchase of " + o.ID, made: "bought",
		cancelled: [2]string{StateFailed, "not sent: cancelled before the call; nothing was bought"},
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
		// The cloud answered with a failure (AWS's payment-failed): nothing is held.
		return res, fmt.Errorf("purchase of %s failed at %s: %s (ledger row %s)", o.ID, o.Provider, res.Row.Error, res.Row.ID)
	}
	return res, nil
}

// fresh re-describes the offering right before money moves; other terms are a *TermsChangedError.
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
	now.ID = cmp.Or(now.ID, o.ID)
	if !SameTerms(shown, now) {
		if err := s.st.SaveOfferings(context.WithoutCancel(ctx), c.Query, []domain.Offering{now}, s.opt.Now()); err != nil {
			s.opt.Logger.Warn("keep the offering's new terms", "offering", now.ID, "err", err)
		}
		return o, &TermsChangedError{Shown: shown, Now: now, Why: o.Provider + " sells it on other terms now"}
	}
	return now, nil
}

// recordSince covers a purchase's longest lead plus its longest term.
var recordSince = domain.CapacityBlockTerms.MaxLead + domain.CapacityBlockTerms.MaxDuration + 24*time.Hour

// madeBefore refuses a purchase the provider shows already made, re-creating its lost row.
func (s *Service) madeBefore(ctx context.Context, b domain.Booker, key string, o domain.Offering, actor string) error {
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	var found *domain.CloudRecord
	how := "by its tags"
	cannot := func(err error) error {
		return fmt.Errorf("refused: could not check at %s whether %s was already bought: %w; nothing was bought: try again", o.Provider, key, err)
	}
	if rl, ok := b.(domain.RecordLister); ok {
		recs, err := rl.ListRecords(cctx, s.opt.Now().Add(-recordSince))
		if err != nil {
			return cannot(err)
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
			return cannot(err)
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
	rec.Kind = cmp.Or(rec.Kind, kindOf(o))
	row, err := s.recreate(context.WithoutCancel(ctx), rec, o, fmt.Sprintf("found at %s %s before buying it again: the ledger had no row for it", o.Provider, how))
	if err != nil {
		var dup *DuplicateError
		if errors.As(err, &dup) {
			return s.duplicate(ctx, dup.Existing, true)
		}
		return fmt.Errorf("refused: %s was already bought (%s at %s), and its ledger row could not be re-created: %w; nothing new was bought", key, rec.ProviderRef, o.Provider, err)
	}
	return fmt.Errorf("refused: %s was already bought (%s at %s, found %s); the ledger had lost it, so row %s was re-created; nothing new was bought: %w",
		key, rec.ProviderRef, o.Provider, how, row.ID, ErrDuplicate)
}

// duplicate words the refusal of a second purchase, reconciling an unknown first when it may write.
func (s *Service) duplicate(ctx context.Context, existing Entry, reconcile bool) error {
	if ok, why := s.inFlight(existing); ok {
		return fmt.Errorf("refused: a purchase of %s is in flight (ledger row %s, by %s: %s); it is not sent twice", existing.IdemKey, existing.ID, existing.Actor, why)
	}
	if !existing.Settled() {
		reason, settled := "", false
		if reconcile {
			var r Entry
			if r, settled, reason = s.reconcileRow(ctx, existing); settled {
				existing = r
			}
			reason = " (" + reason + ")"
		}
		if !settled {
			return fmt.Errorf("refused: an earlier purchase of %s (ledger row %s) has an unknown outcome%s; it is not re-sent: reconcile with `gpumarket ledger`",
				existing.IdemKey, existing.ID, reason)
		}
		if existing.State == StateFailed {
			return fmt.Errorf("refused for now: the earlier purchase of %s (ledger row %s) turned out failed; run the command again to retry", existing.IdemKey, existing.ID)
		}
	}
	return alreadyBooked(existing)
}

// bookedError matches ErrDuplicate and says so once.
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
	// The ledger's pending and unknown mean no answer: an answered booking is scheduled.
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

// advance moves a block along its dates; a reservation bills until Reconcile releases it.
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

// kindOf is the ledger kind of the terms an offering is sold on.
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

// OfferingTTL is how long a found offering may be booked by id.
const OfferingTTL = time.Hour

// CachedOffering is an offering as a search found it.
type CachedOffering struct {
	Offering   domain.Offering
	Query      domain.OfferingQuery
	SearchedAt time.Time
}

// ErrOfferingUnknown is returned for an id no search has found.
var ErrOfferingUnknown = errors.New("unknown offering id")

// ErrOfferingExpired: older than OfferingTTL, or its start has passed.
var ErrOfferingExpired = errors.New("offering expired")

// SaveOfferings remembers what a search found; the same id replaces it.
func (s *Store) SaveOfferings(ctx context.Context, q domain.OfferingQuery, offs []domain.Offering, at time.Time) error {
	if s.readOnly {
		return fmt.Errorf("save offerings: %w", ErrReadOnly)
	}
	qj, err := json.Marshal(q)
	if err != nil {
		return fmt.Errorf("save offerings: %w", err)
	}
	return s.inTx(ctx, "save offerings", func(tx *sql.Tx) error {
		for _, o := range offs {
			oj, err := json.Marshal(o)
			if err != nil {
				return fmt.Errorf("save offering %s: %w", o.ID, err)
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO offerings (id, provider, offering, query, searched_at, start_at) VALUES (?,?,?,?,?,?)
				ON CONFLICT(id) DO UPDATE SET provider=excluded.provider, offering=excluded.offering, query=excluded.query,
				searched_at=excluded.searched_at, start_at=excluded.start_at`,
				o.ID, o.Provider, string(oj), string(qj), fmtTime(at), fmtTime(o.Start))
			if err != nil {
				return fmt.Errorf("save offering %s: %w", o.ID, err)
			}
		}
		// Forget searches nobody can book any more, so the file does not grow.
		if _, err := tx.ExecContext(ctx, `DELETE FROM offerings WHERE searched_at < ?`, fmtTime(at.Add(-7*24*time.Hour))); err != nil {
			return fmt.Errorf("save offerings: prune: %w", err)
		}
		return nil
	})
}

// Offering returns the offering found under id (an expired one too, with the error).
func (s *Store) Offering(ctx context.Context, id string, now time.Time) (CachedOffering, error) {
	var oj, qj, at string
	err := s.db.QueryRowContext(ctx, `SELECT offering, query, searched_at FROM offerings WHERE id = ?`, id).Scan(&oj, &qj, &at)
	if err != nil {
		switch {
		case errors.Is(err, errNoRows) && s.readOnly:
			return CachedOffering{}, fmt.Errorf("offering %q: %w: %w, so no search made here is kept for `book`, and nothing can be bought here "+
				"(a purchase is recorded before it is sent): run it as the user who owns the data dir", id, ErrOfferingUnknown, ErrReadOnly)
		case errors.Is(err, errNoRows):
			return CachedOffering{}, fmt.Errorf("offering %q: %w: search again with `gpumarket offerings`", id, ErrOfferingUnknown)
		}
		return CachedOffering{}, fmt.Errorf("offering %q: %w", id, err)
	}
	var c CachedOffering
	if err := json.Unmarshal([]byte(oj), &c.Offering); err != nil {
		return CachedOffering{}, fmt.Errorf("offering %q: stored terms: %w", id, err)
	}
	if err := json.Unmarshal([]byte(qj), &c.Query); err != nil {
		return CachedOffering{}, fmt.Errorf("offering %q: stored query: %w", id, err)
	}
	if c.SearchedAt, err = parseTime(at); err != nil {
		return CachedOffering{}, fmt.Errorf("offering %q: %w", id, err)
	}
	switch {
	case !c.Offering.StartsOnPurchase && !c.Offering.Start.IsZero() && !now.Before(c.Offering.Start):
		return c, fmt.Errorf("offering %q started at %s: %w: search again with `gpumarket offerings`",
			id, c.Offering.Start.UTC().Format(time.RFC3339), ErrOfferingExpired)
	case now.Sub(c.SearchedAt) > OfferingTTL:
		return c, fmt.Errorf("offering %q was found %s ago (offers are kept %s): %w: search again with `gpumarket offerings`",
			id, now.Sub(c.SearchedAt).Round(time.Minute), OfferingTTL, ErrOfferingExpired)
	}
	return c, nil
}
