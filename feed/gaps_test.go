package feed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// The hub keeps each region's retry gap, with or without a history cache:
// a region's failure (an Event with Region and Err, not Soft) is set on the
// next request as what it missed, grows while it keeps failing, and is gone
// once the region answers; a whole-fetch failure keeps its failed regions' gaps.
func TestHubSetsAndClearsRegionGaps(t *testing.T) {
	for _, cached := range []bool{false, true} {
		name := "no cache"
		if cached {
			name = "history cache"
		}
		t.Run(name, func(t *testing.T) { testRegionGaps(t, cached) })
	}
}

func testRegionGaps(t *testing.T, cached bool) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	got := make(chan domain.FetchRequest, 1)
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		got <- req
		ok := func(r string) { sink(domain.Event{Region: r, Progress: &domain.Progress{Done: 1, Total: 1}}) }
		fail := func(r string, soft bool) { sink(domain.Event{Region: r, Err: errors.New("throttled"), Soft: soft}) }
		switch n {
		case 1, 2:
			ok("r1")
			fail("r2", false)
			ok("r3")
			fail("r3", true) // shown, but no history lost
		case 4:
			fail("r1", false)
			return errors.New("every region failed")
		default:
			ok("r1")
			ok("r2")
			ok("r3")
		}
		return nil
	}
	opt := Options{Query: domain.Query{Window: time.Hour}, Interval: onlyWoken, PublishEvery: time.Millisecond, Now: clk.now}
	if cached {
		opt.Cache = newMemCache()
	}
	h := New([]domain.Provider{src}, opt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	next := func(at time.Time) domain.FetchRequest {
		t.Helper()
		if !at.IsZero() {
			clk.set(at)
			h.Refresh()
		}
		select {
		case req := <-got:
			return req
		case <-time.After(10 * time.Second):
			t.Fatal("no fetch")
			return domain.FetchRequest{}
		}
	}
	want := func(step string, req domain.FetchRequest, missed map[string]domain.Gap) {
		t.Helper()
		same := len(req.Missed) == len(missed)
		for r, g := range missed {
			same = same && req.Missed[r].From.Equal(g.From) && req.Missed[r].Until.Equal(g.Until)
		}
		if !same {
			t.Fatalf("%s: Missed = %v, want %v", step, req.Missed, missed)
		}
	}
	want("first back-fill", next(time.Time{}), nil)
	want("after r2 failed", next(t0.Add(time.Minute)), map[string]domain.Gap{"r2": {From: t0.Add(-time.Hour), Until: t0}})
	want("after r2 failed again", next(t0.Add(2*time.Minute)), map[string]domain.Gap{"r2": {From: t0.Add(-time.Hour), Until: t0.Add(time.Minute)}})
	want("after r2 answered", next(t0.Add(3*time.Minute)), nil)
	want("after the whole fetch failed", next(t0.Add(4*time.Minute)), map[string]domain.Gap{"r1": {From: t0.Add(2 * time.Minute), Until: t0.Add(3 * time.Minute)}})
	want("after r1 answered", next(t0.Add(5*time.Minute)), nil)
}
