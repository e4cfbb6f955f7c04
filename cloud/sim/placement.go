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

// A simulated fleet behaves as an EC2 Fleet of type instant (the type the
// AWS provider launches a fleet to run now with): one attempt, at launch,
// to place its spot instances in pools that have capacity then; what finds
// none is not launched and is never tried again. A spot instance runs until
// its pool's capacity falls below what the fleet holds there — the pool's
// run ends, the availability process's interruption — and is not replaced.
// (A fleet of type maintain would launch replacements in pools with
// capacity; the simulated market does not model it, as gpumarket launches
// no maintain fleets. A scheduled fleet, of type request on AWS, is placed
// the same way at its start.)
//
// Where and when each instance ran is a pure function of the seed, the
// fleet's spec and the second it was placed, which its fleet id carries:
// the market keeps fleets only in memory, so the Usage of a ledger row —
// asked in any process, over any span — tells the story the launching
// process's view tells.

// placement is where a fleet's instances went and when.
type placement struct {
	// placedAt is the Unix second the instances were placed: the launch,
	// or the spec's Start for a fleet scheduled ahead.
	placedAt int64
	alloc    []allocation
	// unpriced and uncapacitated count the spot instances not launched:
	// no pool under the max price, or not enough capacity in those that
	// were.
	unpriced, uncapacitated int
}

// insufficientCapacity is EC2's error for spot instances a fleet could
// not launch for want of capacity (the errorCode and errorMessage of a
// CreateFleet answer's CreateFleetError, as RunInstances and instant
// fleets return them).
const insufficientCapacity = "InsufficientInstanceCapacity: There is no Spot capacity available that matches your request."

// launched is how many instances the placement launched.
func (pl placement) launched() int {
	n := 0
	for _, a := range pl.alloc {
		n += a.count
	}
	return n
}

// place places a fleet's instances at Unix second t: the on-demand base on
// the type with the cheapest list price, the spot rest by the spec's
// strategy among the pools whose spot price is under the max price and
// that have capacity at t, none beyond a pool's capacity. Spot instances
// that fit nowhere are counted, not placed.
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
	take := func(c cand, n int) {
		pl.alloc = append(pl.alloc, allocation{pool: c.p, count: n})
		left -= n
	}
	switch spec.Strategy {
	case domain.StrategyDiversified:
		// Evenly over the pools, one instance at a time to each that has
		// room left: a shallow pool's share goes to the others.
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
		// The pools with the most capacity for the instances launching;
		// among equals, the calmer bucket and the better placement score.
		slices.SortStableFunc(cands, func(a, b cand) int {
			return cmp.Or(cmp.Compare(b.capacity, a.capacity), cmp.Compare(a.p.spec.Bucket, b.p.spec.Bucket),
				cmp.Compare(b.p.spec.Placement, a.p.spec.Placement))
		})
	default: // price-capacity-optimized
		// The pools deep enough for every instance launching first, then
		// the cheapest of them, with their risk weighed in.
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
		take(c, min(left, c.capacity))
	}
	pl.uncapacitated = left
	return pl
}

// takenBack returns, for each allocation of a placement and each of its
// instances (ranked as the fleet holds them in the pool), the Unix second
// it was interrupted, 0 if not before until: the first second the pool's
// capacity falls below the instances the fleet holds there takes back
// those above it (when a run ends, all). On-demand instances are never
// taken back. Each pool's capacity is read once, from its layers' periods,
// and only until the fleet holds nothing there.
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

// running counts the instances of a placement that run at Unix second
// now, and what they cost an hour at the prices in force then.
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

// fleetID formats an EC2 fleet id, "fleet-" and a UUID, whose first
// eight hex digits are the second the fleet's instances were placed (see
// placedAtOf).
func fleetID(h uint64, placedAt int64) string {
	g := mix(h)
	return fmt.Sprintf("fleet-%08x-%04x-4%03x-%04x-%012x", uint32(placedAt), uint16(h>>16), uint16(h)&0xfff,
		uint16(g>>48)&0x3fff|0x8000, g&0xffffffffffff)
}

// placedAtOf reads the placement second from a fleet id of this market.
// The ledger dates a fleet when its launch's answer comes, or when a
// reconciliation first finds it, so the second may come before the row's
// start; one more than a week before is no id of this market's.
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

// oldFleetID reports whether id is one this market made before ids
// carried their placement second: "fleet-" and a UUID of one hash h, its
// first group h's top 32 bits (a second anywhere from 1970 to 2106: most
// read as one after the row's start, and a fleet placed then ran
// nothing). Its last 62 bits are mix(h), and h is the id's first three
// groups but for the 4 bits the UUID's version digit took: one of 16
// hashes matches, where an id of today's (placement second, then a
// hash) matches by chance once in 2^58.
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
