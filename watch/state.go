package watch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

// StateFileName is the watch's own file, apart from the ledger's tables and locks.
const StateFileName = "watch.db"

// State keeps firings, alerts and owed deliveries across restarts; processes
// sharing it raise each alert once (SQLite's write lock).
type State struct {
	db      *sql.DB
	path    string
	rebuilt *Aside
}

// Aside is a state file found unusable and moved aside.
type Aside struct {
	Path   string
	Reason error
}

// ruleState is a rule's memory: Owed, a crossing in the cooldown; Quiet, rebuilt
// state whose first decision tells nothing; Memo, the kind's own.
type ruleState struct {
	Fingerprint string
	Active      bool
	Owed        bool
	LastFired   time.Time
	Quiet       bool
	Memo        json.RawMessage
}

func (s ruleState) equal(o ruleState) bool {
	return s.Fingerprint == o.Fingerprint && s.Active == o.Active && s.Owed == o.Owed && s.Quiet == o.Quiet &&
		s.LastFired.Equal(o.LastFired) && string(s.Memo) == string(o.Memo)
}

// stateSchema: a decision is durable when it returns, so a crash never tells twice.
var stateSchema = sqlitedb.Schema{
	Name: "watch state", Durable: true, QuickCheck: true, Migrations: stateMigrations,
	Identify: func(_ context.Context, _ sqlitedb.Querier, t map[string]bool) (string, error) {
		if t["migrations"] && t["rule_state"] && t["alerts"] && t["deliveries"] {
			return "", nil
		}
		return "holds other tables (" + sqlitedb.TableList(t) + ")", nil
	},
}

// OpenState opens the watch's file; an unusable one is moved aside and remade
// (Rebuilt), a newer gpumarket's refused.
func OpenState(dataDir string) (*State, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("open watch state: %w", err)
	}
	path := filepath.Join(dataDir, StateFileName)
	ctx, now := context.Background(), time.Now()
	d, err := sqlitedb.Open(ctx, path, stateSchema, now)
	var aside *Aside
	if p := sqlitedb.ProblemOf(err); p != 0 && p != sqlitedb.Newer {
		moved, merr := sqlitedb.MoveAside(path, "corrupt", now)
		if merr != nil {
			return nil, fmt.Errorf("open watch state: %w (and it could not be moved aside: %v)", err, merr)
		}
		aside = &Aside{Path: moved, Reason: err}
		d, err = sqlitedb.Open(ctx, path, stateSchema, now)
	}
	if err != nil {
		return nil, fmt.Errorf("open watch state: %w", err)
	}
	return &State{db: d.DB, path: path, rebuilt: aside}, nil
}

// Rebuilt says where an unusable file was moved; nil when none was.
func (s *State) Rebuilt() *Aside { return s.rebuilt }

func (s *State) Path() string { return s.path }

func (s *State) Close() error { return s.db.Close() }

// stateMigrations: never edit one that has shipped; add another.
var stateMigrations = []string{
	`CREATE TABLE rule_state (
		rule        TEXT PRIMARY KEY,
		fingerprint TEXT NOT NULL,
		active      INTEGER NOT NULL DEFAULT 0,
		owed        INTEGER NOT NULL DEFAULT 0,
		last_fired  TEXT NOT NULL DEFAULT '',
		memo        TEXT NOT NULL DEFAULT '',
		updated_at  TEXT NOT NULL
	);
	CREATE TABLE alerts (
		id    INTEGER PRIMARY KEY AUTOINCREMENT,
		rule  TEXT NOT NULL,
		at    TEXT NOT NULL,
		alert TEXT NOT NULL
	);
	CREATE TABLE deliveries (
		alert_id    INTEGER NOT NULL REFERENCES alerts(id),
		channel     TEXT NOT NULL,
		state       TEXT NOT NULL,
		attempts    INTEGER NOT NULL DEFAULT 0,
		next_at     TEXT NOT NULL,
		lease_until TEXT NOT NULL DEFAULT '',
		owner       TEXT NOT NULL DEFAULT '',
		error       TEXT NOT NULL DEFAULT '',
		updated_at  TEXT NOT NULL,
		PRIMARY KEY (alert_id, channel)
	);
	CREATE INDEX deliveries_due ON deliveries(state, next_at);`,
	// 2: the rules whose first decision after a rebuild is not told.
	`ALTER TABLE rule_state ADD COLUMN quiet INTEGER NOT NULL DEFAULT 0;`,
}

// quiet marks the rules (name → fingerprint) without state as Quiet.
func (s *State) quiet(ctx context.Context, rules map[string]string, now time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("quiet rules after a rebuild: %w", err)
	}
	defer tx.Rollback()
	for name, fp := range rules {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rule_state (rule, fingerprint, quiet, updated_at) VALUES (?, ?, 1, ?) ON CONFLICT(rule) DO NOTHING`,
			name, fp, fmtTime(now)); err != nil {
			return fmt.Errorf("quiet rules after a rebuild: %w", err)
		}
	}
	return tx.Commit()
}

func fmtTime(t time.Time) string { return sqlitedb.FormatTime(t) }

func parseTime(s string) time.Time {
	t, _ := sqlitedb.ParseTime(s)
	return t
}

// load reads a rule's state; a new or edited condition starts afresh.
func (s *State) load(ctx context.Context, q querier, rule, fingerprint string) (ruleState, error) {
	var st ruleState
	var last, memo string
	err := q.QueryRowContext(ctx, `SELECT fingerprint, active, owed, last_fired, memo, quiet FROM rule_state WHERE rule = ?`, rule).
		Scan(&st.Fingerprint, &st.Active, &st.Owed, &last, &memo, &st.Quiet)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ruleState{Fingerprint: fingerprint}, nil
	case err != nil:
		return st, fmt.Errorf("read state of rule %s: %w", rule, err)
	}
	if st.Fingerprint != fingerprint {
		// Its crossings are another condition's; the cooldown holds.
		return ruleState{Fingerprint: fingerprint, LastFired: parseTime(last)}, nil
	}
	st.LastFired = parseTime(last)
	if memo != "" {
		st.Memo = json.RawMessage(memo)
	}
	return st, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Load reads a rule's state outside any decision (the evaluator's cache).
func (s *State) Load(ctx context.Context, rule, fingerprint string) (ruleState, error) {
	return s.load(ctx, s.db, rule, fingerprint)
}

// decide runs one decision under the write lock: state, alert and deliveries
// commit together; it returns them as stored.
func (s *State) decide(ctx context.Context, rule, fingerprint string, now time.Time, channels []string,
	decide func(st *ruleState) *Alert) (*Alert, ruleState, error) {
	// Half a decision is worse than a late one.
	ctx = context.WithoutCancel(ctx)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, ruleState{}, fmt.Errorf("rule %s: %w", rule, err)
	}
	defer tx.Rollback()
	st, err := s.load(ctx, tx, rule, fingerprint)
	if err != nil {
		return nil, st, err
	}
	was := st
	was.Memo = append(json.RawMessage(nil), st.Memo...)
	a := decide(&st)
	if a == nil && st.equal(was) {
		return nil, st, nil // nothing to write
	}
	if a != nil {
		a.At = now.UTC().Truncate(time.Second) // RFC 3339 to the second, as the CLI writes times
		a.IdempotencyKey = newKey()
		if err := tx.QueryRowContext(ctx, `INSERT INTO alerts (rule, at, alert) VALUES (?, ?, '') RETURNING id`, rule, fmtTime(now)).Scan(&a.ID); err != nil {
			return nil, st, fmt.Errorf("record alert of rule %s: %w", rule, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alerts SET alert = ? WHERE id = ?`, string(a.JSON()), a.ID); err != nil {
			return nil, st, fmt.Errorf("record alert of rule %s: %w", rule, err)
		}
		for _, ch := range a.Tell {
			if ch == TellTUI || !slices.Contains(channels, ch) {
				continue // the TUI's is memory; one not configured here nothing could deliver
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (alert_id, channel, state, next_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
				a.ID, ch, DeliveryPending, fmtTime(time.Now()), fmtTime(time.Now())); err != nil {
				return nil, st, fmt.Errorf("record delivery of alert %d: %w", a.ID, err)
			}
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO rule_state (rule, fingerprint, active, owed, last_fired, memo, quiet, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(rule) DO UPDATE SET fingerprint = excluded.fingerprint, active = excluded.active, owed = excluded.owed,
		last_fired = excluded.last_fired, memo = excluded.memo, quiet = excluded.quiet, updated_at = excluded.updated_at`,
		rule, st.Fingerprint, st.Active, st.Owed, fmtTime(st.LastFired), string(st.Memo), st.Quiet, fmtTime(now))
	if err != nil {
		return nil, st, fmt.Errorf("record state of rule %s: %w", rule, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, st, fmt.Errorf("record state of rule %s: %w", rule, err)
	}
	return a, st, nil
}

// newKey is an alert's idempotency key: unique across watch states.
func newKey() string { return sqlitedb.RandomHex(16) }

// locked runs f under the write lock, so concurrent rules-file rewrites lose no rule.
func (s *State) locked(ctx context.Context, f func() error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("lock the watch state: %w", err)
	}
	defer tx.Rollback()
	// A write makes sure of the lock whatever the driver's defaults.
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS rules_lock (n INTEGER)`); err != nil {
		return fmt.Errorf("lock the watch state: %w", err)
	}
	if err := f(); err != nil {
		return err
	}
	return tx.Commit()
}

// AlertsAfter returns at most limit alerts after id, oldest first.
func (s *State) AlertsAfter(ctx context.Context, id int64, limit int) ([]Alert, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, alert FROM alerts WHERE id > ? ORDER BY id LIMIT ?`, id, limit)
	var out []Alert
	err = eachAlert(rows, err, func(a Alert) { out = append(out, a) })
	return out, err
}

// eachAlert calls f on each (id, alert) row; a row another version wrote badly is skipped, not the rest.
func eachAlert(rows *sql.Rows, err error, f func(Alert)) error {
	err = sqlitedb.EachRow(rows, err, func() error {
		var a Alert
		var body string
		if err := rows.Scan(&a.ID, &body); err != nil {
			return err
		}
		if id := a.ID; json.Unmarshal([]byte(body), &a) == nil {
			a.ID = id
			f(a)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read alerts: %w", err)
	}
	return nil
}

// Recent returns the newest alerts first, with their deliveries.
func (s *State) Recent(ctx context.Context, limit int) ([]Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, alert FROM alerts ORDER BY id DESC LIMIT ?`, limit)
	var out []Record
	byID := map[int64]int{}
	err = eachAlert(rows, err, func(a Alert) {
		byID[a.ID] = len(out)
		out = append(out, Record{Alert: a})
	})
	if err != nil || len(out) == 0 {
		return out, err
	}
	drows, err := s.db.QueryContext(ctx, `SELECT alert_id, channel, state, attempts, error FROM deliveries WHERE alert_id >= ? ORDER BY alert_id, channel`, out[len(out)-1].ID)
	err = sqlitedb.EachRow(drows, err, func() error {
		var id int64
		var d DeliveryStatus
		if err := drows.Scan(&id, &d.Channel, &d.State, &d.Attempts, &d.Error); err != nil {
			return err
		}
		if i, ok := byID[id]; ok {
			out[i].Deliveries = append(out[i].Deliveries, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	return out, nil
}

type delivery struct {
	alert    Alert
	channel  string
	attempts int // including this one
}

// claim leases up to limit due deliveries: pending, or under an expired lease.
func (s *State) claim(ctx context.Context, channels []string, owner string, now time.Time, lease time.Duration, limit int) ([]delivery, error) {
	if len(channels) == 0 {
		return nil, nil
	}
	ph, chans := sqlitedb.In(channels)
	args := append([]any{DeliverySending, owner, fmtTime(now.Add(lease)), fmtTime(now)}, chans...)
	args = append(args, DeliveryPending, fmtTime(now), DeliverySending, fmtTime(now), limit)
	rows, err := s.db.QueryContext(ctx, `UPDATE deliveries SET state = ?, owner = ?, lease_until = ?, attempts = attempts + 1, updated_at = ?
		WHERE rowid IN (SELECT rowid FROM deliveries WHERE channel IN (`+ph+`)
			AND ((state = ? AND next_at <= ?) OR (state = ? AND lease_until <= ?)) ORDER BY alert_id LIMIT ?)
		RETURNING alert_id, channel, attempts, (SELECT alert FROM alerts WHERE id = alert_id)`, args...)
	var out []delivery
	err = sqlitedb.EachRow(rows, err, func() error {
		var d delivery
		var body string
		if err := rows.Scan(&d.alert.ID, &d.channel, &d.attempts, &body); err != nil {
			return err
		}
		id := d.alert.ID
		if err := json.Unmarshal([]byte(body), &d.alert); err != nil {
			return fmt.Errorf("read alert %d: %w", id, err)
		}
		d.alert.ID = id
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return out, nil
}

// finish records an attempt; only the owner's lease is settled.
func (s *State) finish(ctx context.Context, d delivery, owner, state, errText string, next time.Time) error {
	return s.settle(ctx, d, owner, "record", `state = ?, error = ?, next_at = ?`, state, errText, fmtTime(next))
}

// release puts back a delivery claimed but not started.
func (s *State) release(ctx context.Context, d delivery, owner string) error {
	return s.settle(ctx, d, owner, "release", `state = ?, attempts = attempts - 1`, DeliveryPending)
}

// settle ends owner's lease of d, setting set's columns to args.
func (s *State) settle(ctx context.Context, d delivery, owner, verb, set string, args ...any) error {
	args = append(args, fmtTime(time.Now()), d.alert.ID, d.channel, owner, DeliverySending)
	_, err := s.db.ExecContext(context.WithoutCancel(ctx), `UPDATE deliveries SET `+set+`, lease_until = '', owner = '', updated_at = ?
		WHERE alert_id = ? AND channel = ? AND owner = ? AND state = ?`, args...)
	if err != nil {
		return fmt.Errorf("%s delivery of alert %d: %w", verb, d.alert.ID, err)
	}
	return nil
}

// owed counts the unsettled deliveries and when the next one is due.
func (s *State) owed(ctx context.Context, channels []string) (n int, next time.Time, err error) {
	if len(channels) == 0 {
		return 0, time.Time{}, nil
	}
	ph, chans := sqlitedb.In(channels)
	args := append([]any{DeliveryPending, DeliverySending}, chans...)
	var due sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(CASE WHEN state = 'pending' THEN next_at END) FROM deliveries WHERE state IN (?, ?) AND channel IN (`+ph+`)`, args...).Scan(&n, &due)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("read deliveries: %w", err)
	}
	if due.Valid {
		next = parseTime(due.String)
	}
	return n, next, nil
}
