package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/internal/sqlitedb"
)

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
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return Owner{}, false
	}
	j := strings.LastIndexByte(s[:i], '/')
	if j < 0 {
		return Owner{}, false
	}
	pid, err := strconv.Atoi(s[j+1 : i])
	if err != nil || s[i+1:] == "" {
		return Owner{}, false
	}
	return Owner{Host: s[:j], PID: pid, Token: s[i+1:]}, true
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
	f, ok := s.calls[id]
	if !ok {
		return
	}
	delete(s.calls, id)
	if f != nil {
		os.Remove(s.rowLock(id))
		f.Close()
	}
}

func (s *Store) releaseAll() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.calls))
	for id := range s.calls {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.EndCall(id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	return s.heartbeat(o, r, now)
}

func (s *Store) heartbeat(o Owner, r Entry, now time.Time) (Liveness, string) {
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
