package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// A simulated fleet behaves as an EC2 Fleet of type instant: one placement at
// launch (or at a schedule's start); a spot instance runs until its pool's
// capacity falls below it and is not replaced. All a pure function of seed,
// spec and the second placed, which the fleet id carries.

type placement struct {
	// placedAt: the launch, or a scheduled fleet's Start (Unix seconds).
	placedAt int64
	alloc    []allocation
	// Spot instances not launched: no pool under the max price, or no capacity.
	unpriced, uncapacitated int
}

// insufficientCapacity is EC2's CreateFleetError for spot it could not place.
const insufficientCapacity = "InsufficientInstanceCapacity: There is no Spot capacity available that matches your request."

func (pl placement) launched() int {
	n := 0
	for _, a := range pl.alloc {
		n += a.count
	}
	return n
}

// place places a fleet at t: on-demand on the cheapest list price, spot by the
// spec's strategy among pools under the max price with capacity.
func (m *Market) place(pools []*simPool, spec domain.FleetSpec, t int64) placement {
	pl := placement{placedAt: t}
	if spec.OnDemandBase > 0 {
		best := pools[0]
		for _, p := range pools[1:] {
			if *p.spec.Desc.OnDemandUSDHour < *best.spec.Desc.OnDemandUSDHour {
				best = p
			}
		}
		pl.alloc = append(pl.alloc, allocation{pool: best, count: spec.OnDemandBase, onDemand: true})
	}
	spot := spec.TargetCapacity - spec.OnDemandBase
	if spot == 0 {
		return pl
	}
	type cand struct {
		p        *simPool
		perGPU   float64 // spot price per GPU-hour at t
		capacity int     // instances the pool has at t
	}
	var cands []cand
	priced := false
	for _, p := range pools {
		_, price := p.model.inForce(t)
		limit := *p.spec.Desc.OnDemandUSDHour
		if spec.MaxPriceUSD != nil {
			limit = *spec.MaxPriceUSD
		}
		if price > limit {
			continue
		}
		priced = true
		if n, _ := m.capWalker(p).segment(t); n > 0 {
			cands = append(cands, cand{p, price / p.spec.Desc.GPU.Count, n})
		}
	}
	if !priced {
		pl.unpriced = spot
		return pl
	}
	left := spot
	switch spec.Strategy {
	case domain.StrategyDiversified:
		// One at a time to each pool with room: a shallow pool's share goes to the others.
		given := make([]int, len(cands))
		for more := true; left > 0 && more; {
			more = false
			for i, c := range cands {
				if left > 0 && given[i] < c.capacity {
					given[i]++
					left--
					more = true
				}
			}
		}
		for i, c := range cands {
			if given[i] > 0 {
				pl.alloc = append(pl.alloc, allocation{pool: c.p, count: given[i]})
			}
		}
		pl.uncapacitated = left
		return pl
	case domain.StrategyLowestPrice:
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.perGPU, b.perGPU) })
	case domain.StrategyCapacityOptimized:
		// Most capacity first; among equals, calmer bucket and better score.
		slices.SortStableFunc(cands, func(a, b cand) int {
			return cmp.Or(cmp.Compare(b.capacity, a.capacity), cmp.Compare(a.p.spec.Bucket, b.p.spec.Bucket),
				cmp.Compare(b.p.spec.Placement, a.p.spec.Placement))
		})
	default: // price-capacity-optimized
		// Deep enough pools first, then the cheapest with their risk weighed in.
		w := func(c cand) float64 { return c.perGPU * (1 + 0.25*float64(c.p.spec.Bucket)) }
		deep := func(c cand) int {
			if c.capacity >= spot {
				return 0
			}
			return 1
		}
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(deep(a), deep(b)), cmp.Compare(w(a), w(b))) })
	}
	for _, c := range cands {
		if left == 0 {
			break
		}
		n := min(left, c.capacity)
		pl.alloc = append(pl.alloc, allocation{pool: c.p, count: n})
		left -= n
	}
	pl.uncapacitated = left
	return pl
}

// takenBack returns per allocation and instance the Unix second it was
// interrupted, 0 if not before until; on-demand is never taken back.
func (m *Market) takenBack(pl placement, until int64) [][]int64 {
	out := make([][]int64, len(pl.alloc))
	for i, a := range pl.alloc {
		out[i] = make([]int64, a.count)
		if a.onDemand {
			continue
		}
		w := m.capWalker(a.pool)
		held := a.count
		for t := pl.placedAt; held > 0 && t < until; {
			n, next := w.segment(t)
			for ; held > n; held-- {
				out[i][held-1] = t
			}
			t = next
		}
	}
	return out
}

// running counts a placement's instances at now and their hourly cost then.
func (m *Market) running(pl placement, now int64) (n int, usdHour float64) {
	gone := m.takenBack(pl, now+1)
	for i, a := range pl.alloc {
		price := *a.pool.spec.Desc.OnDemandUSDHour
		if !a.onDemand {
			_, price = a.pool.model.inForce(now)
		}
		for _, g := range gone[i] {
			if g == 0 {
				n++
				usdHour += price
			}
		}
	}
	return n, usdHour
}

// fleetID formats "fleet-" and a UUID whose first eight hex digits are the placement second.
func fleetID(h uint64, placedAt int64) string {
	g := mix(h)
	return fmt.Sprintf("fleet-%08x-%04x-4%03x-%04x-%012x", uint32(placedAt), uint16(h>>16), uint16(h)&0xfff,
		uint16(g>>48)&0x3fff|0x8000, g&0xffffffffffff)
}

// placedAtOf reads the placement second from a fleet id; the ledger may date a
// fleet after it, but not by more than a week.
func placedAtOf(id string, start time.Time) (int64, bool) {
	if len(id) != len("fleet-")+36 || id[:6] != "fleet-" {
		return 0, false
	}
	v, err := strconv.ParseUint(id[6:14], 16, 32)
	if err != nil || int64(v) < start.Add(-7*24*time.Hour).Unix() || oldFleetID(id) {
		return 0, false
	}
	return int64(v), true
}

// oldFleetID reports whether id is of the earlier format, a UUID of one hash
// (a false match is one in 2^58).
func oldFleetID(id string) bool {
	g1, err1 := strconv.ParseUint(id[6:14], 16, 32)
	g2, err2 := strconv.ParseUint(id[15:19], 16, 16)
	g3, err3 := strconv.ParseUint(id[21:24], 16, 12)
	g4, err4 := strconv.ParseUint(id[25:29], 16, 16)
	g5, err5 := strconv.ParseUint(id[30:42], 16, 48)
	if errors.Join(err1, err2, err3, err4, err5) != nil || id[14] != '-' || id[19] != '-' || id[24] != '-' || id[29] != '-' {
		return false
	}
	for k := range uint64(16) {
		g := mix(g1<<32 | g2<<16 | k<<12 | g3)
		if g&0xffffffffffff == g5 && (g>>48)&0x3fff == g4&0x3fff {
			return true
		}
	}
	return false
}
