package fanout

import (
	"context"
	"sync"
	"testing"
	"time"
)

// closed waits for ch to close, failing if a value comes first or it stays open.
func closed[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			t.Fatalf("got %v, want the channel closed", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the channel stayed open")
	}
}

func TestNewestWins(t *testing.T) {
	var s Set[int]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Add(ctx, 1)
	if v := <-ch; v != 1 {
		t.Fatalf("first: %d", v)
	}
	s.Publish(2)
	s.Publish(3)
	if v := <-ch; v != 3 {
		t.Fatalf("after 2 and 3: %d, want the newest", v)
	}
	select {
	case v := <-ch:
		t.Fatalf("a value left over: %d", v)
	default:
	}
	if s.Len() != 1 {
		t.Fatalf("Len %d", s.Len())
	}
}

func TestContextEndsTheSubscription(t *testing.T) {
	var s Set[int]
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Add(ctx)
	other := s.Add(context.Background())
	cancel()
	closed(t, ch)
	if s.Len() != 1 {
		t.Fatalf("Len %d after one ended, want 1", s.Len())
	}
	s.Publish(7)
	if v := <-other; v != 7 {
		t.Fatalf("the other subscriber got %d", v)
	}
}

func TestCloseEndsEverySubscription(t *testing.T) {
	var s Set[int]
	a, b := s.Add(context.Background(), 1), s.Add(context.Background())
	s.Close()
	s.Close()
	if v := <-a; v != 1 {
		t.Fatalf("a value held before Close: %d", v)
	}
	closed(t, a)
	closed(t, b)
	closed(t, s.Add(context.Background(), 5)) // no value: the set is closed
	if s.Len() != 0 {
		t.Fatalf("Len %d after Close", s.Len())
	}
	s.Publish(9) // nothing to send to, and no panic
}

// Publishing while subscriptions end never sends on a closed channel (-race).
func TestPublishWhileSubscribersLeave(t *testing.T) {
	var s Set[int]
	var wg sync.WaitGroup
	for i := range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		ch := s.Add(ctx, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ch
			cancel()
			for range ch {
			}
		}()
	}
	for i := range 1000 {
		s.Publish(i)
	}
	wg.Wait()
	s.Close()
}
