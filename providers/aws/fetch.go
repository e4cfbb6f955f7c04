package aws

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/advisor"
)

// regionState is what the provider remembers of a region between fetches.
// Fetch runs one goroutine per region, but FindOfferings may read the types
// at the same time, hence the lock.
type regionState struct {
	mu      sync.Mutex
	types   []GPUType
	typesAt time.Time
	// pools are the pools described so far, as last sent to the sink.
	pools map[providers.PoolKey]providers.Pool
	// zoneNames maps zone ids ("use1-az1") to names ("us-east-1a"), as
	// the price history reports them; placement scores name zone ids.
	zoneNames map[string]string
	// gap is what failed fetches of this region did not get; the
	// region's next fetch asks for it again.
	gap providers.Gap
}

// regionRequest widens the request over what earlier fetches of the
// region missed (a catch-up back-fill: progress, on-demand prices).
func (rs *regionState) regionRequest(req providers.FetchRequest) providers.FetchRequest {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.gap.Widen(req)
}

// settle records the outcome of the region's fetch of req.
func (rs *regionState) settle(req providers.FetchRequest, failed bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.gap = rs.gap.After(req, failed)
}

func (p *Provider) regionState(region string) *regionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.state[region]
	if rs == nil {
		rs = &regionState{pools: map[providers.PoolKey]providers.Pool{}, zoneNames: map[string]string{}}
		p.state[region] = rs
	}
	return rs
}

func (rs *regionState) setTypes(t []GPUType, at time.Time) {
	rs.mu.Lock()
	rs.types, rs.typesAt = t, at
	rs.mu.Unlock()
}

// Fetch streams the GPU pools of the query's regions and their spot prices
// in [req.Since, req.Until]: one event per page of DescribeSpotPriceHistory,
// regions concurrently (Options.Concurrency at once). A region that fails
// is reported as an Event with Err and the others go on; Fetch returns an
// error only when every region failed. A region asks again, at its next
// fetch, for the span its failed fetches missed.
func (p *Provider) Fetch(ctx context.Context, req providers.FetchRequest, sink providers.Sink) error {
	if !req.Until.After(req.Since) {
		return fmt.Errorf("aws: fetch window [%s, %s] is empty", req.Since.Format(time.RFC3339), req.Until.Format(time.RFC3339))
	}
	regions, err := p.regions(ctx, req.Query)
	if err != nil {
		return err
	}
	adv, note := p.advisorData(ctx)
	sink(providers.Event{Provider: Name, Note: note})

	var failed atomic.Int32
	var firstErr error
	var errOnce sync.Once
	sem := make(chan struct{}, p.opt.Concurrency)
	var wg sync.WaitGroup
	for _, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			rs := p.regionState(region)
			rreq := rs.regionRequest(req)
			err := p.fetchRegion(ctx, region, rreq, adv, sink)
			rs.settle(rreq, err != nil)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				failed.Add(1)
				errOnce.Do(func() { firstErr = err })
				p.opt.Logger.Info("aws region failed", "region", region, "err", err) // the region's Event says it to the user
				sink(providers.Event{Provider: Name, Region: region, Err: err})
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
	if req.Backfill {
		p.updateScores(ctx, regions, req.Query, sink)
	}
	return nil
}

// fetchRegion streams one region's history pages, then refreshes the
// descriptions of its pools (on-demand prices, interruption data).
func (p *Provider) fetchRegion(ctx context.Context, region string, req providers.FetchRequest, adv *advisor.Data, sink providers.Sink) error {
	all, err := p.gpuTypes(ctx, region)
	if err != nil {
		return err
	}
	specs := map[string]providers.GPUSpec{}
	var names []string
	for _, t := range all {
		if req.Query.WantsGPU(t.GPU.Model) {
			specs[t.InstanceType] = t.GPU
			names = append(names, t.InstanceType)
		}
	}
	if len(names) == 0 {
		if req.Backfill {
			sink(providers.Event{Provider: Name, Region: region, Progress: &providers.Progress{Done: 1, Total: 1}})
		}
		return nil
	}
	var od map[string]*float64
	if req.Backfill {
		od = p.onDemand(ctx, region, names)
	}
	rs := p.regionState(region)
	describe := func(k providers.PoolKey) providers.Pool {
		pool := providers.Pool{Provider: Name, Cloud: providers.CloudAWS, Region: region, Zone: k.Zone,
			InstanceType: k.InstanceType, GPU: specs[k.InstanceType]}
		rs.mu.Lock()
		old, known := rs.pools[k]
		rs.mu.Unlock()
		if known {
			pool.OnDemandUSDHour, pool.PlacementScore = old.OnDemandUSDHour, old.PlacementScore
		}
		if v, ok := od[k.InstanceType]; ok {
			pool.OnDemandUSDHour = v
		}
		if in, ok := adv.Interruption(region, k.InstanceType); ok {
			pool.Interruption = in
		}
		return pool
	}

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
	// AWS answers newest first, so every page is older than what the
	// sink has already merged, and merging it rebuilds the pools' series.
	// Pages are therefore sent in batches that double in size: the first
	// page (today's prices) at once, and the whole history in about
	// log2(pages) merges instead of one per page. Progress goes out with
	// every page all the same.
	pg := ec2.NewDescribeSpotPriceHistoryPaginator(p.client(region), in)
	page, sent := 0, 0
	ev := providers.Event{Provider: Name, Region: region}
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return explain(fmt.Errorf("describe spot prices in %s: %w", region, err))
		}
		page++
		for _, sp := range out.SpotPriceHistory {
			pt, ok, err := pricePoint(region, sp)
			if err != nil {
				return fmt.Errorf("describe spot prices in %s: %w", region, err)
			}
			if !ok {
				continue
			}
			if _, want := specs[pt.Pool.InstanceType]; !want {
				continue
			}
			ev.Points = append(ev.Points, pt)
			rs.mu.Lock()
			_, known := rs.pools[pt.Pool]
			if sp.AvailabilityZoneId != nil {
				rs.zoneNames[*sp.AvailabilityZoneId] = pt.Pool.Zone
			}
			rs.mu.Unlock()
			if !known {
				pool := describe(pt.Pool)
				rs.mu.Lock()
				rs.pools[pt.Pool] = pool
				rs.mu.Unlock()
				ev.Pools = append(ev.Pools, pool)
			}
		}
		var prog *providers.Progress
		if req.Backfill {
			total := page
			if pg.HasMorePages() {
				total++
			}
			prog = &providers.Progress{Done: page, Total: total}
		}
		if len(ev.Points)+len(ev.Pools) > 0 && (sent == 0 || len(ev.Points) >= sent || !pg.HasMorePages()) {
			sent += len(ev.Points)
			ev.Progress = prog
			sink(ev)
			ev = providers.Event{Provider: Name, Region: region}
		} else if prog != nil {
			sink(providers.Event{Provider: Name, Region: region, Progress: prog})
		}
	}
	// Refresh the descriptions of known pools whose interruption data or
	// on-demand price changed (a new advisor file, a first price).
	rs.mu.Lock()
	keys := make([]providers.PoolKey, 0, len(rs.pools))
	for k := range rs.pools {
		keys = append(keys, k)
	}
	rs.mu.Unlock()
	var changed []providers.Pool
	for _, k := range keys {
		if _, want := specs[k.InstanceType]; !want {
			continue
		}
		nw := describe(k)
		rs.mu.Lock()
		old := rs.pools[k]
		if !samePool(old, nw) {
			rs.pools[k] = nw
			changed = append(changed, nw)
		}
		rs.mu.Unlock()
	}
	if len(changed) > 0 {
		sink(providers.Event{Provider: Name, Region: region, Pools: changed})
	}
	return nil
}

// pricePoint converts one history entry. Entries for other products, or
// with no zone, are skipped (ok false); a price that is not a number is an
// error, as the answer is then not what the API promises.
func pricePoint(region string, sp ec2types.SpotPrice) (providers.PricePoint, bool, error) {
	if sp.AvailabilityZone == nil || sp.Timestamp == nil || sp.SpotPrice == nil {
		return providers.PricePoint{}, false, nil
	}
	if sp.ProductDescription != "" && sp.ProductDescription != ec2types.RIProductDescriptionLinuxUnix {
		return providers.PricePoint{}, false, nil
	}
	usd, err := strconv.ParseFloat(*sp.SpotPrice, 64)
	if err != nil || !(usd >= 0) || math.IsInf(usd, 0) {
		return providers.PricePoint{}, false, fmt.Errorf("spot price %q of %s in %s is not a price", *sp.SpotPrice, sp.InstanceType, *sp.AvailabilityZone)
	}
	return providers.PricePoint{
		Pool: providers.PoolKey{Provider: Name, Region: region, Zone: *sp.AvailabilityZone, InstanceType: string(sp.InstanceType)},
		At:   sp.Timestamp.UTC(), USDHour: usd,
	}, true, nil
}

func samePool(a, b providers.Pool) bool {
	eqF := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqI := func(x, y *int) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqIn := func(x, y *providers.Interruption) bool {
		return (x == nil) == (y == nil) && (x == nil || (x.Bucket == y.Bucket && x.Source == y.Source && x.AsOf.Equal(y.AsOf)))
	}
	return a.GPU == b.GPU && eqF(a.OnDemandUSDHour, b.OnDemandUSDHour) && eqI(a.PlacementScore, b.PlacementScore) && eqIn(a.Interruption, b.Interruption)
}
