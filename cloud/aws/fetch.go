package aws

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/domain"
)

// regionState is what the provider remembers of a region between fetches.
// A region's fetch runs its history streams and the calls beside them at
// once, and FindOfferings may read the types meanwhile, hence the lock.
type regionState struct {
	mu      sync.Mutex
	types   []GPUType
	typesAt time.Time
	// pools are the pools described so far, as last sent to the sink.
	pools map[domain.PoolKey]domain.Pool
	// zoneNames maps zone ids ("use1-az1") to names ("us-east-1a"), as
	// the price history reports them; placement scores name zone ids.
	zoneNames map[string]string
	// gap is what failed fetches of this region did not get; the
	// region's next fetch asks for it again.
	gap domain.Gap
}

// regionRequest widens the request over what earlier fetches of the
// region missed (a catch-up back-fill: progress, on-demand prices).
func (rs *regionState) regionRequest(req domain.FetchRequest) domain.FetchRequest {
	if req.Aside {
		return req
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.gap.Widen(req)
}

// settle records the outcome of the region's fetch of req.
func (rs *regionState) settle(req domain.FetchRequest, failed bool) {
	if req.Aside {
		return // the hub's next fetch catches up, not this one
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.gap = rs.gap.After(req, failed)
}

func (p *Provider) regionState(region string) *regionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.state[region]
	if rs == nil {
		rs = &regionState{pools: map[domain.PoolKey]domain.Pool{}, zoneNames: map[string]string{}}
		p.state[region] = rs
	}
	return rs
}

func (rs *regionState) setTypes(t []GPUType, at time.Time) {
	rs.mu.Lock()
	rs.types, rs.typesAt = t, at
	rs.mu.Unlock()
}

// sideTimeout bounds what a region waits, after its history, for the
// calls that run beside it (the Price List, placement scores, the advisor
// file): their data is optional, and a hang there must not hold rows that
// are ready.
const sideTimeout = 10 * time.Second

// fetchAids are the calls a fetch runs beside the regions' history.
type fetchAids struct {
	adv    *advisorJob
	od     *onDemandJob // nil: nothing to ask
	scores *scoreJob    // nil: not asked this time
	note   func(string) string
}

// Fetch streams the GPU pools of the query's regions and their spot prices
// in [req.Since, req.Until]: one event per page (or batch of pages) of
// DescribeSpotPriceHistory. Every region is asked at once, bounded only by
// AWS's documented rate limits, and the steps of a region overlap: its
// history pages start with the catalog's GPU types while
// DescribeInstanceTypes answers (a type the catalog lacks gets its own
// pages after), and the Price List, the placement scores and the advisor
// file are asked beside them. A region that fails is reported as an Event
// with Err and the others go on; Fetch returns an error only when every
// region failed. A region asks again, at its next fetch, for the span its
// failed fetches missed.
func (p *Provider) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	if !req.Until.After(req.Since) {
		return fmt.Errorf("aws: fetch window [%s, %s] is empty", req.Since.Format(time.RFC3339), req.Until.Format(time.RFC3339))
	}
	regions, err := p.regions(ctx, req.Query)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	aids := &fetchAids{note: p.sourceNote}
	// Nothing of the fetch outlives it: what still runs beside the
	// regions (a slow Price List, say) is stopped and waited for.
	defer aids.join()
	defer cancel()

	rreqs := make([]domain.FetchRequest, len(regions))
	var backfill []string
	for i, r := range regions {
		rreqs[i] = p.regionState(r).regionRequest(req)
		if rreqs[i].Backfill {
			backfill = append(backfill, r)
		}
	}
	aids.adv = p.startAdvisor(ctx, sink, aids.note)
	aids.od = p.startOnDemand(ctx, backfill, func(region string) []string {
		return wantedNames(p.knownGPUTypes(region), req.Query)
	})
	if req.Backfill {
		aids.scores = p.startScores(ctx, regions, req.Query)
	}

	var failed atomic.Int32
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for i, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs := p.regionState(region)
			err := p.fetchRegion(ctx, region, rreqs[i], aids, sink)
			rs.settle(rreqs[i], err != nil)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				failed.Add(1)
				errOnce.Do(func() { firstErr = err })
				p.opt.Logger.Info("aws region failed", "region", region, "err", err) // the region's Event says it to the user
				sink(domain.Event{Provider: Name, Region: region, Err: err})
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(regions) > 0 && int(failed.Load()) == len(regions) {
		if errors.Is(firstErr, ErrNoCredentials) {
			return firstErr
		}
		return fmt.Errorf("aws: every region failed (%d), first: %w", len(regions), firstErr)
	}
	if aids.od != nil {
		// The note now says whether the Price List answered.
		sink(domain.Event{Provider: Name, Note: aids.note(aids.adv.noteNow())})
	}
	return nil
}

// join waits for the calls beside the regions to end.
func (a *fetchAids) join() {
	if a.adv != nil {
		<-a.adv.done
	}
	if a.od != nil {
		<-a.od.done
	}
	if a.scores != nil {
		<-a.scores.done
	}
}

// sourceNote is the source's status line: the advisor's note, and why
// on-demand prices are unknown when the Price List failed.
func (p *Provider) sourceNote(advisorNote string) string {
	if od := p.onDemandNote(); od != "" {
		return advisorNote + "; " + od
	}
	return advisorNote
}

// knownGPUTypes returns the region's GPU types from the caches, else the
// catalog's: the types a fetch asks about before DescribeInstanceTypes has
// answered.
func (p *Provider) knownGPUTypes(region string) []GPUType {
	if t, ok := p.cachedGPUTypes(region); ok {
		return t
	}
	return catalogGPUTypes()
}

func wantedNames(types []GPUType, q domain.Query) []string {
	var out []string
	for _, t := range types {
		if q.WantsGPU(t.GPU.Model) {
			out = append(out, t.InstanceType)
		}
	}
	return out
}

// regionFetch is one region's part of a fetch. Its history streams (the
// catalog's types, then any the catalog lacks) may run at once.
type regionFetch struct {
	p      *Provider
	region string
	req    domain.FetchRequest
	rs     *regionState
	aids   *fetchAids
	sink   domain.Sink

	mu    sync.Mutex
	specs map[string]domain.GPUSpec // the wanted types asked for, with their GPUs
	pages int                       // history pages answered
	open  int                       // streams with more pages to come
	// described are the pools this fetch has described: a back-fill
	// describes each pool it reports once, known to the provider or not.
	described map[domain.PoolKey]bool
}

// describeOnce reports whether a back-fill has yet to describe the pool,
// and notes that it now does.
func (rf *regionFetch) describeOnce(k domain.PoolKey) bool {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.described[k] {
		return false
	}
	if rf.described == nil {
		rf.described = map[domain.PoolKey]bool{}
	}
	rf.described[k] = true
	return true
}

// want adds the types the query wants that are not asked for yet, and
// returns their names.
func (rf *regionFetch) want(types []GPUType) []string {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	var names []string
	for _, t := range types {
		if _, dup := rf.specs[t.InstanceType]; !dup && rf.req.Query.WantsGPU(t.GPU.Model) {
			rf.specs[t.InstanceType] = t.GPU
			names = append(names, t.InstanceType)
		}
	}
	sort.Strings(names)
	return names
}

func (rf *regionFetch) spec(instanceType string) (domain.GPUSpec, bool) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	s, ok := rf.specs[instanceType]
	return s, ok
}

// fetchRegion streams one region's history pages, then refreshes the
// descriptions of its pools (on-demand prices, interruption data,
// placement scores) once the calls beside it have answered.
func (p *Provider) fetchRegion(ctx context.Context, region string, req domain.FetchRequest, aids *fetchAids, sink domain.Sink) error {
	rf := &regionFetch{p: p, region: region, req: req, rs: p.regionState(region), aids: aids, sink: sink, specs: map[string]domain.GPUSpec{}}
	if types, ok := p.cachedGPUTypes(region); ok {
		aids.scores.typesKnown(types)
		if err := rf.history(ctx, rf.want(types)); err != nil {
			return err
		}
	} else {
		// Cold: the catalog's types at once, DescribeInstanceTypes beside
		// them, then the region's types the catalog lacks.
		first := rf.want(catalogGPUTypes())
		histErr := make(chan error, 1)
		go func() { histErr <- rf.history(ctx, first) }()
		types, err := p.gpuTypes(ctx, region)
		aids.scores.typesKnown(types)
		if err == nil {
			if extra := rf.want(types); len(extra) > 0 {
				err = rf.history(ctx, extra)
			}
		}
		if herr := <-histErr; herr != nil {
			if err != nil || !rejectedTypes(herr) {
				return herr
			}
			// The region's API refused a type of the catalog (one it
			// does not know yet): ask for the region's own types.
			var own []string
			for _, t := range types {
				if slices.Contains(first, t.InstanceType) {
					own = append(own, t.InstanceType)
				}
			}
			if herr := rf.history(ctx, own); herr != nil {
				return herr
			}
		}
		if err != nil {
			return err
		}
	}
	rf.mu.Lock()
	pages, asked := rf.pages, len(rf.specs)
	rf.mu.Unlock()
	if req.Backfill && pages == 0 {
		// No type of the query here: the region's back-fill is done.
		sink(domain.Event{Provider: Name, Region: region, Progress: &domain.Progress{Done: 1, Total: 1}})
	}
	if asked == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	return rf.finish(ctx)
}

// rejectedTypes reports whether EC2 refused a request for its instance
// types (an unknown name), rather than failing it.
func rejectedTypes(err error) bool {
	switch apiCode(err) {
	case "InvalidParameterValue", "InvalidInstanceType":
		return true
	}
	return false
}

// history pages through DescribeSpotPriceHistory for the given types.
func (rf *regionFetch) history(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	p, region, req, rs := rf.p, rf.region, rf.req, rf.rs
	types := make([]ec2types.InstanceType, len(names))
	for i, n := range names {
		types[i] = ec2types.InstanceType(n)
	}
	in := &ec2.DescribeSpotPriceHistoryInput{
		StartTime:           awssdk.Time(req.Since),
		EndTime:             awssdk.Time(req.Until),
		ProductDescriptions: []string{"Linux/UNIX"},
		InstanceTypes:       types,
		MaxResults:          awssdk.Int32(1000),
	}
	rf.mu.Lock()
	rf.open++
	rf.mu.Unlock()
	defer func() {
		rf.mu.Lock()
		rf.open--
		rf.mu.Unlock()
	}()
	// AWS answers newest first, so every page is older than what the
	// sink has already merged, and merging it rebuilds the pools' series.
	// Pages are therefore sent in batches that double in size: the first
	// page (today's prices) at once, and the whole history in about
	// log2(pages) merges instead of one per page. Progress goes out with
	// every page all the same.
	pg := ec2.NewDescribeSpotPriceHistoryPaginator(p.client(region), in)
	call := p.ec2Call(region, "DescribeSpotPriceHistory")
	sent := 0
	ev := domain.Event{Provider: Name, Region: region}
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx, call, withHistoryDeserializer)
		if err != nil {
			return explain(fmt.Errorf("describe spot prices in %s: %w", region, err))
		}
		for _, sp := range out.SpotPriceHistory {
			pt, ok, err := pricePoint(region, sp)
			if err != nil {
				return fmt.Errorf("describe spot prices in %s: %w", region, err)
			}
			if !ok {
				continue
			}
			if _, want := rf.spec(pt.Pool.InstanceType); !want {
				continue
			}
			ev.Points = append(ev.Points, pt)
			rs.mu.Lock()
			pool, known := rs.pools[pt.Pool]
			if sp.AvailabilityZoneId != nil {
				rs.zoneNames[*sp.AvailabilityZoneId] = pt.Pool.Zone
			}
			rs.mu.Unlock()
			switch {
			case !known:
				pool = rf.describe(pt.Pool, nil)
				rs.mu.Lock()
				rs.pools[pt.Pool] = pool
				rs.mu.Unlock()
				rf.describeOnce(pt.Pool)
				ev.Pools = append(ev.Pools, pool)
			case req.Backfill && rf.describeOnce(pt.Pool):
				// A back-fill starts a window for whoever asked: one
				// that knows no pool yet (a fleet's estimate after an
				// earlier fetch of this provider) needs the description,
				// with its on-demand price, though the provider sent it
				// before.
				ev.Pools = append(ev.Pools, pool)
			}
		}
		more := pg.HasMorePages()
		var prog *domain.Progress
		if req.Backfill {
			rf.mu.Lock()
			rf.pages++
			total := rf.pages
			if more {
				total += rf.open
			} else {
				total += rf.open - 1
			}
			prog = &domain.Progress{Done: rf.pages, Total: total}
			rf.mu.Unlock()
		} else {
			rf.mu.Lock()
			rf.pages++
			rf.mu.Unlock()
		}
		if len(ev.Points)+len(ev.Pools) > 0 && (sent == 0 || len(ev.Points) >= sent || !more) {
			sent += len(ev.Points)
			ev.Points = byPool(ev.Points)
			ev.Progress = prog
			rf.sink(ev)
			ev = domain.Event{Provider: Name, Region: region}
		} else if prog != nil {
			rf.sink(domain.Event{Provider: Name, Region: region, Progress: prog})
		}
	}
	return nil
}

// describe makes a pool's description from what is known now: its GPUs,
// its on-demand price (cached), its interruption bucket, its placement
// score (scores, when given; else the one it had).
func (rf *regionFetch) describe(k domain.PoolKey, scores *placement) domain.Pool {
	spec, _ := rf.spec(k.InstanceType)
	pool := domain.Pool{Provider: Name, Cloud: domain.CloudAWS, Region: rf.region, Zone: k.Zone,
		InstanceType: k.InstanceType, GPU: spec}
	rf.rs.mu.Lock()
	old, known := rf.rs.pools[k]
	zoneID := ""
	if scores != nil {
		for id, name := range rf.rs.zoneNames {
			if name == k.Zone {
				zoneID = id
			}
		}
	}
	rf.rs.mu.Unlock()
	if known {
		pool.OnDemandUSDHour, pool.PlacementScore, pool.PlacementNote = old.OnDemandUSDHour, old.PlacementScore, old.PlacementNote
	}
	if v, ok := rf.p.cachedOnDemand(rf.region, k.InstanceType); ok {
		pool.OnDemandUSDHour = v
	}
	if in, ok := rf.aids.adv.current().Interruption(rf.region, k.InstanceType); ok {
		pool.Interruption = in
	}
	if score, note, ok := scores.of(rf.region, zoneID, k.InstanceType); ok && zoneID != "" {
		pool.PlacementScore, pool.PlacementNote = score, note
	}
	return pool
}

// finish waits (within ctx) for the calls beside the region — the Price
// List, the advisor file, the placement scores — and sends the pools whose
// description changed. Types that DescribeInstanceTypes brought and the
// Price List query beside did not ask for are asked now (those it asked
// for and did not get stay unknown: the query failed, and the note says
// so).
func (rf *regionFetch) finish(ctx context.Context) error {
	if rf.req.Backfill {
		rf.aids.od.wait(ctx)
		rf.mu.Lock()
		names := make([]string, 0, len(rf.specs))
		for n := range rf.specs {
			names = append(names, n)
		}
		rf.mu.Unlock()
		missing := rf.aids.od.notAsked(rf.region, rf.p.missingOnDemand(rf.region, names))
		if len(missing) > 0 && ctx.Err() == nil {
			rf.p.fetchOnDemand(ctx, map[string][]string{rf.region: missing})
		}
	}
	rf.aids.adv.wait(ctx)
	scores := rf.aids.scores.wait(ctx)
	// Refresh the descriptions of the region's pools of the asked types
	// whose on-demand price, interruption data or score changed.
	rf.rs.mu.Lock()
	keys := make([]domain.PoolKey, 0, len(rf.rs.pools))
	for k := range rf.rs.pools {
		keys = append(keys, k)
	}
	rf.rs.mu.Unlock()
	var changed []domain.Pool
	for _, k := range keys {
		if _, want := rf.spec(k.InstanceType); !want {
			continue
		}
		nw := rf.describe(k, scores)
		rf.rs.mu.Lock()
		if old := rf.rs.pools[k]; !samePool(old, nw) {
			rf.rs.pools[k] = nw
			changed = append(changed, nw)
		}
		rf.rs.mu.Unlock()
	}
	if len(changed) > 0 {
		sort.Slice(changed, func(i, j int) bool { return changed[i].Key().String() < changed[j].Key().String() })
		rf.sink(domain.Event{Provider: Name, Region: rf.region, Pools: changed})
	}
	return nil
}

// byPool orders points pool by pool, each pool's in the order given. A page
// interleaves the pools (AWS sorts it by time), and the sink merges a
// pool's run of points at once: one merge a pool, not one a point (an
// older point than a series' last rebuilds it).
func byPool(points []domain.PricePoint) []domain.PricePoint {
	group := map[domain.PoolKey]int{}
	var counts []int
	for _, pt := range points {
		g, ok := group[pt.Pool]
		if !ok {
			g = len(counts)
			group[pt.Pool] = g
			counts = append(counts, 0)
		}
		counts[g]++
	}
	if len(counts) <= 1 {
		return points
	}
	next := make([]int, len(counts))
	for g, at := 1, 0; g < len(counts); g++ {
		at += counts[g-1]
		next[g] = at
	}
	out := make([]domain.PricePoint, len(points))
	for _, pt := range points {
		g := group[pt.Pool]
		out[next[g]] = pt
		next[g]++
	}
	return out
}

// pricePoint converts one history entry. Entries for other products, or
// with no zone, are skipped (ok false); a price that is not a number is an
// error, as the answer is then not what the API promises.
func pricePoint(region string, sp ec2types.SpotPrice) (domain.PricePoint, bool, error) {
	if sp.AvailabilityZone == nil || sp.Timestamp == nil || sp.SpotPrice == nil {
		return domain.PricePoint{}, false, nil
	}
	if sp.ProductDescription != "" && sp.ProductDescription != ec2types.RIProductDescriptionLinuxUnix {
		return domain.PricePoint{}, false, nil
	}
	usd, err := strconv.ParseFloat(*sp.SpotPrice, 64)
	if err != nil || !(usd >= 0) || math.IsInf(usd, 0) {
		return domain.PricePoint{}, false, fmt.Errorf("spot price %q of %s in %s is not a price", *sp.SpotPrice, sp.InstanceType, *sp.AvailabilityZone)
	}
	return domain.PricePoint{
		Pool: domain.PoolKey{Provider: Name, Region: region, Zone: *sp.AvailabilityZone, InstanceType: string(sp.InstanceType)},
		At:   sp.Timestamp.UTC(), USDHour: usd,
	}, true, nil
}

func samePool(a, b domain.Pool) bool {
	eqF := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqI := func(x, y *int) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqIn := func(x, y *domain.Interruption) bool {
		return (x == nil) == (y == nil) && (x == nil || (x.Bucket == y.Bucket && x.Source == y.Source && x.AsOf.Equal(y.AsOf)))
	}
	return a.GPU == b.GPU && eqF(a.OnDemandUSDHour, b.OnDemandUSDHour) && eqI(a.PlacementScore, b.PlacementScore) && a.PlacementNote == b.PlacementNote && eqIn(a.Interruption, b.Interruption)
}
