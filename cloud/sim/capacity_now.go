package sim

import (
	"fmt"
	"time"
)

// SpotCapacity says whether the pool (its key's string) has n spot
// instances at t, and the time before which that does not change: the
// availability process its fleets follow, for a driver to wake at.
func (m *Market) SpotCapacity(pool string, n int, t time.Time) (bool, time.Time, error) {
	p, ok := m.byKey[pool]
	if !ok {
		return false, time.Time{}, fmt.Errorf("sim capacity: no pool %s", pool)
	}
	c, until := m.capWalker(p).segment(t.Unix())
	return c >= n, time.Unix(until, 0), nil
}
