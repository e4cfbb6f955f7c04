package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// FleetsNowEvery is how long all views share one describe per fleet.
const FleetsNowEvery = 30 * time.Second

// fleetsNowWork bounds one describe: one slow provider must not hold the rest.
const fleetsNowWork = 15 * time.Second

// FleetNow is what a provider said of a fleet, and when.
type FleetNow struct {
	// Fleet is its answer: Instances running now of Target asked.
	Fleet domain.Fleet
	// Err is why it could not say; the last answer, if any, is kept.
	Err error
	At  time.Time
}

type fleetsNowCache struct {
	mu     sync.Mutex
	byRow  map[string]FleetNow
	asking map[string]bool
}

// LiveFleet reports whether a row is a fleet that may be running.
func LiveFleet(r Entry) bool {
	return r.Kind == KindFleet && r.ProviderRef != "" && (r.State == StateActive || r.State == StateScheduled)
}

// FleetsNow says how many instances of each live fleet run now, one shared call per fleet.
func (s *Service) FleetsNow(ctx context.Context, rows []Entry) map[string]FleetNow {
	c := &s.fleetsNow
	now := s.opt.Now()
	var ask []Entry
	c.mu.Lock()
	if c.byRow == nil {
		c.byRow, c.asking = map[string]FleetNow{}, map[string]bool{}
	}
	for _, r := range rows {
		if !LiveFleet(r) || !s.CanLaunch(r.Provider) || c.asking[r.ID] {
			continue
		}
		if last, ok := c.byRow[r.ID]; ok && now.Sub(last.At) < FleetsNowEvery && now.Sub(last.At) >= 0 {
			continue
		}
		c.asking[r.ID] = true
		ask = append(ask, r)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range ask {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, min(fleetsNowWork, s.opt.Timeout))
			f, _, err := s.RefreshFleet(cctx, r.ID)
			cancel()
			c.mu.Lock()
			defer c.mu.Unlock()
			delete(c.asking, r.ID)
			if err != nil {
				last := c.byRow[r.ID]
				last.Err, last.At = err, now
				c.byRow[r.ID] = last
				return
			}
			c.byRow[r.ID] = FleetNow{Fleet: f, At: now}
		}()
	}
	wg.Wait()
	out := map[string]FleetNow{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range rows {
		if v, ok := c.byRow[r.ID]; ok && r.Kind == KindFleet {
			out[r.ID] = v
		}
	}
	return out
}
