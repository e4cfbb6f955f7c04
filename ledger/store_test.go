package ledger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPragmas(t *testing.T) {
	s := openTest(t)
	var mode string
	var sync int
	if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 {
		t.Fatalf("journal_mode %q synchronous %d, want wal and 2 (FULL)", mode, sync)
	}
}

func TestReopenKeepsRowsAndRunsMigrationsOnce(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-1", State: StatePending, CostUSD: 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, r.ID)
	if err != nil || got.IdemKey != "cb-1" || got.State != StatePending {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	var n int
	s.db.QueryRow(`SELECT COUNT(*) FROM migrations`).Scan(&n)
	if n != len(migrations) {
		t.Fatalf("%d migrations recorded, want %d", n, len(migrations))
	}
}

func TestIdempotencyKey(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	first, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-1", State: StatePending}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-1", State: StatePending}, nil)
	var dup *DuplicateError
	if !errors.As(err, &dup) || dup.Existing.ID != first.ID || !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second intent: %v, want duplicate of %s", err, first.ID)
	}
	// The same key of another kind is another action.
	if _, err := s.RecordIntent(ctx, Entry{Kind: KindFleet, Provider: "sim", IdemKey: "cb-1", State: StatePending}, nil); err != nil {
		t.Fatal(err)
	}
	// A failed purchase frees its key for a retry.
	first.State, first.Error = StateFailed, "insufficient capacity"
	if _, err := s.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: "cb-1", State: StatePending}, nil); err != nil {
		t.Fatalf("retry after failure: %v", err)
	}
	held, err := s.HeldKeys(ctx, KindBlock)
	if err != nil || !held["cb-1"] || len(held) != 1 {
		t.Fatalf("held keys %v, %v", held, err)
	}
}

func TestUpdateFromConflict(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	r, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "aws", IdemKey: "cb-1", State: StatePending}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The purchasing process records its outcome...
	done := r
	done.State, done.ProviderRef = StateScheduled, "cr-1"
	if _, err := s.Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	// ...so a reconciliation that read the row while pending must not
	// overwrite it.
	stale := r
	stale.State = StateUnknown
	if _, err := s.UpdateFrom(ctx, stale, StatePending); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	got, _ := s.Get(ctx, r.ID)
	if got.State != StateScheduled || got.ProviderRef != "cr-1" {
		t.Fatalf("row %+v", got)
	}
	if _, err := s.UpdateFrom(ctx, Entry{ID: "nope", State: StateFailed}, StatePending); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing row: %v", err)
	}
}

func TestDaySpentAndCheck(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	day := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	add := func(key string, cost float64, at time.Time, state string) {
		t.Helper()
		if _, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: key, State: state, CostUSD: cost, CreatedAt: at}, nil); err != nil {
			t.Fatal(err)
		}
	}
	add("a", 100, day, StateScheduled)
	add("b", 50, day.Add(15*time.Hour), StateActive) // next UTC day, 01:00
	add("c", 1000, day.Add(time.Hour), StateFailed)
	add("d", 7, day.Add(-10*time.Hour+time.Minute), StateUnknown) // same day, 00:01
	got, err := s.DaySpent(ctx, day)
	if err != nil || got != 107 {
		t.Fatalf("day spent %v, %v; want 107", got, err)
	}
	refuse := errors.New("over budget")
	_, err = s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: "e", State: StatePending, CostUSD: 5, CreatedAt: day},
		onDay(day, func(spent float64, ex *Entry) error {
			if spent != 107 || ex != nil {
				return fmt.Errorf("check saw spent %v existing %v", spent, ex)
			}
			return refuse
		}))
	if !errors.Is(err, refuse) {
		t.Fatalf("check: %v", err)
	}
	if held, _ := s.HeldKeys(ctx, KindBlock); held["e"] {
		t.Fatal("a refused intent was written")
	}
}

func TestIDsSortByTime(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []string
	for i := 0; i < 50; i++ {
		ids = append(ids, NewID(base.Add(time.Duration(i)*time.Millisecond)))
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatalf("ids not sorted by time: %v", ids)
	}
	if len(ids[0]) != 26 || ids[0] == ids[1] {
		t.Fatalf("bad id %q", ids[0])
	}
}

func TestOfferingCache(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := domain.Offering{ID: "cb-123", Provider: "sim", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a",
		InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: 8, MemoryGiB: 80}, InstanceCount: 2,
		Start: now.Add(24 * time.Hour), End: now.Add(72 * time.Hour), UpfrontUSD: 12345.5, Currency: "USD"}
	q := domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 48 * time.Hour}
	if err := s.SaveOfferings(ctx, q, []domain.Offering{o}, now); err != nil {
		t.Fatal(err)
	}
	c, err := s.Offering(ctx, "cb-123", now.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Offering.Start.Equal(o.Start) || c.Offering.UpfrontUSD != o.UpfrontUSD || c.Offering.GPU != o.GPU || c.Query.Instances != 2 {
		t.Fatalf("round trip: %+v", c)
	}
	if _, err := s.Offering(ctx, "cb-123", now.Add(2*time.Hour)); !errors.Is(err, ErrOfferingExpired) {
		t.Fatalf("after TTL: %v", err)
	}
	// Kept for exactly the TTL, not a nanosecond more.
	if _, err := s.Offering(ctx, "cb-123", now.Add(OfferingTTL)); err != nil {
		t.Fatalf("at the TTL: %v", err)
	}
	if _, err := s.Offering(ctx, "cb-123", now.Add(OfferingTTL+time.Nanosecond)); !errors.Is(err, ErrOfferingExpired) {
		t.Fatalf("just after the TTL: %v", err)
	}
	if _, err := s.Offering(ctx, "cb-nope", now); !errors.Is(err, ErrOfferingUnknown) {
		t.Fatalf("unknown id: %v", err)
	}
	// A search just before the start still refuses once the start is past.
	if err := s.SaveOfferings(ctx, q, []domain.Offering{o}, o.Start.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Offering(ctx, "cb-123", o.Start.Add(time.Second)); !errors.Is(err, ErrOfferingExpired) {
		t.Fatalf("after start: %v", err)
	}
	// An offering that starts when bought (an Azure reservation) stays
	// bookable after its start, for the search's TTL.
	az := o
	az.ID, az.Cloud, az.Provider, az.Start, az.StartsOnPurchase = "azcr-1", domain.CloudAzure, "azure", now, true
	if err := s.SaveOfferings(ctx, q, []domain.Offering{az}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Offering(ctx, "azcr-1", now.Add(10*time.Minute)); err != nil {
		t.Fatalf("starts-on-purchase offering after its start: %v", err)
	}
	if _, err := s.Offering(ctx, "azcr-1", now.Add(2*time.Hour)); !errors.Is(err, ErrOfferingExpired) {
		t.Fatalf("starts-on-purchase offering after the TTL: %v", err)
	}
}

// BenchmarkRecordIntent measures the durable (fsynced, WAL) intent commit
// that every purchase waits for before it is sent.
func BenchmarkRecordIntent(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: fmt.Sprintf("cb-%d", i), State: StatePending, CostUSD: 1},
			onDay(time.Now(), func(float64, *Entry) error { return nil }))
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkList measures reading a ledger of 1000 rows (the Ledger view
// rereads it every few seconds).
func BenchmarkList(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		if _, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "sim", IdemKey: fmt.Sprintf("cb-%d", i), State: StateScheduled}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := s.List(ctx)
		if err != nil || len(rows) != 1000 {
			b.Fatal(len(rows), err)
		}
	}
}

func TestRecordIntentSeesLiveRowsOfItsKind(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	pending, err := s.RecordIntent(ctx, Entry{Kind: KindFleet, Provider: "aws", IdemKey: "t1", State: StatePending}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordIntent(ctx, Entry{Kind: KindFleet, Provider: "aws", IdemKey: "t2", State: StateActive}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "aws", IdemKey: "cb-1", State: StateUnknown}, nil); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("same fleet in flight")
	_, err = s.RecordIntent(ctx, Entry{Kind: KindFleet, Provider: "aws", IdemKey: "t3", State: StatePending},
		func(_ Spending, existing *Entry, live []Entry) error {
			if existing != nil || len(live) != 2 || live[0].ID != pending.ID || live[1].State != StateActive {
				t.Errorf("existing %v, live %+v: want the pending and the active fleet rows, not the block", existing, live)
			}
			return refuse
		})
	if !errors.Is(err, refuse) {
		t.Fatalf("check's refusal: %v", err)
	}
	if rows, _ := s.List(ctx); len(rows) != 3 {
		t.Fatalf("a refused intent was written: %d rows", len(rows))
	}
}

// TestBudgetHoldsAcrossProcesses: several handles on one file (several
// processes) record intents at once under a daily cap; the check and the
// insert share one write lock, so the day never goes over the cap and no
// intent fails for any other reason.
func TestBudgetHoldsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	var handles []*Store
	for i := 0; i < 4; i++ {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		handles = append(handles, s)
	}
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	over := errors.New("over the cap")
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := handles[i%len(handles)]
			_, err := s.RecordIntent(ctx, Entry{Kind: KindBlock, Provider: "aws", IdemKey: fmt.Sprintf("cb-%d", i), State: StatePending, CostUSD: 10, CreatedAt: now},
				onDay(now, func(spent float64, _ *Entry) error {
					if spent+10 > 50 {
						return over
					}
					return nil
				}))
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		if !errors.Is(err, over) {
			t.Errorf("intent failed for another reason: %v", err)
		}
		refused++
	}
	spent, err := handles[0].DaySpent(ctx, now)
	if err != nil || spent != 50 || refused != 35 {
		t.Fatalf("day spent $%v (%v), %d refused: want $50 and 35", spent, err, refused)
	}
}

// onDay is an IntentCheck handed the ledger's spending on day.
func onDay(day time.Time, check func(daySpent float64, existing *Entry) error) IntentCheck {
	return func(spent Spending, existing *Entry, _ []Entry) error {
		sum, err := spent(day)
		if err != nil {
			return err
		}
		return check(sum, existing)
	}
}
