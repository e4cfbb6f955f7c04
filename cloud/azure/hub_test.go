package azure

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// Through the real hub, as the Market and Chart views see it: pools with
// eviction rates, and a history whose window stats count the point before
// the window as the price at its start.
func TestThroughHub(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	h := feed.New([]domain.Provider{p}, feed.Options{
		Query:        domain.Query{Regions: []string{"eastus"}, Window: 24 * time.Hour},
		Interval:     func(string) time.Duration { return time.Hour },
		PublishEvery: time.Millisecond,
		Now:          func() time.Time { return testNow },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	snap, err := h.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Sources) != 1 || snap.Sources[0].State != feed.StateReady || snap.Sources[0].Note != "signed in to subscription "+testSub {
		t.Fatalf("source = %+v", snap.Sources)
	}
	var found bool
	for _, pv := range snap.Pools {
		if pv.Pool.Key() != key("eastus", "1", "Standard_NC24ads_A100_v4") {
			continue
		}
		found = true
		if pv.Pool.Interruption == nil || pv.Pool.Interruption.Bucket != "<5%" || pv.Pool.OnDemandUSDHour == nil {
			t.Errorf("pool = %+v", pv.Pool)
		}
		st := pv.History.Stats(testNow.Add(-24*time.Hour).Unix(), testNow.Unix())
		// 0.75 from 12:00 to 18:00, 0.7346 to 08:00, 0.71 to 12:00.
		want := (0.75*6 + 0.7346*14 + 0.71*4) / 24
		if !st.OK || st.First != 0.75 || st.Last != 0.71 || st.Min != 0.71 || st.Max != 0.75 || abs(st.Avg-want) > 1e-9 {
			t.Errorf("stats = %+v, want avg %v", st, want)
		}
	}
	if !found {
		t.Errorf("no A100 pool in the snapshot")
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
