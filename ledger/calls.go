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
)

// A ledger row that is pending has a call in flight: a purchase or launch
// sent and not yet answered. Only the process making the call can say
// when it is over, so the row names its owner (host, process id and a
// token of the store handle) and the owner holds a lock on a file named
// after the row for as long as the call lasts, and beats a heartbeat into
// the row. Another process on the same host asks the lock; one on another
// host (a data dir shared over the network) reads the heartbeat. Neither
// judges the call by its own timeout: `ledger --timeout 1s` must never
// take a purchase that another process is still waiting on for lost.

// HeartbeatEvery is how often the owner of a call in flight beats.
const HeartbeatEvery = 10 * time.Second

// HeartbeatStale is how old a heartbeat may be before the call is taken
// for abandoned, where no lock can be asked (another host).
const HeartbeatStale = 6 * HeartbeatEvery

// Owner names the process (and store handle) that made a ledger row's
// call.
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
	return Owner{Host: host, PID: os.Getpid(), Token: randomHex(8)}
}

// Owner is this handle's identity in the rows whose calls it makes.
func (s *Store) Owner() Owner { return s.owner }

// callDir holds the lock files of calls in flight, beside the database.
func (s *Store) callDir() string { return s.path + "-calls" }

func (s *Store) rowLock(id string) string { return filepath.Join(s.callDir(), "row-"+id+".lock") }

func (s *Store) procLock(token string) string {
	return filepath.Join(s.callDir(), "proc-"+token+".lock")
}

// errCallHeld is returned by claimCall when another handle holds the
// row's call.
var errCallHeld = errors.New("another process holds the call")

// claimCall takes the lock of a call in flight for the row id, and the
// handle's process lock, which is held until Close: a simulated market's
// fleet lives as long as the process that launched it.
func (s *Store) claimCall(id string) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.calls[id]; ok {
		return nil
	}
	if s.proc == nil && lockSupported {
		f, err := lockFile(s.procLock(s.owner.Token))
		if err != nil {
			return fmt.Errorf("take the process lock: %w", err)
		}
		s.proc = f
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

// EndCall releases the lock of the row's call: the call is over, whether
// or not its outcome could be written. A row still pending after EndCall
// is then seen by every process as abandoned, and reconciled.
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
	// OwnerUnknown: the row names no owner (an earlier gpumarket wrote
	// it), or one on another host that sent no heartbeat.
	OwnerUnknown Liveness = iota
	// OwnerAlive: the call is still being made (the process lives).
	OwnerAlive
	// OwnerGone: the owner no longer makes the call (the process ended,
	// crashed, or finished without writing the outcome).
	OwnerGone
)

// CallLiveness says whether a pending row's call is still in flight, and
// how that was learned, for messages. It asks the owner's lock on this
// host, its heartbeat from another.
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

// ProcessLiveness says whether the process (store handle) that made a
// row's call still runs: a simulated fleet lives in that process's
// memory. It can tell only on this host.
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
