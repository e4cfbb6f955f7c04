package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// The availability process (docs/DESIGN.md, "The simulated market"): runs of
// capacity and gaps, a region layer shared by its zones and a pool layer, a
// pure function of (seed, pool, time) drawn in week-long chunks.

// classRate is the interruption rate per available hour by GPU class, at the middle bucket.
var classRate = map[string]float64{
	"H200": 0.85, "H100": 0.8, "A100": 0.6, "L40S": 0.5, "L4": 0.45, "A10G": 0.45, "A10": 0.45, "V100": 0.4, "T4": 0.35,
}

// By bucket (0 "<5%" … 4 ">20%"): rate multiplier, median gap, gap tail.
var (
	bucketRateMult = [5]float64{0.2, 0.6, 1.0, 1.4, 1.8}
	bucketGapHours = [5]float64{0.38, 0.46, 0.54, 0.62, 0.70}
	bucketGapTail  = [5]float64{2.5, 3.0, 3.5, 4.5, 6.0}
)

const (
	// regionShare is the region layer's part: half the interruptions and, in log terms, half the unavailability.
	regionShare = 0.5
	// partialRuns is the share of runs that hold part of a pool's depth.
	partialRuns = 0.06
	chunkSec    = 7 * 24 * 3600
)

type layerParams struct {
	rate   float64 // runs end at this rate per hour
	avail  float64 // long-run share of time up
	median float64 // median gap, hours
}

// availModel is a pool's availability: its layers and depth.
type availModel struct {
	pool, region layerParams
	poolKey      string // hashes the pool's layer
	regionKey    string // hashes the shared region layer
	depth        int    // instances when capacity is there
	truth        domain.SpotProcess
}

func poolTruth(s *poolSpec) (rate, avail, median float64) {
	name := s.Desc.Key().String()
	b := s.Bucket
	j := func(tag string) float64 { return 0.8 + 0.4*unit(strHash("avail", tag, name)) } // ×0.8-1.2
	base, ok := classRate[s.Desc.GPU.Model]
	if !ok {
		base = 0.6
	}
	rate = base * bucketRateMult[b] * j("rate")
	median = bucketGapHours[b] * j("gap")
	tail := bucketGapTail[b] * j("tail")
	avail = 1 / (1 + rate*tail*median)
	return rate, avail, median
}

// buildAvail sets every pool's availability model; a type's zones share its
// region layer with their mean share, so none is left with next to nothing.
func buildAvail(pools []*simPool) {
	type group struct{ rate, avail, median, n float64 }
	groups := map[string]group{}
	key := func(p *simPool) string { return p.spec.Region.Name + "/" + p.spec.Desc.InstanceType }
	for _, p := range pools {
		rate, avail, median := poolTruth(&p.spec)
		g := groups[key(p)]
		g.rate += regionShare * rate
		g.avail += math.Pow(avail, regionShare)
		g.median += median
		g.n++
		groups[key(p)] = g
	}
	for _, p := range pools {
		rate, avail, median := poolTruth(&p.spec)
		g := groups[key(p)]
		region := layerParams{rate: g.rate / g.n, avail: g.avail / g.n, median: g.median / g.n}
		// The pool's own layer carries the rest, at least a fifth of its rate.
		own := layerParams{rate: math.Max(rate-region.rate, 0.2*rate), avail: math.Min(avail/region.avail, 0.995), median: median}
		total := own.rate + region.rate
		p.avail = availModel{
			pool: own, region: region,
			poolKey: p.spec.Desc.Key().String(), regionKey: key(p),
			depth: poolDepth(&p.spec),
			truth: domain.SpotProcess{
				InterruptionsPerHour: total,
				GapMedianHours:       median,
				Availability:         own.avail * region.avail,
				RegionShare:          region.rate / total,
			},
		}
	}
}

// poolDepth is the instances a pool holds when it has capacity: fewer of the big types.
func poolDepth(s *poolSpec) int {
	h := strHash("depth", s.Desc.Key().String())
	switch g := s.Desc.GPU.Count; {
	case g >= 8:
		return 4 + int(h%13) // 4-16
	case g >= 4:
		return 8 + int(h%17) // 8-24
	case g >= 2:
		return 12 + int(h%21) // 12-32
	}
	return 16 + int(h%49) // 16-64
}

// SpotProcess returns the pool's true availability process; false for an unknown pool.
func (m *Market) SpotProcess(key domain.PoolKey) (domain.SpotProcess, bool) {
	p, ok := m.byKey[key.String()]
	if !ok {
		return domain.SpotProcess{}, false
	}
	return p.avail.truth, true
}

// SpotCapacity says whether the pool has n spot instances at t, and until when that holds.
func (m *Market) SpotCapacity(pool string, n int, t time.Time) (bool, time.Time, error) {
	p, ok := m.byKey[pool]
	if !ok {
		return false, time.Time{}, fmt.Errorf("sim capacity: no pool %s", pool)
	}
	c, until := m.capWalker(p).segment(t.Unix())
	return c >= n, time.Unix(until, 0), nil
}

// MaxCapacityTicks bounds one Capacity call.
const MaxCapacityTicks = 10_000_000

// Capacity returns the pool's spot instances at each of n ticks of gap from from.
func (m *Market) Capacity(key domain.PoolKey, from time.Time, gap time.Duration, n int) ([]int, error) {
	p, ok := m.byKey[key.String()]
	if !ok {
		return nil, fmt.Errorf("sim capacity: no pool %s", key)
	}
	if gap < time.Second || n < 1 || n > MaxCapacityTicks {
		return nil, fmt.Errorf("sim capacity of %s: want a gap of at least 1s and 1 to %d ticks", key, MaxCapacityTicks)
	}
	w := m.capWalker(p)
	out := make([]int, n)
	t0, step := from.Unix(), int64(gap/time.Second)
	var until int64 = math.MinInt64
	var c int
	for i := range out {
		if t := t0 + int64(i)*step; t >= until {
			c, until = w.segment(t)
		}
		out[i] = c
	}
	return out, nil
}

// capWalker reads a pool's capacity forward, a segment per span where no layer
// changes: a fleet's instances go the very second capacity falls below them.
type capWalker struct {
	a            *availModel
	pool, region *layerReader
}

func (m *Market) capWalker(p *simPool) *capWalker {
	a := &p.avail
	return &capWalker{a: a,
		pool:   newLayerReader(m.opt.Seed, a.poolKey, a.pool, true),
		region: newLayerReader(m.opt.Seed, a.regionKey, a.region, false)}
}

// segment returns the count at t and when it may next change (reads go forward).
func (w *capWalker) segment(t int64) (n int, until int64) {
	r := w.region.periodAt(t)
	if !r.up {
		return 0, r.to
	}
	p := w.pool.periodAt(t)
	until = min(p.to, r.to)
	if !p.up {
		return 0, until
	}
	if p.partial > 0 {
		// A partial run holds at least one instance, never all.
		return min(1+int(p.partial*float64(w.a.depth-1)), w.a.depth-1), until
	}
	return w.a.depth, until
}

type period struct {
	from, to int64
	up       bool
	partial  float64 // for a partial run, the share of the depth in (0, 1)
}

// layerReader reads a layer's periods in time order, drawing chunks as it goes.
type layerReader struct {
	seed      int64
	key       string
	lp        layerParams
	partials  bool
	chunk     int64
	periods   []period
	i         int
	mu, sigma float64
}

func newLayerReader(seed int64, key string, lp layerParams, partials bool) *layerReader {
	r := &layerReader{seed: seed, key: key, lp: lp, partials: partials, chunk: math.MinInt64}
	mean := lp.median
	if lp.rate > 0 && lp.avail < 1 {
		mean = (1 - lp.avail) / (lp.avail * lp.rate)
	}
	r.sigma = math.Sqrt(2 * math.Log(math.Max(mean/lp.median, 1.0001)))
	r.mu = math.Log(lp.median)
	if mean < lp.median {
		r.mu = math.Log(mean) - r.sigma*r.sigma/2
	}
	return r
}

// draw fills chunk c's periods, restarting in the long-run state.
func (r *layerReader) draw(c int64) {
	r.chunk, r.i = c, 0
	r.periods = r.periods[:0]
	h := mix(uint64(r.seed)*0x9e3779b97f4a7c15 ^ strHash("layer", r.key, fmt.Sprint(c)))
	rng := rand.New(rand.NewPCG(h, mix(h)))
	from, end := c*chunkSec, (c+1)*chunkSec
	up := rng.Float64() < r.lp.avail
	first := true
	for from < end {
		var hours float64
		switch {
		case up:
			hours = rng.ExpFloat64() / r.lp.rate
		case first:
			// A gap under way is the rest of a length-biased log-normal: U·e^(μ+σ²+σZ).
			hours = rng.Float64() * math.Exp(r.mu+r.sigma*r.sigma+r.sigma*rng.NormFloat64())
		default:
			hours = math.Exp(r.mu + r.sigma*rng.NormFloat64())
		}
		first = false
		to := from + int64(math.Max(1, hours*3600))
		p := period{from: from, to: min(to, end), up: up}
		if up && r.partials && rng.Float64() < partialRuns {
			p.partial = 0.05 + 0.9*rng.Float64()
		}
		r.periods = append(r.periods, p)
		from, up = to, !up
	}
}

// periodAt is the period holding t (reads go forward); a layer that never ends a run is one run.
func (r *layerReader) periodAt(t int64) period {
	if r.lp.rate <= 0 {
		return period{from: math.MinInt64, to: math.MaxInt64, up: true}
	}
	if c := floorDiv(t, chunkSec); c != r.chunk {
		r.draw(c)
	}
	for r.i < len(r.periods)-1 && r.periods[r.i].to <= t {
		r.i++
	}
	return r.periods[r.i]
}
