// Package ledger is where every money action goes: ledger, booking, schedules, jobs, usage.
package ledger

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

// Kinds of ledger rows.
const (
	KindBlock       = domain.KindBlock
	KindFleet       = domain.KindFleet
	KindReservation = domain.KindReservation
)

// Booked reports whether a kind books a fixed window, as opposed to a fleet.
func Booked(kind string) bool { return domain.TermsOfKind(kind) != nil }

// States of a ledger row (DESIGN.md's contract).
const (
	// StatePending: the intent is recorded and the call is being made.
	StatePending = "pending"
	// StateUnknown: the answer was lost; reconciled before any retry.
	StateUnknown   = "unknown"
	StateScheduled = "scheduled"
	StateActive    = "active"
	StateEnded     = "ended"
	StateFailed    = "failed"
	StateDeleted   = "deleted"
)

// States lists every ledger state.
var States = []string{StatePending, StateUnknown, StateScheduled, StateActive, StateEnded, StateFailed, StateDeleted}

// Entry is one ledger row: a money action from its intent to its outcome.
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
	// Start and End bound a block, or when a fleet ran; zero while unknown.
	Start, End time.Time
	// CostUSD is a block's price, NaN when unknown; a fleet's figures come from USDHour.
	CostUSD float64
	// USDHour is a fleet's estimated cost per hour; NaN when unknown.
	USDHour float64
	// CostNote says what the figures rest on, for people only.
	CostNote string
	// Schedule is a fleet's asked window and who keeps it.
	Schedule FleetSchedule
	State    string
	// ProviderRef is the cloud's id: "cr-…", "fleet-…", an Azure id.
	ProviderRef string
	Actor       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Error is what went wrong; Note what happened that is not an error.
	Error string
	Note  string
	// Owner is the process whose call a pending row records.
	Owner     string
	Heartbeat time.Time
	// Request is the JSON of what was asked: the offering, the fleet spec.
	Request json.RawMessage
	// IdemKey is the offering id or client token; unique per kind among rows not failed.
	IdemKey string
}

// Settled reports whether the row's outcome is known.
func (r Entry) Settled() bool { return r.State != StatePending && r.State != StateUnknown }

// ErrDuplicate: a row that is not failed already holds the key (*DuplicateError).
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

// NewID returns a ULID: sortable by time, and a valid AWS ClientToken.
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

// Spending is what the ledger holds against a UTC day, read in a transaction.
type Spending func(day time.Time) (float64, error)

// IntentCheck runs in the intent's transaction: existing is the row holding the key, or nil;
// live are the kind's unsettled rows (a fleet has no natural key).
type IntentCheck func(spent Spending, existing *Entry, live []Entry) error

// RecordIntent writes the row and commits durably before it returns.
func (s *Store) RecordIntent(ctx context.Context, r Entry, check IntentCheck) (_ Entry, err error) {
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
		// The lock is taken before the row exists: no one sees it pending without an owner.
		if err := s.claimCall(r.ID); err != nil {
			return Entry{}, fmt.Errorf("record intent: %w", err)
		}
		r.Owner, r.Heartbeat = s.owner.String(), r.CreatedAt
	}
	defer func() {
		if err != nil && r.State == StatePending {
			s.EndCall(r.ID)
		}
	}()
	// An intent is as old as its creation, by the caller's clock.
	r.UpdatedAt = r.CreatedAt
	if len(r.Request) == 0 {
		r.Request = json.RawMessage("{}")
	}
	err = s.inTx(ctx, "record intent", func(tx *sql.Tx) error {
		existing, err := s.one(ctx, tx, "record intent", `kind = ? AND idem_key = ? AND state <> 'failed'`, r.Kind, r.IdemKey)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		var ex *Entry
		if err == nil {
			ex = &existing
		}
		if check != nil {
			live, err := s.rows(ctx, tx, "record intent: unsettled "+r.Kind+" rows", `WHERE kind = ? AND state IN (?, ?, ?, ?) ORDER BY id`,
				r.Kind, StatePending, StateUnknown, StateScheduled, StateActive)
			if err != nil {
				return err
			}
			spent := func(day time.Time) (float64, error) { return s.DayHeld(ctx, tx, day, "") }
			if err := check(spent, ex, live); err != nil {
				return err
			}
		}
		if ex != nil {
			return &DuplicateError{Existing: *ex}
		}
		if _, err = tx.ExecContext(ctx, `INSERT INTO ledger (`+columns+`) VALUES (?`+strings.Repeat(",?", len(r.args())-1)+`)`, r.args()...); err != nil {
			return fmt.Errorf("record intent: %w", err)
		}
		return nil
	})
	if err != nil {
		return Entry{}, err
	}
	s.changes.Add(1)
	return r, nil
}

// Update writes the row's outcome durably; a row set pending again is claimed (EndCall).
func (s *Store) Update(ctx context.Context, r Entry) (Entry, error) {
	return s.UpdateFromChecked(ctx, r, "", nil)
}

// ErrConflict: the row is no longer in the state it was read in.
var ErrConflict = errors.New("the row changed meanwhile")

// UpdateFrom is Update only from state from, never over the caller's recorded outcome.
func (s *Store) UpdateFrom(ctx context.Context, r Entry, from string) (Entry, error) {
	return s.UpdateFromChecked(ctx, r, from, nil)
}

// UpdateFromChecked is UpdateFrom with check run first in the same transaction, seeing the row in state from.
func (s *Store) UpdateFromChecked(ctx context.Context, r Entry, from string, check func(spent Spending) error) (_ Entry, err error) {
	if s.readOnly {
		return Entry{}, fmt.Errorf("update ledger row %s: %w", r.ID, ErrReadOnly)
	}
	r.UpdatedAt = s.now()
	if r.State == StatePending && from != StatePending {
		if err := s.claimCall(r.ID); err != nil {
			return Entry{}, fmt.Errorf("update ledger row %s: %w", r.ID, err)
		}
		r.Owner, r.Heartbeat = s.owner.String(), r.UpdatedAt
		defer func() {
			if err != nil {
				s.EndCall(r.ID)
			}
		}()
	}
	err = s.inTx(ctx, "update ledger row "+r.ID, func(tx *sql.Tx) error {
		if check != nil {
			var state string
			if err := tx.QueryRowContext(ctx, `SELECT state FROM ledger WHERE id = ?`, r.ID).Scan(&state); err != nil {
				return fmt.Errorf("update ledger row %s: %w", r.ID, ErrNotFound)
			}
			if state != from {
				return fmt.Errorf("update ledger row %s from %s: %w", r.ID, from, ErrConflict)
			}
			if err := check(func(day time.Time) (float64, error) { return s.DayHeld(ctx, tx, day, r.ID) }); err != nil {
				return err
			}
		}
		n, err := s.exec(ctx, tx, r, from)
		if err != nil || n > 0 {
			return err
		}
		var one int
		if from != "" && tx.QueryRowContext(ctx, `SELECT 1 FROM ledger WHERE id = ?`, r.ID).Scan(&one) == nil {
			return fmt.Errorf("update ledger row %s from %s: %w", r.ID, from, ErrConflict)
		}
		return fmt.Errorf("update ledger row %s: %w", r.ID, ErrNotFound)
	})
	if err != nil {
		return Entry{}, err
	}
	s.changes.Add(1)
	return r, nil
}

// exec writes the row's outcome fields (all but those its intent fixed) and says how many rows changed.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, r Entry, from string) (int64, error) {
	var set []string
	var args []any
	vals := r.args()
	for i, c := range strings.Split(columns, ",") {
		if c = strings.TrimSpace(c); !slices.Contains([]string{"id", "kind", "created_at", "request", "idem_key"}, c) {
			set, args = append(set, c+"=?"), append(args, vals[i])
		}
	}
	q := `UPDATE ledger SET ` + strings.Join(set, ", ") + ` WHERE id=?`
	args = append(args, r.ID)
	if from != "" {
		q += ` AND state=?`
		args = append(args, from)
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("update ledger row %s: %w", r.ID, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// Get returns one row.
func (s *Store) Get(ctx context.Context, id string) (Entry, error) {
	return s.one(ctx, s.db, "ledger row "+id, `id = ?`, id)
}

// FindByRef returns the newest row with the provider's id.
func (s *Store) FindByRef(ctx context.Context, ref string) (Entry, error) {
	return s.one(ctx, s.db, "ledger row for "+ref, `provider_ref = ? ORDER BY id DESC LIMIT 1`, ref)
}

// List returns the rows newest first, only those in states when given.
func (s *Store) List(ctx context.Context, states ...string) ([]Entry, error) {
	where, args := inStates(states)
	return s.rows(ctx, s.db, "list ledger", where+` ORDER BY id DESC`, args...)
}

// inStates is a WHERE clause keeping the states given, "" for none.
func inStates(states []string) (string, []any) {
	if len(states) == 0 {
		return "", nil
	}
	ph, args := sqlitedb.In(states)
	return `WHERE state IN (` + ph + `)`, args
}

// rows reads the ledger rows the clause (WHERE …, ORDER BY …) picks; what names them in the error.
func (s *Store) rows(ctx context.Context, q sqlitedb.Querier, what, clause string, args ...any) ([]Entry, error) {
	out, err := sqlitedb.All(ctx, q, scan, `SELECT `+s.cols()+` FROM ledger `+clause, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

var errNoRows = sql.ErrNoRows

// one reads the row where picks, or ErrNotFound; what names it in the error.
func (s *Store) one(ctx context.Context, q sqlitedb.Querier, what, where string, args ...any) (Entry, error) {
	r, err := scan(q.QueryRowContext(ctx, `SELECT `+s.cols()+` FROM ledger WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", what, err)
	}
	return r, nil
}

// DaySpent is what the ledger holds against t's UTC day (Store.DayHeld).
func (s *Store) DaySpent(ctx context.Context, t time.Time) (float64, error) {
	return s.DayHeld(ctx, s.db, t, "")
}

// HeldKeys returns the keys of the kinds held by rows that are not failed.
func (s *Store) HeldKeys(ctx context.Context, kinds ...string) (map[string]bool, error) {
	ph, args := sqlitedb.In(kinds)
	keys, err := sqlitedb.All(ctx, s.db, sqlitedb.String, `SELECT idem_key FROM ledger WHERE kind IN (`+ph+`) AND state <> 'failed'`, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger keys: %w", err)
	}
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out, nil
}

// Holder returns the row not failed holding the kind's key, or ErrNotFound.
func (s *Store) Holder(ctx context.Context, kind, key string) (Entry, error) {
	return s.one(ctx, s.db, "ledger holder of "+kind+" "+key, `kind = ? AND idem_key = ? AND state <> 'failed'`, kind, key)
}

const columns = `id, kind, provider, cloud, region, zone, instance_type, instance_count, gpu_count, start_at, end_at,
	cost_usd, cost_note, state, provider_ref, actor, created_at, updated_at, error, request, idem_key, note, owner, heartbeat_at,
	usd_hour, sched_start, sched_end, sched_keeper`

// cols is the select list for the file's schema.
func (s *Store) cols() string {
	switch {
	case s.version == 1:
		return strings.Replace(legacyColumns, "idem_key, note, owner, heartbeat_at", "idem_key, '', '', ''", 1)
	case s.version < 5:
		return legacyColumns
	}
	return columns
}

// orNull is a figure for a nullable column: NaN is NULL.
func orNull(v float64) any {
	if math.IsNaN(v) {
		return nil
	}
	return v
}

// costs are the cost_usd and usd_hour columns: a fleet has only the hourly one.
func (r Entry) costs() (cost, hour any) {
	if r.Kind == KindFleet {
		return nil, orNull(r.USDHour)
	}
	return orNull(r.CostUSD), nil
}

func (r Entry) args() []any {
	cost, hour := r.costs()
	return []any{r.ID, r.Kind, r.Provider, r.Cloud, r.Region, r.Zone, r.InstanceType, r.InstanceCount, r.GPUCount,
		fmtTime(r.Start), fmtTime(r.End), cost, r.CostNote, r.State, r.ProviderRef, r.Actor,
		fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt), r.Error, string(r.Request), r.IdemKey, r.Note, r.Owner, fmtTime(r.Heartbeat),
		hour, fmtTime(r.Schedule.Start), fmtTime(r.Schedule.End), string(r.Schedule.Keeper)}
}

func scan(sc sqlitedb.Scanner) (Entry, error) {
	var r Entry
	var start, end, created, updated, req, beat, sStart, sEnd, keeper string
	var cost, hour sql.NullFloat64
	err := sc.Scan(&r.ID, &r.Kind, &r.Provider, &r.Cloud, &r.Region, &r.Zone, &r.InstanceType, &r.InstanceCount, &r.GPUCount,
		&start, &end, &cost, &r.CostNote, &r.State, &r.ProviderRef, &r.Actor, &created, &updated, &r.Error, &req, &r.IdemKey,
		&r.Note, &r.Owner, &beat, &hour, &sStart, &sEnd, &keeper)
	if err != nil {
		return Entry{}, err
	}
	r.CostUSD, r.USDHour = math.NaN(), math.NaN()
	if cost.Valid {
		r.CostUSD = cost.Float64
	}
	if hour.Valid {
		r.USDHour = hour.Float64
	}
	r.Request = json.RawMessage(req)
	if keeper != "" {
		r.Schedule.Keeper = Keeper(keeper)
		if r.Schedule.Start, err = parseAnyTime(sStart); err == nil {
			r.Schedule.End, err = parseAnyTime(sEnd)
		}
		if err != nil {
			return Entry{}, fmt.Errorf("ledger row %s: schedule: %w", r.ID, err)
		}
	}
	if err := parseTimes([]string{start, end, created, updated, beat}, &r.Start, &r.End, &r.CreatedAt, &r.UpdatedAt, &r.Heartbeat); err != nil {
		return Entry{}, fmt.Errorf("ledger row %s: %w", r.ID, err)
	}
	return r, nil
}

// parseTimes parses each stored time of src into the field of dst at its index.
func parseTimes(src []string, dst ...*time.Time) (err error) {
	for i, s := range src {
		if *dst[i], err = parseTime(s); err != nil {
			return err
		}
	}
	return nil
}

// unboundedHold is how long a fleet with no end is held against the caps.
const unboundedHold = 24 * time.Hour

// Span is when a row's capacity ran; zero for a row that never ran or failed.
func Span(r Entry) (start, end time.Time) {
	if r.State == StateFailed || (r.Kind == KindFleet && r.ProviderRef == "") {
		return time.Time{}, time.Time{}
	}
	start, end = r.Start, r.End
	if r.Kind != KindFleet {
		return start, end
	}
	if start.IsZero() {
		start = r.CreatedAt
	}
	if end.IsZero() && (r.State == StateDeleted || r.State == StateEnded) {
		end = r.UpdatedAt
	}
	return start, end
}

// CostUnknown reports whether a row's cost cannot be said.
func CostUnknown(r Entry) bool {
	if r.Kind == KindFleet {
		return math.IsNaN(r.USDHour)
	}
	return math.IsNaN(r.CostUSD)
}

// Figures are a row's money figures at a time; NaN is unknown.
type Figures struct {
	Start, End time.Time
	// Committed is what the row may cost over its known window; NaN with no end.
	Committed float64
	// SoFar is what it has cost up to the time asked (CostSoFar).
	SoFar float64
	// Final is its cost once it is over; NaN before.
	Final float64
}

// FiguresOf is a row's money figures at now, as every view shows them.
func FiguresOf(r Entry, now time.Time) Figures {
	f := Figures{Committed: math.NaN(), Final: math.NaN()}
	f.Start, f.End = Span(r)
	f.SoFar = CostSoFar(r, time.Time{}, now)
	over := r.State == StateEnded || r.State == StateDeleted || r.State == StateFailed
	switch {
	case r.Kind != KindFleet:
		f.Committed = r.CostUSD
		if r.State == StateFailed {
			f.Committed = 0
		}
	case over:
		f.Committed = f.SoFar
	default:
		from, until := holdWindow(r)
		if !r.Schedule.End.IsZero() {
			f.Committed = r.USDHour * until.Sub(from).Hours()
		}
	}
	if over {
		f.Final = f.SoFar
	}
	return f
}

// CostSoFar is what a row cost over [from, to] (zero from: since it began).
func CostSoFar(r Entry, from, to time.Time) float64 {
	start, end := Span(r)
	if start.IsZero() {
		return 0
	}
	if CostUnknown(r) {
		return math.NaN()
	}
	if t := domain.TermsOfKind(r.Kind); t != nil && t.Upfront {
		if from.IsZero() {
			return r.CostUSD
		}
		// Spread over its window, a day at a time, as usage splits it.
		return r.CostUSD * share(start, end, from, to)
	}
	rate := r.USDHour
	if r.Kind != KindFleet {
		if !end.After(start) {
			return math.NaN()
		}
		rate = r.CostUSD / end.Sub(start).Hours()
	}
	if from.IsZero() || from.Before(start) {
		from = start
	}
	if !end.IsZero() && end.Before(to) {
		to = end
	}
	return rate * max(to.Sub(from).Hours(), 0)
}

// share is the part of [start, end] inside [from, to], 0 to 1.
func share(start, end, from, to time.Time) float64 {
	if !end.After(start) {
		return 0
	}
	a, b := domain.Later(start, from), domain.Earlier(end, to)
	return max(b.Sub(a).Hours(), 0) / end.Sub(start).Hours()
}

// holdWindow is when a fleet not over holds its estimate against the caps.
func holdWindow(r Entry) (from, until time.Time) {
	if from, until = runWindow(r); until.IsZero() {
		until = from.Add(unboundedHold)
	}
	return from, until
}

// heldOn is what a row holds against day's cap; an unknown fleet estimate holds 0.
func heldOn(r Entry, day time.Time) float64 {
	next := day.Add(24 * time.Hour)
	if r.State == StateFailed {
		return 0
	}
	if r.Kind != KindFleet {
		if r.CreatedAt.Before(day) || !r.CreatedAt.Before(next) {
			return 0
		}
		return r.CostUSD
	}
	if math.IsNaN(r.USDHour) {
		return 0
	}
	from, until := holdWindow(r)
	if r.State == StateEnded || r.State == StateDeleted {
		if from, until = Span(r); from.IsZero() {
			return 0 // cancelled before its start: nothing ran
		}
	}
	a, b := domain.Later(from, day), domain.Earlier(until, next)
	return r.USDHour * max(b.Sub(a).Hours(), 0)
}

// Hold is a purchase's whole commitment and its part on each UTC day.
type Hold struct {
	Whole float64
	Days  []DayAmount
	// What says the commitment for a refusal: "90d at $4403.20/h".
	What string
}

// DayAmount is an amount on the UTC day starting at Day.
type DayAmount struct {
	Day time.Time
	USD float64
}

// HoldOf is what a row holds against the caps, whole and by UTC day.
func HoldOf(r Entry) Hold {
	if r.Kind != KindFleet {
		return Hold{Whole: r.CostUSD, Days: []DayAmount{{Day: r.CreatedAt.UTC().Truncate(24 * time.Hour), USD: r.CostUSD}}}
	}
	from, until := holdWindow(r)
	h := Hold{Whole: r.USDHour * until.Sub(from).Hours(), What: fmt.Sprintf("%s at $%.2f/h", Countdown(until.Sub(from)), r.USDHour)}
	if r.Schedule.End.IsZero() {
		h.What = fmt.Sprintf("its first %s at $%.2f/h; it has no end", Countdown(unboundedHold), r.USDHour)
	}
	for d := from.UTC().Truncate(24 * time.Hour); d.Before(until); d = d.Add(24 * time.Hour) {
		h.Days = append(h.Days, DayAmount{Day: d, USD: heldOn(r, d)})
	}
	return h
}

// DayHeld is what the ledger holds against t's UTC day but row except; NaN if a price is unknown.
func (s *Store) DayHeld(ctx context.Context, q sqlitedb.Querier, t time.Time, except string) (float64, error) {
	day := t.UTC().Truncate(24 * time.Hour)
	// A job's launches are covered by the job's hold, one more term of this sum (job.go).
	notJobs := ""
	if s.hasJobs() {
		notJobs = ` AND idem_key NOT IN (SELECT idem_key FROM job_launches)`
	}
	rows, err := s.rows(ctx, q, "sum of the day's spending", `WHERE state <> 'failed' AND id <> ? AND created_at < ? AND
		(kind = ? AND (end_at = '' OR end_at >= ?) OR created_at >= ?)`+notJobs, except, fmtTime(day.Add(24*time.Hour)), KindFleet, fmtTime(day), fmtTime(day))
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, r := range rows {
		sum += heldOn(r, day)
	}
	if !s.hasJobs() {
		return sum, nil
	}
	jobs, err := jobsDaySum(ctx, q, day)
	return sum + jobs, err
}

// JobSpent is what a job's rows have cost by now: its fleets' cost so far,
// the figure its limit is held to and every view shows.
func JobSpent(rows []Entry, now time.Time) float64 {
	sum := 0.0
	for _, r := range rows {
		if c := CostSoFar(r, time.Time{}, now); r.Kind == KindFleet && !math.IsNaN(c) {
			sum += c
		}
	}
	return sum
}
