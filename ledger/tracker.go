package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Reporters returns each provider's usage reporter by name.
func Reporters(ps []domain.Provider) func(string) (domain.UsageReporter, bool) {
	m := map[string]domain.UsageReporter{}
	for _, p := range ps {
		if r, ok := p.(domain.UsageReporter); ok {
			m[p.Name()] = r
		}
	}
	return func(name string) (domain.UsageReporter, bool) {
		r, ok := m[name]
		return r, ok
	}
}

// TrackerOptions configure a Tracker.
type TrackerOptions struct {
	Ledger *Store
	// Reporter is as in UsageOptions.
	Reporter func(provider string) (domain.UsageReporter, bool)
	// Since is how far back a report reaches (default 7 days).
	Since time.Duration
	// TTL is how long a report is reused (default 5m): metrics APIs bill per request.
	TTL         time.Duration
	MaxIdlePct  float64
	Timeout     time.Duration
	Concurrency int
	Now         func() time.Time
	Kept        Kept
	// Log is told once that a report could not be kept; nil logs nothing.
	Log *slog.Logger
}

// Tracker shares one report among a process's sessions for TTL.
type Tracker struct {
	opt TrackerOptions

	mu     sync.Mutex
	last   *UsageReport
	lastAt time.Time
	// lastRows is the ledger the report came from: a change makes it stale at once.
	lastRows   string
	flight     chan struct{}
	saveWarned atomic.Bool
}

// DefaultSince is how far back a usage report reaches unless asked.
const DefaultSince = 7 * 24 * time.Hour

// NewTracker makes a tracker.
func NewTracker(opt TrackerOptions) *Tracker {
	if opt.Since <= 0 {
		opt.Since = DefaultSince
	}
	if opt.TTL <= 0 {
		opt.TTL = 5 * time.Minute
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Reporter == nil {
		opt.Reporter = func(string) (domain.UsageReporter, bool) { return nil, false }
	}
	return &Tracker{opt: opt}
}

// Since is how far back the tracker's reports reach.
func (t *Tracker) Since() time.Duration { return t.opt.Since }

// MaxIdlePct is the alert threshold (0: off).
func (t *Tracker) MaxIdlePct() float64 { return t.opt.MaxIdlePct }

// Report returns the latest report unless it is older than TTL or the rows changed.
func (t *Tracker) Report(ctx context.Context) (UsageReport, error) {
	for {
		rows, err := t.opt.Ledger.List(ctx)
		if err != nil {
			return UsageReport{}, err
		}
		key := rowsKey(rows)
		t.mu.Lock()
		now := t.opt.Now()
		if t.last != nil && now.Sub(t.lastAt) < t.opt.TTL && key == t.lastRows {
			r := *t.last
			t.mu.Unlock()
			return r, nil
		}
		if t.flight != nil {
			ch := t.flight
			t.mu.Unlock()
			select {
			case <-ch:
				continue // its report, if the rows are still those
			case <-ctx.Done():
				return UsageReport{}, ctx.Err()
			}
		}
		ch := make(chan struct{})
		t.flight = ch
		t.mu.Unlock()

		rep := t.compute(ctx, rows)
		t.mu.Lock()
		t.flight = nil
		t.last, t.lastAt, t.lastRows = &rep, t.opt.Now(), key
		t.mu.Unlock()
		close(ch)
		return rep, nil
	}
}

// rowsKey is what a report depends on of the rows (not their heartbeat).
func rowsKey(rows []Entry) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s|%s|%d|%d|%d|%s;", r.ID, r.State, r.Start.UnixNano(), r.End.UnixNano(), r.InstanceCount, r.ProviderRef)
	}
	return b.String()
}

func (t *Tracker) compute(ctx context.Context, rows []Entry) UsageReport {
	now := t.opt.Now()
	return Compute(ctx, rows, UsageOptions{Since: now.Add(-t.opt.Since), Now: now, Reporter: t.opt.Reporter,
		Timeout: t.opt.Timeout, Concurrency: t.opt.Concurrency, MaxIdlePct: t.opt.MaxIdlePct,
		Kept: t.opt.Kept, SaveFailed: t.saveFailed})
}

// saveFailed logs the first failure to keep a report.
func (t *Tracker) saveFailed(err error) {
	if t.opt.Log != nil && t.saveWarned.CompareAndSwap(false, true) {
		t.opt.Log.Warn("usage: what the clouds showed could not be kept in the ledger; reports are still computed, "+
			"but usage the clouds forget (ended instances, deleted reservations) will be missing later", "err", err)
	}
}
