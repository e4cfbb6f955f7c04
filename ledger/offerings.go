package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save offerings: %w", err)
	}
	defer tx.Rollback()
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
	return tx.Commit()
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

var errNoRows = sql.ErrNoRows
