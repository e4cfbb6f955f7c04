// Package sim is the embedded simulated GPU market, the default source: it
// imitates the clouds' regions, GPU families and list prices, and sells, books
// and launches in memory. Prices are deterministic for a seed (price.go).
package sim

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// Name is the provider name of the simulated market.
const Name = "sim"

// Options configure the simulated market.
type Options struct {
	// Seed picks one of the possible markets (config sim.seed).
	Seed int64
	// Now dates offerings, bookings and fleets (default time.Now); the hub must share it.
	Now func() time.Time
}

// Market is the simulated market. It is safe for concurrent use.
type Market struct {
	opt     Options
	note    string
	pools   []*simPool
	regions []regionPools
	byKey   map[string]*simPool

	mu       sync.Mutex
	bookings map[string]*booking // by offering id
	fleets   map[string]*fleetState
	byToken  map[string]string // client token → fleet id
	nFleets  int
}

// simPool is one pool: its fixed terms and its price process.
type simPool struct {
	spec  poolSpec
	model model
	avail availModel
}

// regionPools are a region's pools by family, one back-fill chunk each.
type regionPools struct {
	name     string
	families [][]*simPool
}

// Interface checks: the sim offers every ability the UI knows.
var (
	_ domain.Provider       = (*Market)(nil)
	_ domain.OfferingFinder = (*Market)(nil)
	_ domain.Booker         = (*Market)(nil)
	_ domain.FleetLauncher  = (*Market)(nil)
)

// New builds the simulated market for a seed.
func New(opt Options) *Market {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	m := &Market{
		opt:      opt,
		note:     fmt.Sprintf("SIMULATED MARKET (seed %d)", opt.Seed),
		byKey:    map[string]*simPool{},
		bookings: map[string]*booking{},
		fleets:   map[string]*fleetState{},
		byToken:  map[string]string{},
	}
	specs := buildSpecs()
	odds := map[int64]*weekOdds{}
	for i := range specs {
		p := &simPool{spec: specs[i]}
		p.model = newModel(opt.Seed, &p.spec, odds)
		p.model.monthly = p.spec.Desc.Cloud == domain.CloudGCP
		m.pools = append(m.pools, p)
		m.byKey[p.spec.Desc.Key().String()] = p
		r := p.spec.Region.Name
		if len(m.regions) == 0 || m.regions[len(m.regions)-1].name != r {
			m.regions = append(m.regions, regionPools{name: r})
		}
		// buildSpecs makes a region's pools family by family.
		rp := &m.regions[len(m.regions)-1]
		if n := len(rp.families); n == 0 || rp.families[n-1][0].spec.Family != p.spec.Family {
			rp.families = append(rp.families, nil)
		}
		rp.families[len(rp.families)-1] = append(rp.families[len(rp.families)-1], p)
	}
	buildAvail(m.pools)
	return m
}

// Name returns "sim".
func (m *Market) Name() string { return Name }

// Describe says the market is made up and in memory; any error but a cancelled
// context is its answer.
func (m *Market) Describe() domain.Descriptor { return Descriptor }

// Descriptor is the simulated market's descriptor.
var Descriptor = domain.Descriptor{
	Name: Name, Simulated: true, Ephemeral: true,
	IsRegion: IsRegion, RegionExample: "us-east-1",
	Sells:    []*domain.BookingTerms{domain.CapacityBlockTerms, domain.ReservationTerms, domain.CalendarTerms},
	Declined: func(error) bool { return true },
}

// Now is the market's clock; code acting on it at a fast speed reads it here.
func (m *Market) Now() time.Time { return m.opt.Now() }

// Seed returns the market's seed.
func (m *Market) Seed() int64 { return m.opt.Seed }

// Pools describes every pool of the market as it is at t.
func (m *Market) Pools(t time.Time) []domain.Pool {
	out := make([]domain.Pool, len(m.pools))
	for i, p := range m.pools {
		out[i] = p.describe(t)
	}
	return out
}

// describe returns the pool at t: one bucket calmer and a point better on the region's weekend.
func (p *simPool) describe(t time.Time) domain.Pool {
	d := p.spec.Desc
	b, score := p.spec.Bucket, p.spec.Placement
	day, _ := p.model.local(t.Unix())
	if weekend(day) {
		if b > 0 {
			b--
		}
		if score > 0 && score < 10 {
			score++
		}
	}
	truth := p.avail.truth
	d.Interruption = &domain.Interruption{Bucket: domain.Buckets[b], Source: p.spec.Source, AsOf: t.UTC(), Process: &truth}
	if d.Cloud == domain.CloudGCP {
		d.Interruption.Bucket = "" // Google publishes none
	}
	if score > 0 {
		d.PlacementScore = domain.Int(score)
	}
	return d
}

// sameDescription reports whether the pool is described alike at both times.
func (p *simPool) sameDescription(a, b time.Time) bool {
	if b.Sub(a) >= 24*time.Hour {
		return false // a whole weekend may lie between
	}
	da, _ := p.model.local(a.Unix())
	db, _ := p.model.local(b.Unix())
	return weekend(da) == weekend(db)
}

// Fetch reports the matching pools and prices in [Since, Until] with the point
// in force at Since; a live poll only what changed in (Since, Until]. At most 90 days.
func (m *Market) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	until := req.Until
	if until.IsZero() {
		until = m.opt.Now()
	}
	since := req.Since
	if since.After(until) {
		return fmt.Errorf("sim fetch: since %s is after until %s", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if oldest := until.Add(-domain.MaxWindow); since.Before(oldest) {
		since = oldest
	}
	if req.Backfill {
		return m.backfill(ctx, req.Query, since, until, sink)
	}
	return m.live(ctx, req.Query, since, until, sink)
}

// matching returns the region's non-empty families cut to the query's pools.
func (m *Market) matching(q domain.Query, rp regionPools) [][]*simPool {
	if !q.WantsRegion(rp.name) {
		return nil
	}
	var out [][]*simPool
	for _, fam := range rp.families {
		var keep []*simPool
		for _, p := range fam {
			if q.Matches(p.spec.Desc) {
				keep = append(keep, p)
			}
		}
		if len(keep) > 0 {
			out = append(out, keep)
		}
	}
	return out
}

func (m *Market) backfill(ctx context.Context, q domain.Query, since, until time.Time, sink domain.Sink) error {
	var todo []regionPools
	// Described as now: extending history back must not bring back old buckets.
	descAt := domain.Later(m.opt.Now(), until)
	// Chunk counts first, so the progress bars know the whole job.
	for _, rp := range m.regions {
		fams := m.matching(q, rp)
		if len(fams) == 0 {
			continue
		}
		var pools []domain.Pool
		for _, fam := range fams {
			for _, p := range fam {
				pools = append(pools, p.describe(descAt))
			}
		}
		sink(domain.Event{Provider: Name, Region: rp.name, Pools: pools,
			Progress: &domain.Progress{Done: 0, Total: len(fams)}, Note: m.note})
		todo = append(todo, regionPools{rp.name, fams})
	}
	if len(todo) == 0 {
		sink(domain.Event{Provider: Name, Note: m.note})
		return nil
	}
	from, to := since.Unix(), until.Unix()
	// One worker per region in chunk order (the sink may be called concurrently);
	// columns sized once per worker, Series built there with prices in ticks.
	size := int((to-from)/3600+3) * (slotsPerHour + 2)
	next := make(chan regionPools)
	errs := make(chan error, len(todo))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(todo), maxWorkers) {
		wg.Go(func() {
			cols := columns{at: make([]int64, 0, size), q: make([]int64, 0, size)}
			for w := range next {
				if err := m.backfillRegion(ctx, w.name, w.families, from, to, &cols, sink); err != nil {
					errs <- err
				}
			}
		})
	}
	for _, w := range todo {
		next <- w
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs // nil when no worker failed
}

// maxWorkers caps the goroutines of a back-fill.
const maxWorkers = 4

// columns are a worker's scratch for one pool's points, prices in ticks.
type columns struct {
	at, q []int64
	spans []span
}

// backfillRegion sends a region's history, one chunk per family: each pool's
// point at from and its points in (from, to], as a Series.
func (m *Market) backfillRegion(ctx context.Context, region string, families [][]*simPool, from, to int64, cols *columns, sink domain.Sink) error {
	var hist []domain.PoolHistory
	for i, fam := range families {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sim back-fill of %s: %w", region, err)
		}
		hist = hist[:0]
		for _, p := range fam {
			at, q := p.model.inForceTicks(from, &cols.spans)
			cols.at, cols.q = append(cols.at[:0], at), append(cols.q[:0], q)
			cols.at, cols.q = p.model.appendTicks(cols.at, cols.q, from, to, &cols.spans)
			hist = append(hist, domain.PoolHistory{Pool: p.spec.Desc.Key(), History: series.NewSeriesOfTicks(cols.at, cols.q, priceDigits)})
		}
		sink(domain.Event{Provider: Name, Region: region, Histories: hist,
			Progress: &domain.Progress{Done: i + 1, Total: len(families)}, Note: m.note})
	}
	return nil
}

func (m *Market) live(ctx context.Context, q domain.Query, since, until time.Time, sink domain.Sink) error {
	from, to := since.Unix(), until.Unix()
	sent := false
	var buf []domain.PricePoint
	var cols columns
	for _, rp := range m.regions {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sim poll of %s: %w", rp.name, err)
		}
		fams := m.matching(q, rp)
		if len(fams) == 0 || to <= from {
			continue
		}
		buf = buf[:0]
		var pools []domain.Pool
		for _, fam := range fams {
			for _, p := range fam {
				if !p.sameDescription(since, until) {
					pools = append(pools, p.describe(until))
				}
				key := p.spec.Desc.Key()
				cols.at, cols.q = p.model.appendTicks(cols.at[:0], cols.q[:0], from, to, &cols.spans)
				for i, at := range cols.at {
					buf = append(buf, domain.PricePoint{Pool: key, At: time.Unix(at, 0).UTC(), USDHour: float64(cols.q[i]) / priceScale})
				}
			}
		}
		if len(buf) == 0 && len(pools) == 0 {
			continue
		}
		sink(domain.Event{Provider: Name, Region: rp.name, Pools: pools, Points: buf, Note: m.note})
		sent = true
	}
	if !sent {
		sink(domain.Event{Provider: Name, Note: m.note})
	}
	return nil
}

// SpotPrice returns a pool's spot price in force at t.
func (m *Market) SpotPrice(key domain.PoolKey, t time.Time) (float64, bool) {
	p, ok := m.byKey[key.String()]
	if !ok {
		return 0, false
	}
	_, usd := p.model.inForce(t.Unix())
	return usd, true
}
