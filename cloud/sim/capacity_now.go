package sim

import (
	"fmt"
	"time"
)

// SpotCapacity says whether the pool has n spot instances at t, and until when that holds.
func (m *Market) SpotCapacity(pool string, n int, t time.Time) (bool, time.Time, error) {
	p, ok := m.byKey[pool]
	if !ok {
		return false, time.Time{}, fmt.Errorf("sim capacity: no pool %s", pool)
	}
	c, until := m.capWalker(p).segment(t.Unix())
	return c >= n, time.Unix(until, 0), nil
}
