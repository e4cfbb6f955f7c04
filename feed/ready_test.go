package feed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// BenchmarkWaitReadyInstantSource is the time from a hub's start to
// WaitReady's answer over a source that answers at once: what a one-shot
// command waits beyond its sources. With default options.
func BenchmarkWaitReadyInstantSource(b *testing.B) {
	for b.Loop() {
		src := &fakeSource{name: "fake", answer: func(_ int, _ domain.FetchRequest, sink domain.Sink) error {
			sink(domain.Event{Region: "r1", Pools: []domain.Pool{pool()}, Progress: &domain.Progress{Done: 1, Total: 1}})
			return nil
		}}
		h := New([]domain.Provider{src}, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		if s, err := h.WaitReady(ctx); err != nil || !s.Ready {
			b.Fatal(err)
		}
		cancel()
		<-done
	}
}

// A one-shot command returns when its sources are done, not at the hub's
// next publish tick: with a tick an hour away, WaitReady still answers as
// soon as the source's back-fill ends.
func TestWaitReadyAnswersWhenSourcesFinishNotAtTheTick(t *testing.T) {
	src := &fakeSource{name: "fake", answer: func(_ int, _ domain.FetchRequest, sink domain.Sink) error {
		sink(domain.Event{Region: "r1", Pools: []domain.Pool{pool()}, Progress: &domain.Progress{Done: 1, Total: 1}})
		return nil
	}}
	h := New([]domain.Provider{src}, Options{PublishEvery: time.Hour, Interval: func(string) time.Duration { return time.Hour }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	s, err := h.WaitReady(wctx)
	if err != nil {
		t.Fatalf("the source finished, yet WaitReady waited for the tick: %v", err)
	}
	if !s.Ready || len(s.Pools) != 1 {
		t.Fatalf("snapshot ready %v with %d pools, want ready with the source's pool", s.Ready, len(s.Pools))
	}
}

// When the deadline passes with a source (or a region of one) still
// loading, WaitReady returns what the hub holds — the region that
// answered included, though its source's fetch has not returned and no
// tick has published it — with the deadline's error.
func TestWaitReadyAtDeadlineReturnsWhatItHas(t *testing.T) {
	fast := &fakeSource{name: "fast", answer: func(_ int, _ domain.FetchRequest, sink domain.Sink) error {
		sink(domain.Event{Region: "r1", Pools: []domain.Pool{pool()}, Progress: &domain.Progress{Done: 1, Total: 1}})
		return nil
	}}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	p2 := pool()
	p2.Provider, p2.Region, p2.Zone = "half", "r1", "r1b"
	half := &fakeSource{name: "half", answer: func(_ int, _ domain.FetchRequest, sink domain.Sink) error {
		// r1 answers; r2 hangs, so the fetch never returns.
		sink(domain.Event{Region: "r1", Pools: []domain.Pool{p2}, Progress: &domain.Progress{Done: 1, Total: 1}})
		sink(domain.Event{Region: "r2", Progress: &domain.Progress{Done: 0, Total: 3}})
		<-release
		return nil
	}}
	h := New([]domain.Provider{fast, half}, Options{PublishEvery: time.Hour, Interval: func(string) time.Duration { return time.Hour }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer wcancel()
	s, err := h.WaitReady(wctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline's", err)
	}
	if s == nil || s.Ready {
		t.Fatalf("snapshot %+v, want one that is not ready", s)
	}
	if _, ok := s.Pool(p2.Key().String()); !ok || len(s.Pools) != 2 {
		t.Fatalf("pools %d, want both sources' (the half-done source's answered region too)", len(s.Pools))
	}
	st, _ := s.Source("half")
	if st.State != StateLoading || len(st.Regions) != 2 || !st.Regions[1].Loading() || st.Regions[0].Loading() {
		t.Fatalf("half-done source %+v, want loading with r1 done and r2 loading", st)
	}
	if st, _ := s.Source("fast"); st.State != StateReady {
		t.Fatalf("fast source %+v, want ready", st)
	}
}
