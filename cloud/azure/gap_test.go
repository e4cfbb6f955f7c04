package azure

import (
	"context"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// A region whose history back-fill failed (Resource Graph down) while the
// fetch as a whole succeeded must get its window's history at the next
// poll, not only the live poll's lookback: else its window min/avg/max
// are made of the list price and a day of changes.
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
	f.failGraph = false
	live := domain.FetchRequest{Query: first.Query, Since: first.Until, Until: first.Until.Add(30 * time.Second)}
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

// An aside fetch (a fleet's estimate) between the hub's fetches must not
// take the catch-up of a region's failed history for itself: its points
// go to that caller, so the hub's next poll still asks for the window.
func TestAsideFetchLeavesTheGapToTheHub(t *testing.T) {
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
	f.failGraph = false
	aside := domain.FetchRequest{Query: first.Query, Since: first.Until.Add(-6 * time.Hour), Until: first.Until, Backfill: true, Aside: true}
	var other recorder
	if err := p.Fetch(context.Background(), aside, other.sink); err != nil {
		t.Fatal(err)
	}
	k := key("eastus", "1", "Standard_NC24ads_A100_v4")
	// The point in force at its start is 0.7346 from 11-28 18:00; the
	// 0.75 before it is the hub's gap, not this fetch's.
	for _, pt := range other.points(k) {
		if pt.At.Before(at("2026-11-28T18:00:00Z")) {
			t.Errorf("the aside fetch got a point at %s, before the one in force at its start %s (widened over the hub's gap)", pt.At, aside.Since)
		}
	}
	live := domain.FetchRequest{Query: first.Query, Since: first.Until, Until: first.Until.Add(30 * time.Second)}
	if err := p.Fetch(context.Background(), live, rec.sink); err != nil {
		t.Fatal(err)
	}
	var s series.Series
	for _, pt := range rec.points(k) {
		s = s.Merge([]int64{pt.At.Unix()}, []float64{pt.USDHour})
	}
	// 0.75 was in force from the first window's start to 11-28 18:00.
	if got, ok := s.PriceAt(first.Since.Unix()); !ok || got != 0.75 {
		t.Errorf("after an aside fetch the hub's poll did not catch up: price at %s = %v (ok %v), want 0.75", first.Since, got, ok)
	}
}
