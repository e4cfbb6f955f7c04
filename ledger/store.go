package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

// FileName is the database's name inside the data dir.
const FileName = "gpumarket.db"

// Store is an open ledger file, safe for concurrent use by several processes.
type Store struct {
	db       *sql.DB
	path     string
	now      func() time.Time
	readOnly bool
	version  int
	// snapshot: the read-only file is read as an immutable snapshot.
	snapshot bool

	// owner names this handle in its calls' rows; calls holds their locks.
	owner Owner
	// changes counts writes, so a view can tell cheaply to reread the ledger.
	changes atomic.Uint64
	mu      sync.Mutex
	calls   map[string]*os.File
	proc    *os.File
}

// ErrUnreadable refuses an empty or foreign file, never taken for a new ledger.
var ErrUnreadable = errors.New("not a gpumarket ledger")

// UnreadableError names the file, what is wrong, and how to rebuild.
type UnreadableError struct {
	Path   string
	Reason string
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("ledger %s %s; it is left as it is, and nothing was read or written. "+
		"To start a new ledger from what the clouds show, run `gpumarket ledger --rebuild --provider aws,azure` "+
		"(it keeps this file aside as %s.unreadable-<time> and re-creates the rows from the clouds' tags)", e.Path, e.Reason, filepath.Base(e.Path))
}

// Is lets errors.Is(err, ErrUnreadable) match.
func (e *UnreadableError) Is(target error) bool { return target == ErrUnreadable }

// ErrReadOnly is returned by every write to a store opened read-only.
var ErrReadOnly = errors.New("the ledger is open read-only (its data dir or file is not writable here)")

// Open opens the ledger in dataDir, read-only when it cannot be written.
func Open(dataDir string) (*Store, error) {
	if dataDir == "" {
		return nil, errors.New("open store: no data dir")
	}
	path := filepath.Join(dataDir, FileName)
	if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("open store: create data dir %s: %w", dataDir, err)
		}
	}
	if !writable(dataDir) || (exists(path) && !writable(path)) {
		if !exists(path) {
			return nil, fmt.Errorf("open store: the data dir %s is not writable and holds no ledger (%s)", dataDir, FileName)
		}
		return OpenReadOnly(path)
	}
	return OpenPath(path)
}

// schema: synchronous FULL puts an intent on disk before its call is sent.
var schema = sqlitedb.Schema{
	Name: "ledger", Durable: true, QuickCheck: true, Migrations: migrations,
	Identify: func(_ context.Context, _ sqlitedb.Querier, t map[string]bool) (string, error) {
		if t["migrations"] && t["ledger"] {
			return "", nil
		}
		return "holds other tables than a ledger's", nil
	},
}

// OpenPath opens the database at path, creating it if it does not exist.
func OpenPath(path string) (*Store, error) {
	d, err := sqlitedb.Open(context.Background(), path, schema, time.Now())
	if err != nil {
		return nil, refusal(err)
	}
	return newStore(d, false), nil
}

// OpenReadOnly opens the ledger at path without creating, changing or migrating it.
func OpenReadOnly(path string) (*Store, error) {
	d, err := sqlitedb.OpenReadOnly(context.Background(), path, schema)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open store %s read-only: %w", path, os.ErrNotExist)
		}
		return nil, refusal(err)
	}
	return newStore(d, true), nil
}

// refusal is an UnreadableError unless the file is of a newer schema.
func refusal(err error) error {
	var fe *sqlitedb.FileError
	if !errors.As(err, &fe) {
		return err
	}
	if fe.Problem == sqlitedb.Newer {
		return fmt.Errorf("ledger %w", fe)
	}
	return &UnreadableError{Path: fe.Path, Reason: fe.Reason}
}

func newStore(d *sqlitedb.DB, readOnly bool) *Store {
	return &Store{db: d.DB, path: d.Path, now: time.Now, readOnly: readOnly, version: d.Version, snapshot: d.Snapshot,
		owner: newOwner(), calls: map[string]*os.File{}}
}

// SetAside renames an unreadable ledger (and its -wal, -shm) aside; nothing is deleted.
func SetAside(path string, now time.Time) (string, error) {
	aside, err := sqlitedb.MoveAside(path, "unreadable", now)
	if err != nil {
		return aside, fmt.Errorf("set the unreadable ledger aside: %w", err)
	}
	return aside, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// inTx runs do in one transaction and commits it; what says the work in its errors.
func (s *Store) inTx(ctx context.Context, what string, do func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	if err := do(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// ReadOnly reports whether the store was opened read-only.
func (s *Store) ReadOnly() bool { return s.readOnly }

// Snapshot reports whether the read-only store misses others' writes.
func (s *Store) Snapshot() bool { return s.snapshot }

// Close releases this handle's in-flight locks and closes the file.
func (s *Store) Close() error {
	s.releaseAll()
	return s.db.Close()
}

// migrations run in order, each once. Never edit one that has shipped.
var migrations = []string{
	`CREATE TABLE ledger (` + ledgerHead + `
		cost_usd       REAL NOT NULL DEFAULT 0,` + ledgerTail + `
	);
	` + ledgerIndexes + `
	CREATE TABLE offerings (
		id          TEXT PRIMARY KEY,
		provider    TEXT NOT NULL,
		offering    TEXT NOT NULL,
		query       TEXT NOT NULL,
		searched_at TEXT NOT NULL,
		start_at    TEXT NOT NULL
	);`,
	// 2: notes, and the owner and heartbeat of a call in flight.
	`ALTER TABLE ledger ADD COLUMN note TEXT NOT NULL DEFAULT '';
	ALTER TABLE ledger ADD COLUMN owner TEXT NOT NULL DEFAULT '';
	ALTER TABLE ledger ADD COLUMN heartbeat_at TEXT NOT NULL DEFAULT '';
	UPDATE ledger SET note = error, error = ''
		WHERE state = 'deleted' AND (error LIKE 'deleted by %' OR error LIKE 'simulated fleet ended with the process%');`,
	// 3: each row's last usage report, kept because the clouds forget.
	`CREATE TABLE usage_kept (
		row_id  TEXT PRIMARY KEY,
		read_at TEXT NOT NULL,
		report  TEXT NOT NULL
	);`,
	jobsMigration,
	// 5: state from free text into columns; the table is copied to drop a NOT NULL.
	`CREATE TABLE ledger_v5 (` + ledgerHead + `
		cost_usd       REAL,` + ledgerTail + `,
		note           TEXT NOT NULL DEFAULT '',
		owner          TEXT NOT NULL DEFAULT '',
		heartbeat_at   TEXT NOT NULL DEFAULT '',
		usd_hour       REAL,
		sched_start    TEXT NOT NULL DEFAULT '',
		sched_end      TEXT NOT NULL DEFAULT '',
		sched_keeper   TEXT NOT NULL DEFAULT ''
	);
	INSERT INTO ledger_v5 SELECT ` + legacyColumns + ` FROM ledger;
	DROP TABLE ledger;
	ALTER TABLE ledger_v5 RENAME TO ledger;
	` + ledgerIndexes,
}

// ledgerHead and ledgerTail are the first ledger table's columns around
// cost_usd, as migrations 1 and 5 write them (shipped: never edit).
const ledgerHead = `
		id             TEXT PRIMARY KEY,
		kind           TEXT NOT NULL,
		provider       TEXT NOT NULL,
		cloud          TEXT NOT NULL DEFAULT '',
		region         TEXT NOT NULL DEFAULT '',
		zone           TEXT NOT NULL DEFAULT '',
		instance_type  TEXT NOT NULL DEFAULT '',
		instance_count INTEGER NOT NULL DEFAULT 0,
		gpu_count      REAL NOT NULL DEFAULT 0,
		start_at       TEXT NOT NULL DEFAULT '',
		end_at         TEXT NOT NULL DEFAULT '',`

const ledgerTail = `
		cost_note      TEXT NOT NULL DEFAULT '',
		state          TEXT NOT NULL,
		provider_ref   TEXT NOT NULL DEFAULT '',
		actor          TEXT NOT NULL DEFAULT '',
		created_at     TEXT NOT NULL,
		updated_at     TEXT NOT NULL,
		error          TEXT NOT NULL DEFAULT '',
		request        TEXT NOT NULL DEFAULT '{}',
		idem_key       TEXT NOT NULL`

const ledgerIndexes = `CREATE UNIQUE INDEX ledger_idem ON ledger(kind, idem_key) WHERE state <> 'failed';
	CREATE INDEX ledger_created ON ledger(created_at);
	CREATE INDEX ledger_state ON ledger(state);`

// legacyColumns reads a row of schemas 2 to 4 as schema 5 (shipped: never edit).
const legacyColumns = `id, kind, provider, cloud, region, zone, instance_type, instance_count, gpu_count, start_at, end_at,
	CASE WHEN kind = 'fleet' OR instr(cost_note, 'cost unknown') > 0 THEN NULL ELSE cost_usd END,
	cost_note, state, provider_ref, actor, created_at, updated_at, error, request, idem_key, note, owner, heartbeat_at,
	CASE WHEN kind <> 'fleet' OR cost_note LIKE 'estimate: first hour at unknown prices%' OR cost_note LIKE 'cost unknown%' THEN NULL
		ELSE cost_usd END,
	` + legacySchedule + `
	CASE WHEN kind = 'fleet' AND json_valid(request) AND
		(NULLIF(json_extract(request, '$.Start'), '0001-01-01T00:00:00Z') IS NOT NULL OR
		 NULLIF(json_extract(request, '$.End'), '0001-01-01T00:00:00Z') IS NOT NULL)
		THEN COALESCE(NULLIF(json_extract(request, '$.Keeper'), ''), 'cloud') ELSE '' END`

// legacySchedule is a fleet's schedule as its request holds it.
const legacySchedule = `CASE WHEN kind = 'fleet' AND json_valid(request) THEN
		COALESCE(NULLIF(json_extract(request, '$.Start'), '0001-01-01T00:00:00Z'), '') ELSE '' END,
	CASE WHEN kind = 'fleet' AND json_valid(request) THEN
		COALESCE(NULLIF(json_extract(request, '$.End'), '0001-01-01T00:00:00Z'), '') ELSE '' END,`

func fmtTime(t time.Time) string { return sqlitedb.FormatTime(t) }

func parseTime(s string) (time.Time, error) { return sqlitedb.ParseTime(s) }

// parseAnyTime reads a stored time, or a fleet request's RFC 3339.
func parseAnyTime(s string) (time.Time, error) {
	if t, err := parseTime(s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// HeartbeatEvery is how often the owner of a call in flight beats.
const HeartbeatEvery = 10 * time.Second

// HeartbeatStale is how old a heartbeat may be before the call is abandoned.
const HeartbeatStale = 6 * HeartbeatEvery

// Owner names the process and store handle that made a row's call.
type Owner struct {
	Host  string
	PID   int
	Token string
}

// String is the owner as the ledger stores it: host/pid/token.
func (o Owner) String() string { return fmt.Sprintf("%s/%d/%s", o.Host, o.PID, o.Token) }

// ParseOwner reads an owner as String writes it.
func ParseOwner(s string) (Owner, bool) {
	parts := strings.Split(s, "/")
	n := len(parts)
	if n < 3 {
		return Owner{}, false
	}
	pid, err := strconv.Atoi(parts[n-2])
	if err != nil || parts[n-1] == "" {
		return Owner{}, false
	}
	return Owner{Host: strings.Join(parts[:n-2], "/"), PID: pid, Token: parts[n-1]}, true
}

func (o Owner) describe() string { return fmt.Sprintf("process %d on %s", o.PID, o.Host) }

func newOwner() Owner {
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	return Owner{Host: host, PID: os.Getpid(), Token: sqlitedb.RandomHex(8)}
}

// Owner is this handle's identity in the rows whose calls it makes.
func (s *Store) Owner() Owner { return s.owner }

// callDir holds the lock files of calls in flight, beside the database.
func (s *Store) callDir() string { return s.path + "-calls" }

func (s *Store) rowLock(id string) string { return filepath.Join(s.callDir(), "row-"+id+".lock") }

func (s *Store) procLock(token string) string {
	return filepath.Join(s.callDir(), "proc-"+token+".lock")
}

// errCallHeld: another handle holds the row's call.
var errCallHeld = errors.New("another process holds the call")

// claimCall takes the row's call lock, and the process lock held until Close.
func (s *Store) claimCall(id string) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.calls[id]; ok {
		return nil
	}
	if err := s.lockProcess(); err != nil {
		return err
	}
	if !lockSupported {
		s.calls[id] = nil
		return nil
	}
	f, err := lockFile(s.rowLock(id))
	if err != nil {
		return fmt.Errorf("take the lock of ledger row %s: %w", id, err)
	}
	s.calls[id] = f
	return nil
}

// lockProcess takes the process lock, held until Close; s.mu is held.
func (s *Store) lockProcess() error {
	if s.proc != nil || !lockSupported {
		return nil
	}
	f, err := lockFile(s.procLock(s.owner.Token))
	if err != nil {
		return fmt.Errorf("take the process lock: %w", err)
	}
	s.proc = f
	return nil
}

// EndCall releases the row's call lock; a row still pending is then reconciled.
func (s *Store) EndCall(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endCallLocked(id)
}

// endCallLocked is EndCall with s.mu held.
func (s *Store) endCallLocked(id string) {
	if f := s.calls[id]; f != nil {
		os.Remove(s.rowLock(id))
		f.Close()
	}
	delete(s.calls, id)
}

func (s *Store) releaseAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.calls {
		s.endCallLocked(id)
	}
	if s.proc != nil {
		os.Remove(s.procLock(s.owner.Token))
		s.proc.Close()
		s.proc = nil
	}
}

// Liveness is what a process can tell of another's call or process.
type Liveness int

const (
	// OwnerUnknown: no owner named, or a remote one without a heartbeat.
	OwnerUnknown Liveness = iota
	// OwnerAlive: the call is still being made (the process lives).
	OwnerAlive
	// OwnerGone: the owner no longer makes the call.
	OwnerGone
)

// CallLiveness says whether a pending row's call is in flight, and how that is known.
func (s *Store) CallLiveness(r Entry, now time.Time) (Liveness, string) {
	o, ok := ParseOwner(r.Owner)
	if !ok {
		return OwnerUnknown, ""
	}
	if o.Host == s.owner.Host && lockSupported {
		if held(s.rowLock(r.ID)) {
			return OwnerAlive, o.describe() + " is still waiting for the answer"
		}
		return OwnerGone, o.describe() + " no longer makes the call (it ended or was killed)"
	}
	if r.Heartbeat.IsZero() {
		return OwnerUnknown, ""
	}
	age := now.Sub(r.Heartbeat)
	if age < HeartbeatStale {
		return OwnerAlive, fmt.Sprintf("%s beat %s ago", o.describe(), age.Round(time.Second))
	}
	return OwnerGone, fmt.Sprintf("no heartbeat from %s since %s", o.describe(), r.Heartbeat.UTC().Format(time.RFC3339))
}

// ProcessLiveness says whether the process that made a call still runs (this host only).
func (s *Store) ProcessLiveness(owner string) (Liveness, string) {
	o, ok := ParseOwner(owner)
	if !ok || !lockSupported || o.Host != s.owner.Host {
		return OwnerUnknown, ""
	}
	if o.Token == s.owner.Token {
		return OwnerAlive, "this process"
	}
	if held(s.procLock(o.Token)) {
		return OwnerAlive, o.describe() + " still runs"
	}
	return OwnerGone, o.describe() + " has ended"
}

// Beat records a heartbeat of the row's call, if it is still pending.
func (s *Store) Beat(ctx context.Context, id string, at time.Time) error {
	if s.readOnly {
		return ErrReadOnly
	}
	_, err := s.db.ExecContext(ctx, `UPDATE ledger SET heartbeat_at = ? WHERE id = ? AND state = ? AND owner = ?`,
		fmtTime(at), id, StatePending, s.owner.String())
	if err != nil {
		return fmt.Errorf("heartbeat of ledger row %s: %w", id, err)
	}
	return nil
}

// costUnknownNote marks a row whose cost the cloud's record did not say.
const costUnknownNote = "cost unknown: re-created from the cloud's record"

// RebuildReport is what Rebuild did.
type RebuildReport struct {
	Asked []string
	// Created are the rows re-created from the clouds' records.
	Created []Entry
	// Present counts records the ledger already had a row for.
	Present int
	// Failed maps a provider to why its records could not be read.
	Failed map[string]error
}

// Rebuild re-creates the rows the clouds' tags show and the ledger lacks; it is idempotent.
func (s *Service) Rebuild(ctx context.Context) (RebuildReport, error) {
	rep := RebuildReport{Failed: map[string]error{}}
	for _, name := range s.names {
		rl, ok := s.provs[name].(domain.RecordLister)
		if !ok {
			continue
		}
		rep.Asked = append(rep.Asked, name)
		cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
		recs, err := rl.ListRecords(cctx, time.Time{})
		cancel()
		if err != nil {
			rep.Failed[name] = err
			continue
		}
		for _, rec := range recs {
			rec.Provider = cmp.Or(rec.Provider, name)
			have, err := s.recorded(ctx, rec)
			if err != nil {
				return rep, err
			}
			if have {
				rep.Present++
				continue
			}
			row, err := s.recreate(ctx, rec, domain.Offering{}, fmt.Sprintf("re-created by `gpumarket ledger --rebuild` from %s's tags", name))
			var dup *DuplicateError
			switch {
			case errors.As(err, &dup):
				rep.Present++
			case err != nil:
				return rep, err
			default:
				rep.Created = append(rep.Created, row)
			}
		}
	}
	return rep, nil
}

// recorded reports whether the ledger has a row for a cloud's record.
func (s *Service) recorded(ctx context.Context, rec domain.CloudRecord) (bool, error) {
	err := ErrNotFound
	if rec.Ref != "" {
		_, err = s.st.Get(ctx, rec.Ref)
	}
	if errors.Is(err, ErrNotFound) && rec.ProviderRef != "" {
		_, err = s.st.FindByRef(ctx, rec.ProviderRef)
	}
	if errors.Is(err, ErrNotFound) && Booked(rec.Kind) && rec.OfferingID != "" {
		_, err = s.st.Holder(ctx, rec.Kind, rec.OfferingID)
	}
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// recreate writes the row of a cloud's record, under its tagged id when free.
func (s *Service) recreate(ctx context.Context, rec domain.CloudRecord, o domain.Offering, why string) (Entry, error) {
	now := s.opt.Now()
	r := Entry{
		Kind: rec.Kind, Provider: rec.Provider, Cloud: string(rec.Cloud), Region: rec.Region, Zone: rec.Zone,
		InstanceType: rec.InstanceType, InstanceCount: rec.InstanceCount, Start: rec.Start, End: rec.End,
		State: rec.State, ProviderRef: rec.ProviderRef, Actor: rec.Actor, CreatedAt: rec.CreatedAt, Note: why,
	}
	if rec.Ref != "" {
		if _, err := s.st.Get(ctx, rec.Ref); errors.Is(err, ErrNotFound) {
			r.ID = rec.Ref
		}
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	first, _, _ := strings.Cut(rec.InstanceType, ",")
	if e, ok := domain.LookupGPU(first); ok {
		r.GPUCount = e.GPU.Count * float64(rec.InstanceCount)
		if r.Cloud == "" {
			r.Cloud = string(e.Cloud)
		}
	}
	r.CostUSD, r.USDHour = math.NaN(), math.NaN()
	if math.IsNaN(rec.CostUSD) || rec.CostUSD < 0 {
		r.CostNote = costUnknownNote
	} else if r.Kind == KindFleet {
		r.USDHour = rec.CostUSD
	} else {
		r.CostUSD = rec.CostUSD
	}
	// A record shows it exists: never pending or unknown in the ledger.
	if r.State == "" || r.State == StatePending || r.State == StateUnknown {
		r.State = StateScheduled
		if r.Kind == KindFleet {
			r.State = StateActive
		}
	}
	var req any
	switch r.Kind {
	case KindFleet:
		r.IdemKey = cmp.Or(rec.Ref, "cloud:"+rec.ProviderRef)
		if r.Start.IsZero() {
			r.Start = r.CreatedAt
		}
		req = domain.FleetSpec{Provider: r.Provider, Region: r.Region, InstanceTypes: strings.Split(r.InstanceType, ","),
			TargetCapacity: r.InstanceCount, ClientToken: r.IdemKey, Actor: r.Actor}
	default:
		if o.ID == "" {
			e, _ := domain.LookupGPU(r.InstanceType)
			o = domain.Offering{ID: rec.OfferingID, Provider: r.Provider, Cloud: domain.Cloud(r.Cloud), Region: r.Region,
				Zone: r.Zone, InstanceType: r.InstanceType, GPU: e.GPU, InstanceCount: r.InstanceCount, Start: r.Start, End: r.End,
				UpfrontUSD: known(r.CostUSD), Currency: "USD", Kind: r.Kind, StartsOnPurchase: r.Kind == KindReservation}
		}
		r.IdemKey = cmp.Or(rec.OfferingID, "cloud:"+rec.ProviderRef)
		req = o
		r = advance(r, now)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return r, fmt.Errorf("re-create the row of %s: %w", rec.ProviderRef, err)
	}
	r.Request = raw
	out, err := s.st.RecordIntent(ctx, r, nil)
	if err != nil {
		return out, fmt.Errorf("re-create the row of %s: %w", rec.ProviderRef, err)
	}
	s.opt.Logger.Info("ledger row re-created from the cloud's record", "row", out.ID, "ref", out.ProviderRef, "why", why)
	return out, nil
}
