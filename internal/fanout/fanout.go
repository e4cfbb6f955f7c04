// Package fanout keeps a publisher's subscriptions: channels of one value,
// the newest, each closed when its subscriber's context ends; and runs calls
// side by side, a bounded number at once (Each, Gather).
package fanout

import (
	"context"
	"sync"
)

// Set is the subscriptions of one publisher; its zero value is ready to use.
type Set[T any] struct {
	mu     sync.Mutex
	subs   map[int]chan T
	next   int
	closed bool
	done   chan struct{} // closed by Close, so no subscription outlives the set
}

func (s *Set[T]) initLocked() {
	if s.subs == nil {
		s.subs, s.done = map[int]chan T{}, make(chan struct{})
	}
}

// Add returns a new subscription, holding first if given, until ctx ends; a
// closed set's is closed at once.
func (s *Set[T]) Add(ctx context.Context, first ...T) <-chan T {
	ch := make(chan T, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		close(ch)
		return ch
	}
	if len(first) > 0 {
		ch <- first[0]
	}
	s.initLocked()
	id := s.next
	s.next++
	s.subs[id] = ch
	done := s.done
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[id]; ok {
			delete(s.subs, id)
			close(ch)
		}
	}()
	return ch
}

// Publish hands v to every subscriber; the newest wins over one not taken yet.
func (s *Set[T]) Publish(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.subs {
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}

// Len counts the live subscriptions.
func (s *Set[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Close closes every subscription, and any added later.
func (s *Set[T]) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.initLocked()
	s.closed = true
	for id, ch := range s.subs {
		close(ch)
		delete(s.subs, id)
	}
	close(s.done)
}
