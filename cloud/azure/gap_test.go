package azure

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// A region whose history back-fill failed (Resource Graph down) while the
// fetch as a whole succeeded reports a failure (not Soft), and the next
// poll, carrying the gap, gets the window's history, not only the live
// poll's lookback: else its window min/avg/max are the list price and a day.
func TestFetchFailedHistoryBackfillCatchesUp(t *testing.T) {
	f := newFakeARM(t)
	f.failGraph = true
	p := newTestProvider(t, f.options())
	var rec recorder
	first := backfill(48*time.Hour, "eastus")
	if err := p.Fetch(context.Background(), first, rec.sink); err != nil {
		t.Fatal(err)
	}
	if rec.regionErr("eastus") == nil {
		t.Fatal("eastus history did not fail: the fault did not bite")
	}
	if rec.soft("eastus") {
		t.Fatal("the history failure is marked Soft: the hub would not ask the window again")
	}
	f.failGraph = false
	live := domain.FetchRequest{Query: first.Query, Since: first.Until, Until: first.Until.Add(30 * time.Second),
		Missed: map[string]domain.Gap{"eastus": {From: first.Since, Until: first.Until}}}
	if err := p.Fetch(context.Background(), live, rec.sink); err != nil {
		t.Fatal(err)
	}
	if err := rec.regionErr("eastus"); err == nil {
		t.Fatal("want the first fetch's error recorded")
	}
	k := key("eastus", "1", "Standard_NC24ads_A100_v4")
	var s series.Series
	for _, pt := range rec.points(k) {
		s = s.Merge([]int64{pt.At.Unix()}, []float64{pt.USDHour})
	}
	// The fake's history: 0.75 from 11-27, 0.7346 from 11-28 18:00, 0.71
	// from 11-29 08:00.
	for _, want := range []struct {
		at  string
		usd float64
	}{{"2026-11-27T00:00:00Z", 0.75}, {"2026-11-28T18:00:00Z", 0.7346}, {"2026-11-29T08:00:00Z", 0.71}} {
		got, ok := s.PriceAt(at(want.at).Unix())
		if !ok || got != want.usd {
			t.Errorf("price at %s = %v (ok %v), want %v from the history", want.at, got, ok, want.usd)
		}
	}
	st := s.Stats(first.Since.Unix(), first.Until.Unix())
	if !st.OK || st.Max != 0.75 || st.Min != 0.71 {
		t.Errorf("window stats min %v max %v, want 0.71 0.75", st.Min, st.Max)
	}
}
