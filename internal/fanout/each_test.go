package fanout

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
)

func TestEachCallsEveryIndexWithinTheLimit(t *testing.T) {
	for _, limit := range []int{0, 1, 3} {
		var running, most atomic.Int32
		seen := make([]atomic.Int32, 10)
		Each(len(seen), limit, func(i int) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			seen[i].Add(1)
			running.Add(-1)
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("limit %d: index %d called %d times, want once", limit, i, seen[i].Load())
			}
		}
		if limit > 0 && int(most.Load()) > limit {
			t.Fatalf("limit %d: %d calls ran at once", limit, most.Load())
		}
	}
}

func TestGatherKeepsValuesAndErrorsByKey(t *testing.T) {
	boom := errors.New("boom")
	out, failed := Gather([]string{"a", "b", "c"}, 2, func(k string) ([]string, error) {
		if k == "b" {
			return []string{"b-partial"}, boom
		}
		return []string{k + "1", k + "2"}, nil
	})
	slices.Sort(out)
	if want := []string{"a1", "a2", "b-partial", "c1", "c2"}; !slices.Equal(out, want) {
		t.Fatalf("values %v, want %v", out, want)
	}
	if len(failed) != 1 || failed["b"] != boom {
		t.Fatalf("errors %v, want only b's", failed)
	}
}
