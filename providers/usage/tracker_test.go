package usage

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/store"
)

// TestTrackerSharesOneComputationPerTTL: sessions asking at once, and
// again within the TTL, cost the provider one call per row; after the
// TTL it is asked again.
func TestTrackerSharesOneComputationPerTTL(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.RecordIntent(context.Background(), block("b", 1, 0, 24, 100, store.StateActive), nil); err != nil {
		t.Fatal(err)
	}
	fr := &fakeReporter{reports: map[string]providers.UsageReport{}}
	var mu sync.Mutex
	now := at(10)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := NewTracker(TrackerOptions{Ledger: st, Now: clock, TTL: time.Minute,
		Reporter: func(string) (providers.UsageReporter, bool) { return fr, true }})
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
