package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/cloud/advisor"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// regionState is what the provider remembers of a region between fetches, locked:
// a fetch's streams and FindOfferings may read it at once.
type regionState struct {
	mu      sync.Mutex
	types   []GPUType
	typesAt time.Time
	pools   map[domain.PoolKey]domain.Pool
	// zoneIDs maps the zone names the history reports to their ids ("use1-az1").
	zoneIDs map[string]string
}

func (p *Provider) regionState(region string) *regionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.state[region]
	if rs == nil {
		rs = &regionState{pools: map[domain.PoolKey]domain.Pool{}, zoneIDs: map[string]string{}}
		p.state[region] = rs
	}
	return rs
}

func (rs *regionState) setTypes(t []GPUType, at time.Time) {
	rs.mu.Lock()
	rs.types, rs.typesAt = t, at
	rs.mu.Unlock()
}

// sideTimeout bounds the wait for the optional calls beside a region's history,
// so a hang there does not hold rows that are ready.
const sideTimeout = 10 * time.Second

// fetchAids are the calls a fetch runs beside the regions' history.
type fetchAids struct {
	adv    *advisorJob
	od     *onDemandJob   // nil: nothing to ask
	scores *scoreJob      // nil: not asked this time
	wg     sync.WaitGroup // the side calls' goroutines
}

// Fetch streams the query's GPU pools and spot prices in [Since, Until], an
// event per page batch. Regions run at once, bounded by AWS's rate limits, with
// the Price List, scores and advisor beside; a failed region is an Event with
// Err, and Fetch fails only when all did.
func (p *Provider) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	if !req.Until.After(req.Since) {
		return fmt.Errorf("aws: fetch window [%s, %s] is empty", req.Since.Format(time.RFC3339), req.Until.Format(time.RFC3339))
	}
	regions, err := p.regions(ctx, req.Query)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	aids := &fetchAids{}
	// Nothing outlives the fetch: the side calls are stopped and waited for.
	defer aids.wg.Wait()
	defer cancel()

	rreqs := make([]domain.FetchRequest, len(regions))
	var backfill []string
	for i, r := range regions {
		rreqs[i] = req.Missed[r].Widen(req)
		if rreqs[i].Backfill {
			backfill = append(backfill, r)
		}
	}
	aids.adv = p.startAdvisor(ctx, &aids.wg, sink)
	aids.od = p.startOnDemand(ctx, &aids.wg, backfill, func(region string) (names []string) {
		// The region's cached GPU types, else the catalog's.
		types, ok := p.cachedGPUTypes(region)
		if !ok {
			types = catalogGPUTypes()
		}
		for _, t := range types {
			if req.Query.WantsGPU(t.GPU.Model) {
				names = append(names, t.InstanceType)
			}
		}
		return names
	})
	if req.Backfill {
		aids.scores = p.startScores(ctx, &aids.wg, regions, req.Query)
	}

	errs := make([]error, len(regions))
	fanout.Each(len(regions), 0, func(i int) {
		region := regions[i]
		err := p.fetchRegion(ctx, region, rreqs[i], aids, sink)
		if err != nil && ctx.Err() == nil {
			errs[i] = err
			p.opt.Logger.Info("aws region failed", "region", region, "err", err) // the region's Event says it to the user
			sink(domain.Event{Provider: Name, Region: region, Err: err})
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(regions) > 0 && !slices.Contains(errs, nil) {
		firstErr := errs[0]
		if errors.Is(firstErr, ErrNoCredentials) {
			return firstErr
		}
		return fmt.Errorf("aws: every region failed (%d), first: %w", len(regions), firstErr)
	}
	if aids.od != nil {
		sink(domain.Event{Provider: Name, Note: p.sourceNote(aids.adv.noteNow())})
	}
	return nil
}

// sourceNote is the advisor's note, and why on-demand prices are unknown if so.
func (p *Provider) sourceNote(advisorNote string) string {
	if od := p.onDemandNote(); od != "" {
		return advisorNote + "; " + od
	}
	return advisorNote
}

// regionFetch is one region's part of a fetch; its history streams may run at once.
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
	// described: a back-fill describes each pool it reports once.
	described map[domain.PoolKey]bool
}

// describeOnce reports whether a back-fill has yet to describe the pool, and marks it.
func (rf *regionFetch) describeOnce(k domain.PoolKey) bool {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	first := !rf.described[k]
	rf.described[k] = true
	return first
}

// want adds the wanted types not yet asked for and returns their names.
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
	slices.Sort(names)
	return names
}

func (rf *regionFetch) spec(instanceType string) (domain.GPUSpec, bool) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	s, ok := rf.specs[instanceType]
	return s, ok
}

// fetchRegion streams a region's history, then refreshes its pools once the side calls answered.
func (p *Provider) fetchRegion(ctx context.Context, region string, req domain.FetchRequest, aids *fetchAids, sink domain.Sink) error {
	rf := &regionFetch{p: p, region: region, req: req, rs: p.regionState(region), aids: aids, sink: sink,
		specs: map[string]domain.GPUSpec{}, described: map[domain.PoolKey]bool{}}
	if types, ok := p.cachedGPUTypes(region); ok {
		aids.scores.typesKnown(types)
		if err := rf.history(ctx, rf.want(types)); err != nil {
			return err
		}
	} else {
		// Cold: the catalog's types at once, then the region's own that it lacks.
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
			// The region refused a catalog type it does not know yet: ask for its own.
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
		sink(domain.Event{Provider: Name, Region: region, Progress: &domain.Progress{Done: 1, Total: 1}})
	}
	if asked == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, sideTimeout)
	defer cancel()
	return rf.finish(ctx)
}

// rejectedTypes reports whether EC2 refused an unknown instance type name.
func rejectedTypes(err error) bool {
	code := apiCode(err)
	return code == "InvalidParameterValue" || code == "InvalidInstanceType"
}

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
	// AWS answers newest first, so each page rebuilds merged series: pages go in
	// doubling batches, about log2(pages) merges; progress goes with every page.
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
				rs.zoneIDs[pt.Pool.Zone] = *sp.AvailabilityZoneId
			}
			rs.mu.Unlock()
			if !known {
				pool = rf.describe(pt.Pool, nil)
				rs.mu.Lock()
				rs.pools[pt.Pool] = pool
				rs.mu.Unlock()
			}
			// A back-fill describes its pools again for a caller that knows none yet.
			if first := rf.describeOnce(pt.Pool); !known || req.Backfill && first {
				ev.Pools = append(ev.Pools, pool)
			}
		}
		more := pg.HasMorePages()
		rf.mu.Lock()
		rf.pages++
		done, open := rf.pages, rf.open
		rf.mu.Unlock()
		var prog *domain.Progress
		if req.Backfill {
			if !more {
				open-- // this stream's last page
			}
			prog = &domain.Progress{Done: done, Total: done + open}
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

// describe makes a pool's description from what is known now.
func (rf *regionFetch) describe(k domain.PoolKey, scores *placement) domain.Pool {
	spec, _ := rf.spec(k.InstanceType)
	pool := domain.Pool{Provider: Name, Cloud: domain.CloudAWS, Region: rf.region, Zone: k.Zone,
		InstanceType: k.InstanceType, GPU: spec}
	rf.rs.mu.Lock()
	old, known := rf.rs.pools[k]
	zoneID := rf.rs.zoneIDs[k.Zone]
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

// finish waits for the side calls and sends the pools whose description changed;
// types the Price List query did not ask for are asked now.
func (rf *regionFetch) finish(ctx context.Context) error {
	if rf.req.Backfill {
		rf.aids.od.wait(ctx)
		rf.mu.Lock()
		names := slices.Collect(maps.Keys(rf.specs))
		rf.mu.Unlock()
		missing := rf.aids.od.notAsked(rf.region, rf.p.missingOnDemand(rf.region, names))
		if len(missing) > 0 && ctx.Err() == nil {
			rf.p.fetchOnDemand(ctx, map[string][]string{rf.region: missing})
		}
	}
	rf.aids.adv.wait(ctx)
	scores := rf.aids.scores.wait(ctx)
	rf.rs.mu.Lock()
	keys := slices.Collect(maps.Keys(rf.rs.pools))
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
		slices.SortFunc(changed, func(a, b domain.Pool) int { return strings.Compare(a.Key().String(), b.Key().String()) })
		rf.sink(domain.Event{Provider: Name, Region: rf.region, Pools: changed})
	}
	return nil
}

// byPool orders points pool by pool: a page interleaves pools by time, and one
// merge per pool beats one per point.
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

// pricePoint converts one entry; other products or no zone are skipped, a non-number price is an error.
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
	eqIn := func(x, y *domain.Interruption) bool {
		return (x == nil) == (y == nil) && (x == nil || (x.Bucket == y.Bucket && x.Source == y.Source && x.AsOf.Equal(y.AsOf)))
	}
	return a.GPU == b.GPU && samePtr(a.OnDemandUSDHour, b.OnDemandUSDHour) && samePtr(a.PlacementScore, b.PlacementScore) && a.PlacementNote == b.PlacementNote && eqIn(a.Interruption, b.Interruption)
}

func samePtr[T comparable](x, y *T) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }

// scoreTTL: AWS limits distinct score requests an account makes a day.
const scoreTTL = 6 * time.Hour

// maxScoreTypes caps the types scored per refresh, newest GPUs first, for the same quota.
const maxScoreTypes = 10

type scoreState struct {
	denied bool
	at     time.Time
}

// scoreJob asks GetSpotPlacementScores beside the history once every region has
// said its types, a round trip into a cold fetch.
type scoreJob struct {
	q      domain.Query
	mu     sync.Mutex
	types  map[string]string // instance type → GPU model, of every region
	left   int               // regions yet to say their types
	ready  chan struct{}     // closed when left reaches 0
	done   chan struct{}
	scores *placement
}

// placement is what GetSpotPlacementScores said of a fleet's set of types: a
// score per region and zone id, and why a zone has none.
type placement struct {
	types  map[string]bool
	byZone map[[2]string]int // (region, zone id) → score of the set
	// note: why no type has a score (too few to ask).
	note string
}

// Notes said of a pool instead of a placement score.
const (
	NoteTooFewTypes = "too few types for a meaningful score"
	NoteNotInTop10  = "not in AWS's top 10"
)

// of is a pool's score or its note; false for a type not asked.
func (pl *placement) of(region, zoneID, typ string) (score *int, note string, ok bool) {
	if pl == nil || !pl.types[typ] {
		return nil, "", false
	}
	if pl.note != "" {
		return nil, pl.note, true
	}
	if v, found := pl.byZone[[2]string{region, zoneID}]; found {
		return domain.Int(v), "", true
	}
	return nil, NoteNotInTop10, true
}

// startScores returns the fetch's score job, nil when the caller may not
// (UnauthorizedOperation) or scores were asked within scoreTTL.
func (p *Provider) startScores(ctx context.Context, wg *sync.WaitGroup, regions []string, q domain.Query) *scoreJob {
	now := p.opt.Now()
	p.mu.Lock()
	st := p.scores
	p.mu.Unlock()
	if len(regions) == 0 || st.denied || (!st.at.IsZero() && now.Sub(st.at) < scoreTTL) {
		return nil
	}
	j := &scoreJob{q: q, types: map[string]string{}, left: len(regions), ready: make(chan struct{}), done: make(chan struct{})}
	wg.Go(func() {
		defer close(j.done)
		select {
		case <-j.ready:
		case <-ctx.Done():
			return
		}
		j.mu.Lock()
		types := j.types
		j.mu.Unlock()
		j.scores = p.askScores(ctx, regions, types, now)
	})
	return j
}

// typesKnown records a region's GPU types (nil if unknown); each region calls it once.
func (j *scoreJob) typesKnown(types []GPUType) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, t := range types {
		if j.q.WantsGPU(t.GPU.Model) {
			j.types[t.InstanceType] = t.GPU.Model
		}
	}
	if j.left--; j.left == 0 {
		close(j.ready)
	}
}

func (j *scoreJob) wait(ctx context.Context) *placement {
	if j == nil {
		return nil
	}
	select {
	case <-j.done:
		return j.scores
	case <-ctx.Done():
		return nil
	}
}

// minScoreTypes: "If you specify one or two instance types … the returned
// placement score will always be low" (GetSpotPlacementScoresInput.InstanceTypes).
const minScoreTypes = 3

// askScores asks once for the fleet's set of types (at most maxScoreTypes),
// a score per zone; AWS answers for its top 10 zones only. Not asked below
// minScoreTypes, nor again after UnauthorizedOperation.
func (p *Provider) askScores(ctx context.Context, regions []string, seen map[string]string, now time.Time) *placement {
	rank := func(t string) int { return slices.Index(domain.GPUModels, seen[t]) }
	types := slices.SortedFunc(maps.Keys(seen), func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
	if len(types) > maxScoreTypes {
		types = types[:maxScoreTypes]
	}
	if len(types) == 0 {
		return nil
	}
	pl := &placement{types: map[string]bool{}, byZone: map[[2]string]int{}}
	for _, t := range types {
		pl.types[t] = true
	}
	if len(types) < minScoreTypes {
		pl.note = NoteTooFewTypes
		return pl
	}
	pg := ec2.NewGetSpotPlacementScoresPaginator(p.client(p.home), &ec2.GetSpotPlacementScoresInput{
		InstanceTypes:          types,
		RegionNames:            regions,
		TargetCapacity:         awssdk.Int32(1),
		SingleAvailabilityZone: awssdk.Bool(true),
		MaxResults:             awssdk.Int32(100),
	})
	for out, err := range pages(ctx, pg, p.ec2Call(p.home, "GetSpotPlacementScores")) {
		if apiCode(err) == "UnauthorizedOperation" {
			p.opt.Logger.Info("spot placement scores not allowed for these credentials; scores stay unknown", "err", err)
			p.mu.Lock()
			p.scores.denied = true
			p.mu.Unlock()
			return nil
		}
		if err != nil {
			// Optional: the pools show none, the next back-fill asks again.
			p.opt.Logger.Info("spot placement scores", "err", err)
			return nil
		}
		for _, s := range out.SpotPlacementScores {
			if s.Region == nil || s.AvailabilityZoneId == nil || s.Score == nil {
				continue
			}
			pl.byZone[[2]string{*s.Region, *s.AvailabilityZoneId}] = int(*s.Score)
		}
	}
	p.mu.Lock()
	p.scores.at = now
	p.mu.Unlock()
	return pl
}

// advisorRetry: the advisor file changes a few times a day.
const advisorRetry = time.Hour

// maxAdvisorBytes bounds the live file (the real one is about 1 MB).
const maxAdvisorBytes = 32 << 20

type advisorState struct {
	data      *advisor.Data
	live      bool      // data came from the advisor URL (now or from the cache)
	fetched   time.Time // when the live data was fetched
	triedLive time.Time
	// failed is why the last live fetch failed, said until the next try.
	failed string
}

// advisorJob is a fetch's interruption data: what shows at once, and the live file's when fetched beside.
type advisorJob struct {
	done chan struct{}
	// first: the data held, else the embedded snapshot (parsed once, tens of ms).
	first func() *advisor.Data
	data  *advisor.Data // once done
	note  string        // once done
}

func (j *advisorJob) current() *advisor.Data {
	select {
	case <-j.done:
		return j.data
	default:
		return j.first()
	}
}

func (j *advisorJob) wait(ctx context.Context) *advisor.Data {
	select {
	case <-j.done:
	case <-ctx.Done():
	}
	return j.current()
}

// startAdvisor picks the interruption data (the live file within a day, else the
// embedded snapshot) and sends the note saying which; the live fetch runs beside.
func (p *Provider) startAdvisor(ctx context.Context, wg *sync.WaitGroup, sink domain.Sink) *advisorJob {
	p.mu.Lock()
	st := p.adv
	p.mu.Unlock()
	now := p.opt.Now()
	job := &advisorJob{done: make(chan struct{}), first: sync.OnceValue(func() *advisor.Data { return st.orEmbedded().data })}
	go job.first()
	finish := func(st advisorState) {
		job.data, job.note = st.data, advisorNote(st, now)
		// Sent now: nothing reaches the sink after Fetch returns.
		sink(domain.Event{Provider: Name, Note: p.sourceNote(job.note)})
		close(job.done)
	}
	if st.data != nil && (!st.live || now.Sub(st.fetched) < cacheTTL) && (st.live || now.Sub(st.triedLive) < advisorRetry || p.opt.AdvisorURL == "") {
		finish(st)
		return job
	}
	wg.Go(func() {
		next, tried := p.loadAdvisor(ctx, st, now)
		if tried {
			p.mu.Lock()
			p.adv = next
			p.mu.Unlock()
		} else {
			next.data = job.first()
		}
		finish(next)
	})
	return job
}

// loadAdvisor reads the cached file, else fetches the live one, else falls back
// on the stale cache or the embedded snapshot; false when the fetch ended first.
func (p *Provider) loadAdvisor(ctx context.Context, st advisorState, now time.Time) (advisorState, bool) {
	path := p.cachePath("spot-advisor.json")
	next := advisorState{triedLive: st.triedLive}
	if fi, err := os.Stat(path); err == nil {
		if b, err := os.ReadFile(path); err == nil {
			if d, err := advisor.Parse(b, "live, cached", fi.ModTime()); err == nil {
				next.data, next.live, next.fetched = d, true, fi.ModTime()
			}
		}
	}
	if next.live && now.Sub(next.fetched) < cacheTTL || p.opt.AdvisorURL == "" {
		return next.orEmbedded(), true
	}
	next.triedLive = now
	b, err := p.fetchAdvisor(ctx)
	if err == nil {
		var d *advisor.Data
		if d, err = advisor.Parse(b, "live", now); err == nil {
			if path != "" {
				if werr := writeFile(path, b); werr != nil {
					p.opt.Logger.Warn("cache spot advisor", "err", werr)
				}
			}
			return advisorState{data: d, live: true, fetched: now, triedLive: now}, true
		}
	}
	if errors.Is(err, context.Canceled) {
		// The fetch ended before the file came: tried next time.
		return st, false
	}
	// Said once in the note; details in the log for --debug.
	next.failed = advisorFailure(err)
	p.opt.Logger.Debug("spot advisor: live fetch failed", "url", p.opt.AdvisorURL, "err", err)
	return next.orEmbedded(), true
}

func (st advisorState) orEmbedded() advisorState {
	if st.data == nil {
		st.data = advisor.Embedded()
	}
	return st
}

func advisorFailure(err error) string {
	if cause, ok := unreachableCause(err); ok {
		return cause
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	s := shortCause(err)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

func (p *Provider) fetchAdvisor(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opt.AdvisorTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.opt.AdvisorURL, nil)
	if err != nil {
		return nil, fmt.Errorf("spot advisor url %q: %w", p.opt.AdvisorURL, err)
	}
	resp, err := p.opt.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch spot advisor: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch spot advisor: %s answered %s", p.opt.AdvisorURL, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAdvisorBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch spot advisor: %w", err)
	}
	if len(b) > maxAdvisorBytes {
		return nil, fmt.Errorf("fetch spot advisor: answer larger than %d MiB", maxAdvisorBytes>>20)
	}
	return b, nil
}

// advisorNote is the status line: which data, how old, and why not live
// ("spot advisor: embedded 2025-06 (live fetch failed: connection refused)").
func advisorNote(st advisorState, now time.Time) string {
	note := "spot advisor: " + st.data.Source
	if st.live {
		note = "spot advisor: live, fetched " + ago(now.Sub(st.fetched))
	}
	if st.failed != "" {
		note += " (live fetch failed: " + st.failed + ")"
	}
	return note
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// noteNow is the job's note when done, else the held data's.
func (j *advisorJob) noteNow() string {
	select {
	case <-j.done:
		return j.note
	default:
		return "spot advisor: " + j.first().Source
	}
}
