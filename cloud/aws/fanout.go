package aws

import (
	"sync"

	"github.com/gpumarket/gpumarket/domain"
)

// eachRegion calls do for every region, at most opt.Concurrency at once
// (each region's own rate limits still apply), and gathers what they
// return: the values of every region, in no order, and the error of
// each region that failed (empty when none did). A region that failed
// may still have returned values; they are kept.
func eachRegion[T any](p *Provider, regions []string, do func(region string) ([]T, error)) ([]T, domain.RegionErrors) {
	var (
		mu     sync.Mutex
		out    []T
		failed = domain.RegionErrors{}
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, max(p.opt.Concurrency, 1))
	for _, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			vals, err := do(region)
			mu.Lock()
			defer mu.Unlock()
			out = append(out, vals...)
			if err != nil {
				failed[region] = err
			}
		}()
	}
	wg.Wait()
	return out, failed
}
