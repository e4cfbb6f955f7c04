package fanout

import "sync"

// Each calls do for every index below n, at most limit at once (all at once
// when limit ≤ 0), and returns when every call has.
func Each(n, limit int, do func(i int)) {
	if limit <= 0 {
		limit = n
	}
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			do(i)
		})
	}
	wg.Wait()
}

// Gather calls do for every key as Each does and gathers what the calls
// return: every value, in no order, and the error of each key that failed.
// A key that failed may still have returned values; they are kept.
func Gather[T any](keys []string, limit int, do func(key string) ([]T, error)) ([]T, map[string]error) {
	var (
		mu     sync.Mutex
		out    []T
		failed = map[string]error{}
	)
	Each(len(keys), limit, func(i int) {
		vals, err := do(keys[i])
		mu.Lock()
		defer mu.Unlock()
		out = append(out, vals...)
		if err != nil {
			failed[keys[i]] = err
		}
	})
	return out, failed
}
