package ledger

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// TestTrackerSharesOneComputationPerTTL: sessions asking at once, and
// again within the TTL, cost the provider one call per row; after the
// TTL it is asked again.
func TestTrackerSharesOneComputationPerTTL(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.RecordIntent(context.Background(), block("b", 1, 0, 24, 100, StateActive), nil); err != nil {
		t.Fatal(err)
	}
	fr := &fakeReporter{reports: map[string]domain.UsageReport{}}
	var mu sync.Mutex
	now := at(10)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := NewTracker(TrackerOptions{Ledger: st, Now: clock, TTL: time.Minute,
		Reporter: func(string) (domain.UsageReporter, bool) { return fr, true }})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rep, err := tr.Report(context.Background()); err != nil || len(rep.Rows) != 1 {
				t.Errorf("report %+v %v", rep, err)
			}
		}()
	}
	wg.Wait()
	if _, err := tr.Report(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(fr.got); n != 1 {
		t.Errorf("%d provider calls for 9 reports within the TTL, want 1", n)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	tr.Report(context.Background())
	if n := len(fr.got); n != 2 {
		t.Errorf("%d provider calls after the TTL, want 2", n)
	}
	if tr.Since() != DefaultSince {
		t.Errorf("since %s", tr.Since())
	}
}

// TestTrackerRecomputesWhenTheLedgerChanges: a fleet launched (or a
// row's state changed) within the TTL is in the next report, not five
// minutes later: the Usage view said "Nothing in the ledger ran" beside a
// running fleet. Rows unchanged are still answered from the cache.
func TestTrackerRecomputesWhenTheLedgerChanges(t *testing.T) {
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if _, err := st.RecordIntent(ctx, block("b", 1, 0, 24, 100, StateActive), nil); err != nil {
		t.Fatal(err)
	}
	fr := &fakeReporter{reports: map[string]domain.UsageReport{}}
	tr := NewTracker(TrackerOptions{Ledger: st, Now: func() time.Time { return at(10) }, TTL: time.Hour,
		Reporter: func(string) (domain.UsageReporter, bool) { return fr, true }})
	if rep, err := tr.Report(ctx); err != nil || len(rep.Rows) != 1 {
		t.Fatalf("first report %+v %v", rep, err)
	}
	f, err := st.RecordIntent(ctx, fleet("f", 2, 0, 9, 1, StateActive), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Report(ctx)
	if err != nil || len(rep.Rows) != 2 {
		t.Fatalf("after a launch within the TTL: %d rows, %v; want the fleet too", len(rep.Rows), err)
	}
	calls := len(fr.got)
	tr.Report(ctx)
	if len(fr.got) != calls {
		t.Fatalf("rows unchanged: %d provider calls, want none", len(fr.got)-calls)
	}
	f.State, f.End = StateDeleted, at(9.5)
	if _, err := st.Update(ctx, f); err != nil {
		t.Fatal(err)
	}
	tr.Report(ctx)
	if len(fr.got) == calls {
		t.Fatal("a row's state changed and the report was not computed again")
	}
}
