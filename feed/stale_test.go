package feed

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// A source whose poll hangs sends no events, so nothing else makes the hub
// publish: its prices must still be marked stale once they are older than
// three intervals, not shown as live for as long as the poll hangs.
func TestHungPollMarksStale(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.Unix())
	hung, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	src := &fakeSource{name: "fake"}
	src.answer = func(n int, req domain.FetchRequest, sink domain.Sink) error {
		if n == 1 {
			sink(domain.Event{Region: "r1", Pools: []domain.Pool{pool()}, Points: []domain.PricePoint{{Pool: key, At: now, USDHour: 20}}})
			return nil
		}
		if n == 2 {
			close(hung)
		}
		<-release // the poll hangs until the test ends
		return nil
	}
	h := New([]domain.Provider{src}, Options{
		Interval:     func(string) time.Duration { return time.Millisecond },
		PublishEvery: time.Hour, // the test publishes by hand
		Now:          func() time.Time { return time.Unix(clock.Load(), 0).UTC() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.loop(ctx, src)
	<-hung
	h.publish()
	if st := h.Snapshot().Sources[0]; st.State != StateReady || st.Stale {
		t.Fatalf("after the back-fill: %+v, want ready and live", st)
	}
	clock.Store(now.Add(time.Minute).Unix())
	h.publish()
	if st := h.Snapshot().Sources[0]; !st.Stale {
		t.Fatalf("a minute into a hung poll (interval 1ms): %+v, want stale", st)
	}
}

// Under a fast clock (Speed) an interval is wall time: the data is stale
// after three intervals times the speed on the hub's clock, not after
// three intervals of it.
func TestStaleAtSpeed(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	h := New([]domain.Provider{&fakeSource{name: "fake"}}, Options{
		Interval: func(string) time.Duration { return 2 * time.Second },
		Speed:    7200,
		Now:      func() time.Time { return now },
	})
	st := h.status["fake"]
	st.LastOK = now.Add(-4 * time.Hour) // two wall seconds behind at 7200×
	if st.staleAt(now) {
		t.Error("data one tick old at 7200× is stale")
	}
	st.LastOK = now.Add(-13 * time.Hour) // more than three ticks (12 h)
	if !st.staleAt(now) {
		t.Error("data over three ticks old at 7200× is not stale")
	}
}
