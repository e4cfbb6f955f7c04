package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

// A job is the plan's policy driven live (package job): the ledger keeps its terms, hold, progress, lease and moves;
// each launch is an ordinary row, linked by its idempotency key in job_launches before the launch is recorded.

// States of a job.
const (
	JobScheduled = "scheduled"
	JobRunning   = "running"
	JobDone      = "done"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// JobStates lists every job state.
var JobStates = []string{JobScheduled, JobRunning, JobDone, JobFailed, JobCancelled}

// JobActive reports whether a job in the state is still to be driven.
func JobActive(state string) bool { return state == JobScheduled || state == JobRunning }

// JobTerms are the job's terms as the user gave them.
type JobTerms struct {
	GPUs           int           `json:"gpus"`
	Models         []string      `json:"models"`
	Hours          float64       `json:"hours"`
	Start          time.Time     `json:"start"`
	Deadline       time.Time     `json:"deadline"`
	Checkpointable bool          `json:"checkpointable"`
	Checkpoint     time.Duration `json:"checkpoint"`
	Changeover     time.Duration `json:"changeover"`
	// ProgressFile or ProgressCommand, when set, reports the job's own hours of work done, read at each review.
	ProgressFile    string `json:"progress_file,omitempty"`
	ProgressCommand string `json:"progress_command,omitempty"`
}

// JobPlan is what the plan said when the job was started.
type JobPlan struct {
	ExpectedUSD float64 `json:"expected_usd"`
	P95USD      float64 `json:"p95_usd"`
	OnTimePct   float64 `json:"on_time_pct"`
}

// Job is one job of the ledger.
type Job struct {
	ID       string
	State    string
	Strategy string
	Terms    JobTerms
	Plan     JobPlan
	// Live is the plan's lanes as the driver carries them out, Progress its state (planner.LiveJob, LiveState).
	Live, Progress json.RawMessage
	// MaxUSD is the user's limit (0: none); HoldUSD what the job holds against the caps (JobHold).
	MaxUSD, HoldUSD float64
	// WorkDone is the hours of work done; SpentUSD what its rows cost, as of its last review.
	WorkDone, SpentUSD float64
	// Reason says why it failed or was cancelled; Outlook what the last review projected.
	Reason, Outlook string
	// LeaseHolder is the driver that carries the job out until LeaseUntil.
	LeaseHolder string
	LeaseUntil  time.Time
	// Seq numbers the job's moves.
	Seq                              int
	Actor                            string
	CreatedAt, UpdatedAt, FinishedAt time.Time
}

// JobMove is one move a driver made, and why.
type JobMove struct {
	Seq    int       `json:"-"`
	At     time.Time `json:"time"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason"`
	// Key is the idempotency key of the launch the move makes, "" for none.
	Key string `json:"launch_key,omitempty"`
}

// jobsMigration adds the jobs. A new table only: no ledger row changes.
const jobsMigration = `CREATE TABLE jobs (
		id           TEXT PRIMARY KEY,
		state        TEXT NOT NULL,
		strategy     TEXT NOT NULL,
		terms        TEXT NOT NULL,
		plan         TEXT NOT NULL,
		live         TEXT NOT NULL,
		progress     TEXT NOT NULL,
		max_usd      REAL NOT NULL DEFAULT 0,
		hold_usd     REAL NOT NULL DEFAULT 0,
		work_done    REAL NOT NULL DEFAULT 0,
		spent_usd    REAL NOT NULL DEFAULT 0,
		reason       TEXT NOT NULL DEFAULT '',
		outlook      TEXT NOT NULL DEFAULT '',
		lease_holder TEXT NOT NULL DEFAULT '',
		lease_until  TEXT NOT NULL DEFAULT '',
		seq          INTEGER NOT NULL DEFAULT 0,
		actor        TEXT NOT NULL DEFAULT '',
		created_at   TEXT NOT NULL,
		updated_at   TEXT NOT NULL,
		finished_at  TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX jobs_state ON jobs(state);
	CREATE TABLE job_moves (
		job_id     TEXT NOT NULL,
		seq        INTEGER NOT NULL,
		at         TEXT NOT NULL,
		from_lane  TEXT NOT NULL,
		to_lane    TEXT NOT NULL,
		reason     TEXT NOT NULL,
		launch_key TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (job_id, seq)
	);
	CREATE TABLE job_launches (
		idem_key   TEXT PRIMARY KEY,
		job_id     TEXT NOT NULL,
		seq        INTEGER NOT NULL,
		created_at TEXT NOT NULL
	);
	CREATE INDEX job_launches_job ON job_launches(job_id);`

// jobsVersion is the schema version that has the jobs, wherever the migration stands in the list.
var jobsVersion = slices.Index(migrations, jobsMigration) + 1

func (s *Store) hasJobs() bool { return s.version >= jobsVersion }

// ErrLeaseLost: the writer no longer holds the job's lease; another driver took the job over.
var ErrLeaseLost = errors.New("the job's lease is held by another driver")

const jobCols = `id, state, strategy, terms, plan, live, progress, max_usd, hold_usd, work_done, spent_usd, reason, outlook,
	lease_holder, lease_until, seq, actor, created_at, updated_at, finished_at`

func scanJob(sc sqlitedb.Scanner) (Job, error) {
	var j Job
	var terms, plan, live, prog, until, created, updated, finished string
	if err := sc.Scan(&j.ID, &j.State, &j.Strategy, &terms, &plan, &live, &prog, &j.MaxUSD, &j.HoldUSD, &j.WorkDone, &j.SpentUSD,
		&j.Reason, &j.Outlook, &j.LeaseHolder, &until, &j.Seq, &j.Actor, &created, &updated, &finished); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return j, ErrNotFound
		}
		return j, err
	}
	if err := json.Unmarshal([]byte(terms), &j.Terms); err != nil {
		return j, fmt.Errorf("job %s: terms: %w", j.ID, err)
	}
	if err := json.Unmarshal([]byte(plan), &j.Plan); err != nil {
		return j, fmt.Errorf("job %s: plan: %w", j.ID, err)
	}
	j.Live, j.Progress = json.RawMessage(live), json.RawMessage(prog)
	if err := parseTimes([]string{until, created, updated, finished}, &j.LeaseUntil, &j.CreatedAt, &j.UpdatedAt, &j.FinishedAt); err != nil {
		return j, fmt.Errorf("job %s: %w", j.ID, err)
	}
	return j, nil
}

// JobHold is what a job holds against the budget: the larger of its plan's p95 cost and its limit.
func JobHold(p95, maxUSD float64) float64 { return math.Max(p95, maxUSD) }

// CreateJob records a new job; check gets the day's spending in the write transaction, so two
// processes cannot both pass a cap.
func (s *Store) CreateJob(ctx context.Context, j Job, check func(daySpent float64) error) (Job, error) {
	if s.readOnly {
		return Job{}, fmt.Errorf("record job: %w", ErrReadOnly)
	}
	if j.ID == "" {
		j.ID = NewID(s.now())
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = s.now()
	}
	j.UpdatedAt = j.CreatedAt
	j.State = cmp.Or(j.State, JobScheduled)
	if len(j.Live) == 0 {
		j.Live = json.RawMessage("{}")
	}
	if len(j.Progress) == 0 {
		j.Progress = json.RawMessage("{}")
	}
	terms, err := json.Marshal(j.Terms)
	if err != nil {
		return Job{}, err
	}
	plan, err := json.Marshal(j.Plan)
	if err != nil {
		return Job{}, err
	}
	err = s.inTx(ctx, "record job", func(tx *sql.Tx) error {
		if check != nil {
			spent, err := s.DayHeld(ctx, tx, j.CreatedAt, "")
			if err != nil {
				return fmt.Errorf("record job: %w", err)
			}
			if err := check(spent); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO jobs (`+jobCols+`) VALUES (?`+strings.Repeat(",?", 19)+`)`,
			j.ID, j.State, j.Strategy, string(terms), string(plan), string(j.Live), string(j.Progress), j.MaxUSD, j.HoldUSD,
			j.WorkDone, j.SpentUSD, j.Reason, j.Outlook, j.LeaseHolder, fmtTime(j.LeaseUntil), j.Seq, j.Actor,
			fmtTime(j.CreatedAt), fmtTime(j.UpdatedAt), fmtTime(j.FinishedAt))
		if err != nil {
			return fmt.Errorf("record job: %w", err)
		}
		return nil
	})
	if err != nil {
		return Job{}, err
	}
	s.changes.Add(1)
	return j, nil
}

// GetJob returns one job, also by an id prefix of at least 6 characters that names only it.
func (s *Store) GetJob(ctx context.Context, id string) (Job, error) {
	if !s.hasJobs() {
		return Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	j, err := scanJob(s.db.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, ErrNotFound) && len(id) >= 6 {
		js, lerr := s.jobs(ctx, `WHERE id LIKE ? ORDER BY id LIMIT 2`, strings.ToUpper(id)+"%")
		if lerr == nil && len(js) == 1 {
			return js[0], nil
		}
	}
	if err != nil {
		return Job{}, fmt.Errorf("job %s: %w", id, err)
	}
	return j, nil
}

// ListJobs returns the jobs newest first, only those in states when given.
func (s *Store) ListJobs(ctx context.Context, states ...string) ([]Job, error) {
	if !s.hasJobs() {
		return nil, nil
	}
	where, args := inStates(states)
	return s.jobs(ctx, where+` ORDER BY id DESC`, args...)
}

func (s *Store) jobs(ctx context.Context, where string, args ...any) ([]Job, error) {
	out, err := sqlitedb.All(ctx, s.db, scanJob, `SELECT `+jobCols+` FROM jobs `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// ReleaseLease gives the lease up, if holder has it.
func (s *Store) ReleaseLease(ctx context.Context, id, holder string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE jobs SET lease_holder = '', lease_until = '' WHERE id = ? AND lease_holder = ?`, id, holder)
	return err
}

// SaveJob writes the job's progress, state, figures and lease expiry only while holder has its lease
// (ErrLeaseLost); a job cancelled meanwhile stays cancelled (ErrJobEnded).
func (s *Store) SaveJob(ctx context.Context, j Job, holder string) (Job, error) {
	failed, err := s.SaveJobs(ctx, []Job{j}, holder)
	if err == nil {
		err = failed[j.ID]
	}
	return j, err
}

// ErrJobEnded: a fenced write to a job that ended meanwhile (cancelled by the user).
var ErrJobEnded = errors.New("the job has ended")

// SaveJobs is SaveJob for a review's jobs in one transaction; failed says by job id why one was not saved.
func (s *Store) SaveJobs(ctx context.Context, js []Job, holder string) (failed map[string]error, err error) {
	if s.readOnly {
		return nil, ErrReadOnly
	}
	now := s.now()
	err = s.inTx(ctx, "save jobs", func(tx *sql.Tx) error {
		for _, j := range js {
			res, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ?, live = ?, progress = ?, work_done = ?, spent_usd = ?, reason = ?, outlook = ?,
				lease_until = ?, updated_at = ?, finished_at = ? WHERE id = ? AND lease_holder = ? AND state IN (?, ?)`,
				j.State, string(j.Live), string(j.Progress), j.WorkDone, j.SpentUSD, j.Reason, j.Outlook, fmtTime(j.LeaseUntil),
				fmtTime(now), fmtTime(j.FinishedAt), j.ID, holder, JobScheduled, JobRunning)
			if err != nil {
				return fmt.Errorf("save job %s: %w", j.ID, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				if failed == nil {
					failed = map[string]error{}
				}
				failed[j.ID] = s.whyNotSaved(ctx, tx, j.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return failed, nil
}

// TakeLeases gives holder the leases of the jobs (as read) that are free, its own, lapsed at now, or held by a
// process gone; a compare-and-swap, so of two drivers one gets each. It returns the jobs holder now holds.
func (s *Store) TakeLeases(ctx context.Context, js []Job, holder string, now, until time.Time, gone func(holder string) bool) ([]Job, error) {
	if s.readOnly {
		return nil, ErrReadOnly
	}
	var held []Job
	err := s.inTx(ctx, "job leases", func(tx *sql.Tx) error {
		for _, j := range js {
			free := j.LeaseHolder == "" || j.LeaseHolder == holder || !now.Before(j.LeaseUntil) || (gone != nil && gone(j.LeaseHolder))
			if !free {
				continue
			}
			res, err := tx.ExecContext(ctx, `UPDATE jobs SET lease_holder = ?, lease_until = ? WHERE id = ? AND lease_holder = ? AND lease_until = ?`,
				holder, fmtTime(until), j.ID, j.LeaseHolder, fmtTime(j.LeaseUntil))
			if err != nil {
				return fmt.Errorf("lease of job %s: %w", j.ID, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				j.LeaseHolder, j.LeaseUntil = holder, until
				held = append(held, j)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

func (s *Store) whyNotSaved(ctx context.Context, tx *sql.Tx, id string) error {
	var state string
	if err := tx.QueryRowContext(ctx, `SELECT state FROM jobs WHERE id = ?`, id).Scan(&state); err != nil {
		return fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if !JobActive(state) {
		return fmt.Errorf("job %s is %s: %w", id, state, ErrJobEnded)
	}
	return fmt.Errorf("job %s: %w", id, ErrLeaseLost)
}

// RecordMove writes a move, fenced by holder's lease; a launching move reserves its key in job_launches in the
// same transaction, before the launch is recorded or sent, so the launch is the job's however the process ends.
func (s *Store) RecordMove(ctx context.Context, jobID, holder string, m JobMove) (JobMove, error) {
	if s.readOnly {
		return m, ErrReadOnly
	}
	err := s.inTx(ctx, "record move", func(tx *sql.Tx) error {
		var seq int
		var lh, state string
		if err := tx.QueryRowContext(ctx, `SELECT seq, lease_holder, state FROM jobs WHERE id = ?`, jobID).Scan(&seq, &lh, &state); err != nil {
			return fmt.Errorf("record move of job %s: %w", jobID, err)
		}
		if lh != holder {
			return fmt.Errorf("record move of job %s: %w", jobID, ErrLeaseLost)
		}
		if !JobActive(state) && m.Key != "" {
			return fmt.Errorf("record move of job %s (%s): %w", jobID, state, ErrJobEnded)
		}
		m.Seq = seq + 1
		if m.At.IsZero() {
			m.At = s.now()
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_moves (job_id, seq, at, from_lane, to_lane, reason, launch_key) VALUES (?,?,?,?,?,?,?)`,
			jobID, m.Seq, fmtTime(m.At), m.From, m.To, m.Reason, m.Key); err != nil {
			return fmt.Errorf("record move of job %s: %w", jobID, err)
		}
		if m.Key != "" {
			if _, err := tx.ExecContext(ctx, `INSERT INTO job_launches (idem_key, job_id, seq, created_at) VALUES (?,?,?,?)`,
				m.Key, jobID, m.Seq, fmtTime(m.At)); err != nil {
				return fmt.Errorf("record launch of job %s: %w", jobID, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET seq = ? WHERE id = ?`, m.Seq, jobID); err != nil {
			return fmt.Errorf("record move of job %s: %w", jobID, err)
		}
		return nil
	})
	return m, err
}

// JobMoves returns the job's moves in order.
func (s *Store) JobMoves(ctx context.Context, jobID string) ([]JobMove, error) {
	out, err := sqlitedb.All(ctx, s.db, func(sc sqlitedb.Scanner) (JobMove, error) {
		var m JobMove
		var at string
		err := sc.Scan(&m.Seq, &at, &m.From, &m.To, &m.Reason, &m.Key)
		if err == nil {
			m.At, err = parseTime(at)
		}
		return m, err
	}, `SELECT seq, at, from_lane, to_lane, reason, launch_key FROM job_moves WHERE job_id = ? ORDER BY seq`, jobID)
	if err != nil {
		return nil, fmt.Errorf("moves of job %s: %w", jobID, err)
	}
	return out, nil
}

// JobRows returns the ledger rows of the job's launches, oldest first.
func (s *Store) JobRows(ctx context.Context, jobID string) ([]Entry, error) {
	if !s.hasJobs() {
		return nil, nil
	}
	return s.rows(ctx, s.db, "rows of job "+jobID, `WHERE kind = ? AND idem_key IN (SELECT idem_key FROM job_launches WHERE job_id = ?)
		ORDER BY (SELECT seq FROM job_launches k WHERE k.idem_key = ledger.idem_key), id`, KindFleet, jobID)
}

// EndJob sets a job's final state at the caller's clock (a fast simulated market runs ahead) whoever holds
// its lease; false when the job had already ended.
func (s *Store) EndJob(ctx context.Context, id, state, reason string, at time.Time) (bool, error) {
	if s.readOnly {
		return false, ErrReadOnly
	}
	res, err := s.db.ExecContext(ctx, `UPDATE jobs SET state = ?, reason = ?, finished_at = ?, updated_at = ? WHERE id = ? AND state IN (?, ?)`,
		state, reason, fmtTime(at), fmtTime(at), id, JobScheduled, JobRunning)
	if err != nil {
		return false, fmt.Errorf("end job %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// jobsDaySum is what the jobs created on day count against its cap: an active job its hold (or what it
// spent, if more), an ended one what it spent. Their launches' rows are left out of rowsHeld's sum.
func jobsDaySum(ctx context.Context, q sqlitedb.Querier, day time.Time) (float64, error) {
	var sum float64
	err := q.QueryRowContext(ctx, `SELECT COALESCE(SUM(CASE WHEN state IN (?, ?) THEN MAX(hold_usd, spent_usd) ELSE spent_usd END), 0)
		FROM jobs WHERE created_at >= ? AND created_at < ?`, JobScheduled, JobRunning,
		fmtTime(day), fmtTime(day.Add(24*time.Hour))).Scan(&sum)
	if err != nil {
		return 0, fmt.Errorf("sum of the day's jobs: %w", err)
	}
	return sum, nil
}

// StartJob records a job whose hold is checked as one purchase (max_booking_usd) and counts on the day
// with everything else (max_daily_usd).
func (s *Service) StartJob(ctx context.Context, j Job) (Job, error) {
	if s.st.ReadOnly() {
		return Job{}, fmt.Errorf("refused: %w; nothing was started", ErrReadOnly)
	}
	j.Actor = cmp.Or(j.Actor, s.opt.Actor)
	j.CreatedAt = s.opt.Now()
	return s.st.CreateJob(ctx, j, func(spent float64) error { return s.checkBudget(j.HoldUSD, spent) })
}

// ReconcileRow settles one row as Reconcile does unless its call is in flight (a simulated fleet whose
// process ended is recorded ended); it returns the row as recorded and whether its outcome is known.
func (s *Service) ReconcileRow(ctx context.Context, r Entry) (Entry, bool, string) {
	if r.Settled() {
		if next, ended := s.endedWithProcess(ctx, r); ended {
			if u, err := s.settle(ctx, next, r.State); err == nil {
				return u, true, ""
			}
		}
		return r, true, ""
	}
	if ok, why := s.inFlight(r); ok {
		return r, false, "the call is still in flight: " + why
	}
	return s.reconcileRow(ctx, r)
}

// HoldProcessLock takes the process lock until Close, so other processes here see it alive
// (ProcessLiveness): a driver's lease is taken over at once only from a process gone.
func (s *Store) HoldProcessLock() error {
	if s.readOnly {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockProcess()
}
