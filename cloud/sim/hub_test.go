package sim

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// The sim behind the real hub: the first snapshot that is ready holds
// every pool, described and with its history.
func TestThroughTheHub(t *testing.T) {
	m := New(Options{Seed: 1})
	h := feed.New([]domain.Provider{m}, feed.Options{
		Query:    domain.Query{Window: 6 * time.Hour},
		Interval: func(string) time.Duration { return 50 * time.Millisecond },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	snap, err := h.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Pools) != len(m.pools) {
		t.Fatalf("hub has %d pools, the sim %d", len(snap.Pools), len(m.pools))
	}
	from := snap.Taken.Add(-6 * time.Hour).Unix()
	for _, p := range snap.Pools {
		if !p.Simulated || p.OnDemandUSDHour == nil || p.Interruption == nil {
			t.Fatalf("%s: %+v, want a simulated, described pool", p.Key, p.Pool)
		}
		if st := p.History.Stats(from, snap.Taken.Unix()); !st.OK || st.Min <= 0 {
			t.Fatalf("%s: no history over the window: %+v", p.Key, st)
		}
	}
	src, _ := snap.Source("sim")
	if src.Note != "SIMULATED MARKET (seed 1)" || !snap.Simulated() {
		t.Errorf("source note %q, simulated %v", src.Note, snap.Simulated())
	}
	if len(src.Regions) == 0 {
		t.Fatal("the sim source reports no regions")
	}
	for _, r := range src.Regions {
		if r.Loading() || r.Err != "" {
			t.Errorf("region %+v still loading or failed", r)
		}
	}
	cancel()
	<-done
}
