package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Kinds of ledger rows.
const (
	KindBlock       = domain.KindBlock
	KindFleet       = domain.KindFleet
	KindReservation = domain.KindReservation
)

// Booked reports whether a row of the kind books a fixed window (an
// offering sold on domain.BookingTerms), as opposed to a fleet.
func Booked(kind string) bool { return domain.TermsOfKind(kind) != nil }

// States of a ledger row (DESIGN.md's contract).
const (
	// StatePending: the intent is recorded and the call is being made.
	StatePending = "pending"
	// StateUnknown: the call was made (or may have been) but its answer
	// was lost (timeout, crash); it must be reconciled before any retry.
	StateUnknown   = "unknown"
	StateScheduled = "scheduled"
	StateActive    = "active"
	StateEnded     = "ended"
	StateFailed    = "failed"
	StateDeleted   = "deleted"
)

// States lists every ledger state.
var States = []string{StatePending, StateUnknown, StateScheduled, StateActive, StateEnded, StateFailed, StateDeleted}

// Entry is one ledger row: an action that spends money, from its intent to
// its outcome.
type Entry struct {
	// ID is sortable by creation time (a ULID).
	ID            string
	Kind          string
	Provider      string
	Cloud         string
	Region        string
	Zone          string
	InstanceType  string
	InstanceCount int
	GPUCount      float64
	// Start and End bound a block. For a fleet they are when it became
	// active and when it was deleted or found ended; zero while unknown.
	Start, End time.Time
	// CostUSD is the expected cost at intent and the actual cost once
	// known. CostNote says what the figure is when it is an estimate (a
	// fleet has no fixed total).
	CostUSD  float64
	CostNote string
	State    string
	// ProviderRef is the cloud's id: "cr-…", "fleet-…", an Azure id.
	ProviderRef string
	Actor       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Error is what went wrong: a refusal, a lost answer, a failed
	// release. Note is what happened that is not an error: who deleted a
	// fleet, that a row was re-created from the cloud's tags, that a
	// simulated fleet ended with its process.
	Error string
	Note  string
	// Owner is the process whose call the row records (Owner.String):
	// while the row is pending, only that process's lock (this host) or
	// heartbeat (another host) says whether the call is still in flight.
	// Heartbeat is the owner's last beat, zero when it sent none.
	Owner     string
	Heartbeat time.Time
	// Request is the JSON of what was asked: the offering, the fleet spec.
	Request json.RawMessage
	// IdemKey makes the action idempotent: the offering id of a block,
	// the client token of a fleet. At most one row of a kind that is not
	// failed may hold a key.
	IdemKey string
}

// Settled reports whether the row's outcome is known.
func (r Entry) Settled() bool { return r.State != StatePending && r.State != StateUnknown }

// ErrDuplicate is returned (wrapped in a *DuplicateError) when a row that
// is not failed already holds the idempotency key.
var ErrDuplicate = errors.New("already in the ledger")

// DuplicateError names the row that already holds an idempotency key.
type DuplicateError struct{ Existing Entry }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("already recorded: ledger row %s (%s %s, state %s)", e.Existing.ID, e.Existing.Kind, e.Existing.IdemKey, e.Existing.State)
}

// Unwrap lets errors.Is(err, ErrDuplicate) match.
func (e *DuplicateError) Unwrap() error { return ErrDuplicate }

// ErrNotFound is returned for an id the store does not hold.
var ErrNotFound = errors.New("not found")

// NewID returns a ULID: 48 bits of milliseconds and 80 random bits in
// Crockford base32, 26 characters, sortable by time. It is also a valid
// AWS ClientToken (at most 64 ASCII characters).
func NewID(now time.Time) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	if _, err := rand.Read(b[6:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on supported platforms
	}
	// 128 bits → 26 base32 digits, most significant first.
	var out [26]byte
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 | uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// IntentCheck is called inside the intent's transaction, with the write
// lock held, so no other process can record a purchase between the check
// and the insert. daySpent is the UTC day's sum of cost over rows that are
// not failed (NaN when a block of it has no known cost, as DaySpent); existing is
// the row that already holds the key, or nil.
type IntentCheck func(daySpent float64, existing *Entry) error

// RecordIntent writes the row (its State is usually pending) and commits
// durably before it returns. It fails with a *DuplicateError when a row
// that is not failed holds the same kind and key, and with check's error
// when check refuses.
func (s *Store) RecordIntent(ctx context.Context, r Entry, check IntentCheck) (Entry, error) {
	var c OpenIntentCheck
	if check != nil {
		c = func(daySpent float64, existing *Entry, _ []Entry) error { return check(daySpent, existing) }
	}
	return s.RecordIntentOpen(ctx, r, c)
}

// OpenIntentCheck is an IntentCheck that also sees the rows of the same
// kind whose outcome is not known yet (pending or unknown), read under the
// same write lock: an action without a natural key (a fleet) can refuse
// to start while the same action is in flight in another process.
type OpenIntentCheck func(daySpent float64, existing *Entry, open []Entry) error

// RecordIntentOpen is RecordIntent with an OpenIntentCheck.
func (s *Store) RecordIntentOpen(ctx context.Context, r Entry, check OpenIntentCheck) (Entry, error) {
	if r.ID == "" {
		r.ID = NewID(s.now())
	}
	if r.Kind == "" || r.Provider == "" || r.IdemKey == "" || r.State == "" {
		return Entry{}, fmt.Errorf("record intent: kind, provider, idempotency key and state are required")
	}
	if s.readOnly {
		return Entry{}, fmt.Errorf("record intent: %w", ErrReadOnly)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	if r.State == StatePending {
		// The call's lock is taken before the row exists, so no other
		// process ever sees the row pending without a live owner. It is
		// held until EndCall (or Close).
		if err := s.claimCall(r.ID); err != nil {
			return Entry{}, fmt.Errorf("record intent: %w", err)
		}
		r.Owner, r.Heartbeat = s.owner.String(), r.CreatedAt
	}
	out, err := s.recordIntent(ctx, r, check)
	if err != nil && r.State == StatePending {
		s.EndCall(r.ID)
	}
	return out, err
}

func (s *Store) recordIntent(ctx context.Context, r Entry, check OpenIntentCheck) (Entry, error) {
	// An intent is as old as its creation: the caller's clock decides
	// when a pending call counts as abandoned.
	r.UpdatedAt = r.CreatedAt
	if len(r.Request) == 0 {
		r.Request = json.RawMessage("{}")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Entry{}, fmt.Errorf("record intent: %w", err)
	}
	defer tx.Rollback()
	existing, err := scanOne(tx.QueryRowContext(ctx, `SELECT `+s.cols()+` FROM ledger WHERE kind = ? AND idem_key = ? AND state <> 'failed'`, r.Kind, r.IdemKey))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Entry{}, fmt.Errorf("record intent: %w", err)
	}
	var ex *Entry
	if err == nil {
		ex = &existing
	}
	if check != nil {
		spent, err := daySum(ctx, tx, r.CreatedAt, true)
		if err != nil {
			return Entry{}, fmt.Errorf("record intent: %w", err)
		}
		open, err := openRows(ctx, tx, s.cols(), r.Kind)
		if err != nil {
			return Entry{}, fmt.Errorf("record intent: %w", err)
		}
		if err := check(spent, ex, open); err != nil {
			return Entry{}, err
		}
	}
	if ex != nil {
		return Entry{}, &DuplicateError{Existing: *ex}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO ledger (`+columns+`) VALUES (?`+strings.Repeat(",?", len(r.args())-1)+`)`, r.args()...)
	if err != nil {
		return Entry{}, fmt.Errorf("record intent: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, fmt.Errorf("record intent: commit: %w", err)
	}
	return r, nil
}

// Update writes the row's outcome fields (everything but id, kind,
// created_at, request, idem_key and heartbeat) and commits durably. A row
// set pending again (a lost launch re-sent under its own token) is
// claimed by this handle as its call in flight: release it with EndCall.
func (s *Store) Update(ctx context.Context, r Entry) (Entry, error) {
	return s.update(ctx, r, "")
}

// ErrConflict is returned by UpdateFrom when the row is no longer in the
// state the caller read it in: another process settled it meanwhile.
var ErrConflict = errors.New("the row changed meanwhile")

// UpdateFrom is Update only if the stored row is still in state from. A
// reconciliation uses it so that it never overwrites the outcome the
// process that made the call recorded in the meantime.
func (s *Store) UpdateFrom(ctx context.Context, r Entry, from string) (Entry, error) {
	return s.update(ctx, r, from)
}

func (s *Store) update(ctx context.Context, r Entry, from string) (Entry, error) {
	if s.readOnly {
		return Entry{}, fmt.Errorf("update ledger row %s: %w", r.ID, ErrReadOnly)
	}
	r.UpdatedAt = s.now()
	claimed := false
	if r.State == StatePending && from != StatePending {
		if err := s.claimCall(r.ID); err != nil {
			return Entry{}, fmt.Errorf("update ledger row %s: %w", r.ID, err)
		}
		claimed = true
		r.Owner, r.Heartbeat = s.owner.String(), r.UpdatedAt
	}
	out, err := s.write(ctx, r, from)
	if err != nil && claimed {
		s.EndCall(r.ID)
	}
	return out, err
}

func (s *Store) write(ctx context.Context, r Entry, from string) (Entry, error) {
	q := `UPDATE ledger SET provider=?, cloud=?, region=?, zone=?, instance_type=?, instance_count=?,
		gpu_count=?, start_at=?, end_at=?, cost_usd=?, cost_note=?, state=?, provider_ref=?, actor=?, updated_at=?, error=?,
		note=?, owner=?, heartbeat_at=? WHERE id=?`
	args := []any{r.Provider, r.Cloud, r.Region, r.Zone, r.InstanceType, r.InstanceCount, r.GPUCount, fmtTime(r.Start), fmtTime(r.End),
		r.CostUSD, r.CostNote, r.State, r.ProviderRef, r.Actor, fmtTime(r.UpdatedAt), r.Error, r.Note, r.Owner, fmtTime(r.Heartbeat), r.ID}
	if from != "" {
		q += ` AND state=?`
		args = append(args, from)
	}
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return Entry{}, fmt.Errorf("update ledger row %s: %w", r.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if from != "" {
			if _, err := s.Get(ctx, r.ID); err == nil {
				return Entry{}, fmt.Errorf("update ledger row %s from %s: %w", r.ID, from, ErrConflict)
			}
		}
		return Entry{}, fmt.Errorf("update ledger row %s: %w", r.ID, ErrNotFound)
	}
	return r, nil
}

// Get returns one row.
func (s *Store) Get(ctx context.Context, id string) (Entry, error) {
	r, err := scanOne(s.db.QueryRowContext(ctx, `SELECT `+s.cols()+` FROM ledger WHERE id = ?`, id))
	if err != nil {
		return Entry{}, fmt.Errorf("ledger row %s: %w", id, err)
	}
	return r, nil
}

// FindByRef returns the newest row with the provider's id, such as a
// fleet's "fleet-…".
func (s *Store) FindByRef(ctx context.Context, ref string) (Entry, error) {
	r, err := scanOne(s.db.QueryRowContext(ctx, `SELECT `+s.cols()+` FROM ledger WHERE provider_ref = ? ORDER BY id DESC LIMIT 1`, ref))
	if err != nil {
		return Entry{}, fmt.Errorf("ledger row for %s: %w", ref, err)
	}
	return r, nil
}

// List returns the rows, newest first. With states given, only rows in
// them.
func (s *Store) List(ctx context.Context, states ...string) ([]Entry, error) {
	q := `SELECT ` + s.cols() + ` FROM ledger`
	var args []any
	if len(states) > 0 {
		q += ` WHERE state IN (?` + strings.Repeat(",?", len(states)-1) + `)`
		for _, st := range states {
			args = append(args, st)
		}
	}
	q += ` ORDER BY id DESC`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list ledger: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list ledger: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list ledger: %w", err)
	}
	return out, nil
}

// DaySpent is the sum of cost over rows created on t's UTC day that are
// not failed: what max_daily_usd caps. It is NaN when a block or
// reservation among them has no known cost (see NoteCostUnknown): its
// cost_usd of 0 is no price, and a sum that read it as one would let the
// day be spent again. A fleet counts its first hour's estimate, 0 when
// its prices were not known: that figure is an estimate either way (a
// fleet bills until deleted), and one fleet re-created from AWS, which
// shows no price of it, must not stop the day's purchases.
func (s *Store) DaySpent(ctx context.Context, t time.Time) (float64, error) {
	return daySum(ctx, s.db, t, s.hasJobs())
}

// NoteCostUnknown, in a row's cost note, says that its cost is not known:
// a row re-created from a cloud's record that does not say what it cost
// (a capacity block bought before purchases were tagged with their fee).
// Its cost_usd column holds 0, which is no price.
const NoteCostUnknown = "cost unknown"

// HeldKeys returns the idempotency keys of a kind held by rows that are not
// failed: for blocks, the offerings already bought (or being bought).
func (s *Store) HeldKeys(ctx context.Context, kind string) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT idem_key FROM ledger WHERE kind = ? AND state <> 'failed'`, kind)
	if err != nil {
		return nil, fmt.Errorf("ledger keys: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("ledger keys: %w", err)
		}
		out[k] = true
	}
	return out, rows.Err()
}

// Holder returns the row that is not failed and holds the kind's key, or
// ErrNotFound.
func (s *Store) Holder(ctx context.Context, kind, key string) (Entry, error) {
	r, err := scanOne(s.db.QueryRowContext(ctx, `SELECT `+s.cols()+` FROM ledger WHERE kind = ? AND idem_key = ? AND state <> 'failed'`, kind, key))
	if err != nil {
		return Entry{}, fmt.Errorf("ledger holder of %s %s: %w", kind, key, err)
	}
	return r, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// daySum is DaySpent, on the database or inside a transaction. With
// jobs (a ledger that has them), the jobs' holds count and their
// launches' rows do not: the hold covers them (job.go).
func daySum(ctx context.Context, q querier, t time.Time, jobs bool) (float64, error) {
	day := t.UTC().Truncate(24 * time.Hour)
	var sum float64
	var unknown int
	notJobs := ""
	if jobs {
		notJobs = ` AND idem_key NOT IN (SELECT idem_key FROM job_launches)`
	}
	err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(cost_usd), 0),
		COUNT(CASE WHEN kind <> ? AND instr(cost_note, ?) > 0 THEN 1 END)
		FROM ledger WHERE state <> 'failed' AND created_at >= ? AND created_at < ?`+notJobs,
		KindFleet, NoteCostUnknown, fmtTime(day), fmtTime(day.Add(24*time.Hour))).Scan(&sum, &unknown)
	if err != nil {
		return 0, fmt.Errorf("sum of the day's spending: %w", err)
	}
	if jobs {
		held, err := jobsDaySum(ctx, q, day)
		if err != nil {
			return 0, err
		}
		sum += held
	}
	if unknown > 0 {
		return math.NaN(), nil
	}
	return sum, nil
}

// openRows returns the rows of a kind whose outcome is not known yet.
func openRows(ctx context.Context, tx *sql.Tx, cols, kind string) ([]Entry, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+cols+` FROM ledger WHERE kind = ? AND state IN (?, ?) ORDER BY id`, kind, StatePending, StateUnknown)
	if err != nil {
		return nil, fmt.Errorf("unsettled %s rows: %w", kind, err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("unsettled %s rows: %w", kind, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

const columns = `id, kind, provider, cloud, region, zone, instance_type, instance_count, gpu_count, start_at, end_at,
	cost_usd, cost_note, state, provider_ref, actor, created_at, updated_at, error, request, idem_key, note, owner, heartbeat_at`

// columnsV1 reads a ledger of schema version 1 (read-only) as the
// current columns.
const columnsV1 = `id, kind, provider, cloud, region, zone, instance_type, instance_count, gpu_count, start_at, end_at,
	cost_usd, cost_note, state, provider_ref, actor, created_at, updated_at, error, request, idem_key, '' AS note, '' AS owner, '' AS heartbeat_at`

// cols is the select list for the file's schema.
func (s *Store) cols() string {
	if s.version == 1 {
		return columnsV1
	}
	return columns
}

func (r Entry) args() []any {
	return []any{r.ID, r.Kind, r.Provider, r.Cloud, r.Region, r.Zone, r.InstanceType, r.InstanceCount, r.GPUCount,
		fmtTime(r.Start), fmtTime(r.End), r.CostUSD, r.CostNote, r.State, r.ProviderRef, r.Actor,
		fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt), r.Error, string(r.Request), r.IdemKey, r.Note, r.Owner, fmtTime(r.Heartbeat)}
}

type scanner interface{ Scan(dest ...any) error }

func scanOne(sc *sql.Row) (Entry, error) {
	r, err := scan(sc)
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, ErrNotFound
	}
	return r, err
}

func scan(sc scanner) (Entry, error) {
	var r Entry
	var start, end, created, updated, req, beat string
	err := sc.Scan(&r.ID, &r.Kind, &r.Provider, &r.Cloud, &r.Region, &r.Zone, &r.InstanceType, &r.InstanceCount, &r.GPUCount,
		&start, &end, &r.CostUSD, &r.CostNote, &r.State, &r.ProviderRef, &r.Actor, &created, &updated, &r.Error, &req, &r.IdemKey,
		&r.Note, &r.Owner, &beat)
	if err != nil {
		return Entry{}, err
	}
	r.Request = json.RawMessage(req)
	for _, f := range []struct {
		s string
		t *time.Time
	}{{start, &r.Start}, {end, &r.End}, {created, &r.CreatedAt}, {updated, &r.UpdatedAt}, {beat, &r.Heartbeat}} {
		if *f.t, err = parseTime(f.s); err != nil {
			return Entry{}, fmt.Errorf("ledger row %s: %w", r.ID, err)
		}
	}
	return r, nil
}
