package feed

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Trimming drops history older than the window (plus a day), so what the
// hub holds no longer reaches back to where it first back-filled from. A
// later Extend must back-fill the trimmed part again, and HistoryFrom must
// not claim history the hub has dropped.
func TestExtendAfterTrimBackfillsTheTrimmedPart(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.Unix())
	second := make(chan domain.FetchRequest, 1)
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		if n == 1 {
			var pts []domain.PricePoint
			for m := 60; m >= 0; m -= 10 {
				pts = append(pts, domain.PricePoint{Pool: key, At: now.Add(-time.Duration(m) * time.Minute), USDHour: float64(m)})
			}
			sink(domain.Event{Region: "r1", Pools: []domain.Pool{pool()}, Points: pts})
		}
		if n == 2 {
			second <- req
		}
		return nil
	}
	h := New([]domain.Provider{src}, Options{
		Query:        domain.Query{Window: time.Hour},
		Interval:     func(string) time.Duration { return 24 * time.Hour }, // only woken polls
		PublishEvery: time.Hour,                                            // the test publishes by hand
		Now:          func() time.Time { return time.Unix(clock.Load(), 0).UTC() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.loop(ctx, src)
	for src.calls.Load() < 1 || !h.firstDone() {
		time.Sleep(time.Millisecond)
	}
	// Ten days on, with live polls that brought nothing new: a publish
	// trims to the window plus a day.
	later := now.Add(10 * 24 * time.Hour)
	clock.Store(later.Unix())
	h.mu.Lock()
	h.dirty = true
	h.mu.Unlock()
	h.publish()
	cut := later.Add(-time.Hour - 24*time.Hour)
	if from := h.Snapshot().HistoryFrom; from.Before(cut) {
		t.Errorf("after the trim HistoryFrom = %s, but history before %s was dropped", from, cut)
	}
	h.Extend(7 * 24 * time.Hour)
	req := <-second
	if !req.Backfill || !req.Since.Equal(later.Add(-7*24*time.Hour)) || req.Until.Before(cut) {
		t.Fatalf("after Extend(7d) the hub asked %+v, want a back-fill from %s to the trim cut %s", req, later.Add(-7*24*time.Hour), cut)
	}
}

// firstDone reports whether the first fetch of every source has ended.
func (h *Hub) firstDone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, st := range h.status {
		if !st.started {
			return false
		}
	}
	return true
}
