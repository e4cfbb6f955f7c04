package ledger

import (
	"context"
	"time"
)

// Test-only reads and moves of the job store.

// TakeLease gives the job's lease to holder until `until` if it is free,
// already holder's, lapsed at now, or held by a process gone (gone says,
// from the holder's name). It compares and swaps: of two drivers that
// read the same lapsed lease, one gets it. ok is false when another
// driver holds it.
func (s *Store) TakeLease(ctx context.Context, id, holder string, now, until time.Time, gone func(holder string) bool) (Job, bool, error) {
	j, err := s.GetJob(ctx, id)
	if err != nil {
		return j, false, err
	}
	held, err := s.TakeLeases(ctx, []Job{j}, holder, now, until, gone)
	if err != nil || len(held) == 1 {
		if len(held) == 1 {
			j = held[0]
		}
		return j, len(held) == 1, err
	}
	cur, err := s.GetJob(ctx, id)
	return cur, false, err
}

// JobOfRow returns the id of the job whose launch the row is, or "".
func (s *Store) JobOfRow(ctx context.Context, r Entry) string {
	if !s.hasJobs() {
		return ""
	}
	var id string
	_ = s.db.QueryRowContext(ctx, `SELECT job_id FROM job_launches WHERE idem_key = ?`, r.IdemKey).Scan(&id)
	return id
}
