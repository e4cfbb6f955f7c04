package planner

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// mcStrategy is a policy over some lanes, and what each run came to.
type mcStrategy struct {
	name   string
	pol    policy
	lanes  []int      // indexes into the spot candidates drawn
	od     *candidate // the on-demand lane, nil for none
	sp     spec
	fixed  float64 // cost paid whatever happens (a block)
	cands  []*candidate
	block  *blockWork
	assume string
	mixes  bool // the lanes' partial gangs too

	cost   []float64
	onTime []bool
	inter  []int
	finish []float64
}

// montecarlo evaluates the spot strategies, all over the same draws
// (common random numbers): differences are the policies', not luck's.
func (p *planning) montecarlo(offs []domain.Offering) []Result {
	spot := p.spotCandidates()
	if len(spot) == 0 {
		return nil
	}
	sts, lanes := p.mcStrategies(offs, spot)
	for _, s := range sts {
		s.cost = make([]float64, p.opt.Runs)
		s.onTime = make([]bool, p.opt.Runs)
		s.inter = make([]int, p.opt.Runs)
		s.finish = make([]float64, p.opt.Runs)
	}
	p.mcDraw(sts, lanes, p.mixesOf(lanes))
	if p.ctx.Err() != nil {
		return nil // cancelled: the summaries (sorts of every run) are not wanted
	}
	out := make([]Result, 0, len(sts))
	for _, s := range sts {
		out = append(out, p.mcResult(s))
	}
	return out
}

// mcStrategies are the spot strategies and the lanes they draw.
func (p *planning) mcStrategies(offs []domain.Offering, spot []*candidate) ([]*mcStrategy, []*candidate) {
	odBest := p.netOnDemand()
	multi := p.diverse(spot)
	lanes := append([]*candidate(nil), multi...)
	base := spec{work: p.work, deadline: p.span, d: p.d, ckpt: p.ckpt}
	// Work left at the deadline is finished on on-demand in the cost.
	spotHorizon := base
	spotHorizon.horizon = p.span
	netHorizon := base
	netHorizon.horizon = p.span + p.work + 24

	var sts []*mcStrategy
	add := func(s *mcStrategy) { sts = append(sts, s) }
	// One pool alone: the best of each cloud.
	seenCloud := map[domain.Cloud]bool{}
	for _, c := range spot {
		if seenCloud[c.p.Cloud] {
			continue
		}
		seenCloud[c.p.Cloud] = true
		i := slices.Index(lanes, c)
		if i < 0 {
			i = len(lanes)
			lanes = append(lanes, c)
		}
		add(&mcStrategy{name: StrategySpotOne, pol: policyFor(StrategySpotOne, 0), lanes: []int{i}, sp: spotHorizon, cands: []*candidate{c},
			assume: fmt.Sprintf("spot in %s only; %s; %s; work not done by the deadline is finished on on-demand (in the cost)",
				domain.Place(c.p.Region, c.p.Zone), c.risk.Summary(), p.ckptWords())})
	}
	if len(multi) > 1 {
		add(&mcStrategy{name: StrategySpotMulti, pol: policyFor(StrategySpotMulti, 0), lanes: seq(len(multi)), sp: spotHorizon, cands: multi,
			assume: fmt.Sprintf("spot over %d pools in %s, the cheapest per hour of work first, moving on after an interruption; work not done by the deadline is finished on on-demand; %s; zones of a region share part of their interruptions; %s",
				len(multi), strings.Join(regionsOf(multi), ", "), p.ckptWords(), riskWords(multi))})
	}
	// Uniform Progress as published: the best pool, its own on-demand.
	c0 := multi[0]
	if upOD := p.ownOnDemand(c0, odBest); upOD != nil {
		add(&mcStrategy{name: StrategyUniformProgress, pol: policyFor(StrategyUniformProgress, 0), lanes: []int{0}, od: upOD, sp: netHorizon, cands: multi[:1],
			assume: fmt.Sprintf("Uniform Progress (NSDI'24) as published: spot in %s, on-demand %s when behind W·t/(D−S), safety net at work left + 2d; %s",
				domain.Place(c0.p.Region, c0.p.Zone), upOD.p.InstanceType+" in "+upOD.p.Region, p.ckptWords())})
	}
	if odBest != nil {
		worthless := ""
		if multi[0].score >= odBest.odUSD/odBest.speed {
			worthless = "; every pool is expected to cost more per hour of work than on-demand, so it runs on on-demand"
		}
		add(&mcStrategy{name: StrategySafetyNet, pol: policyFor(StrategySafetyNet, anyAvailability(multi)), lanes: seq(len(multi)), od: odBest,
			sp: netHorizon, cands: multi, mixes: true,
			assume: fmt.Sprintf("spot over %d pools (%s) with an on-demand safety net (%s in %s): keeps time to finish on on-demand after any interruption, waits out gaps while the slack allows, back to spot when it can%s; %s%s; %s",
				len(multi), strings.Join(regionsOf(multi), ", "), odBest.p.InstanceType, odBest.p.Region, p.mixWords(multi), p.ckptWords(), worthless, riskWords(multi))})
		if s := p.blockSpot(offs, multi, odBest); s != nil {
			add(s)
		}
	}
	return sts, lanes
}

// mcDraw runs every strategy over the same draws, each layer with its
// own stream seeded by (seed, run, layer), to the deadline.
func (p *planning) mcDraw(sts []*mcStrategy, lanes []*candidate, mixes []mixLane) {
	groups := map[string]int{}
	var groupLanes [][]*candidate
	for _, c := range lanes {
		if c.risk.RegionShare <= 0 || c.risk.InterruptionsPerHour <= 0 || c.risk.Spells != nil {
			continue
		}
		if _, ok := groups[c.regionGroup]; !ok {
			groups[c.regionGroup] = len(groupLanes)
			groupLanes = append(groupLanes, nil)
		}
		g := groups[c.regionGroup]
		groupLanes[g] = append(groupLanes[g], c)
	}
	seed, until := p.opt.Seed, p.span
	parallel(p.ctx, p.opt.Runs, p.opt.workers(), func() func(int) {
		d := newDraws(lanes, groups, groupLanes, mixes)
		runners := p.runners(sts, lanes, mixes, d)
		return func(i int) {
			d.fill(seed, i, until)
			for k, s := range sts {
				p.record(s, i, runners[k].exec(s.pol), lanes)
			}
		}
	})
}

// record keeps run i's outcome of s, the work left finished on on-demand.
func (p *planning) record(s *mcStrategy, i int, o outcome, lanes []*candidate) {
	cost := s.fixed + o.cost
	s.finish[i] = o.finish
	if !o.done {
		cost += p.finishCost(o.left, s, lanes)
		s.finish[i] = p.finishAt(o.left, s)
	}
	s.cost[i] = cost
	s.onTime[i] = o.onTime(s.sp.deadline)
	s.inter[i] = o.interruptions
}

// layer is one drawn process: a pool's own or its region's.
type layer struct {
	g  *renewal
	tl timeline
}

// draws are one worker's timelines: regions, pools, lanes, partial gangs.
type draws struct {
	regions    []*layer
	pools      []*layer
	laneTL     []*timeline
	laneRegion []int
	mixes      []mixLane
	mixTL      []timeline
	src        rand.PCG
	rng        *rand.Rand
}

func newDraws(lanes []*candidate, groups map[string]int, groupLanes [][]*candidate, mixes []mixLane) *draws {
	d := &draws{regions: make([]*layer, len(groupLanes)), pools: make([]*layer, len(lanes)),
		laneTL: make([]*timeline, len(lanes)), laneRegion: make([]int, len(lanes)), mixes: mixes, mixTL: make([]timeline, len(mixes))}
	d.rng = rand.New(&d.src)
	for g, cs := range groupLanes {
		lam, a, med := 0.0, 0.0, 0.0
		for _, c := range cs {
			lam += c.risk.RegionShare * c.risk.InterruptionsPerHour
			a += math.Pow(c.risk.Availability, c.risk.RegionShare)
			med += c.risk.GapMedianHours
		}
		k := float64(len(cs))
		d.regions[g] = &layer{g: newRenewal()}
		d.regions[g].g.setup(lam/k, a/k, med/k)
	}
	for i, c := range lanes {
		d.laneRegion[i] = -1
		r := c.risk
		if r.InterruptionsPerHour <= 0 {
			continue // capacity always there
		}
		share := 0.0
		if g, ok := groups[c.regionGroup]; ok && r.Spells == nil {
			share = r.RegionShare
			d.laneRegion[i] = g
		}
		d.pools[i] = &layer{g: newRenewal()}
		if r.Spells != nil {
			d.pools[i].g.setupSpells(r.Spells)
		} else {
			d.pools[i].g.setup((1-share)*r.InterruptionsPerHour, math.Pow(r.Availability, 1-share), r.GapMedianHours)
		}
		d.laneTL[i] = &d.pools[i].tl
		if d.laneRegion[i] >= 0 {
			d.laneTL[i] = &timeline{}
		}
	}
	return d
}

// fill draws run i.
func (d *draws) fill(seed uint64, i int, until float64) {
	for j, l := range d.regions {
		l.g.fill(&l.tl, seed, uint64(i)<<12|uint64(2048+j), until)
	}
	for j, l := range d.pools {
		if l == nil {
			continue
		}
		l.g.fill(&l.tl, seed, uint64(i)<<12|uint64(j), until)
		if g := d.laneRegion[j]; g >= 0 {
			d.laneTL[j].and(&l.tl, &d.regions[g].tl)
		}
		d.laneTL[j].closeAt(until)
	}
	for m, mx := range d.mixes {
		if tl := d.laneTL[mx.lane]; tl != nil && mx.covers != nil {
			d.src.Seed(seed, uint64(i)<<12|uint64(3072+m))
			d.mixTL[m].widen(tl, mx.covers, d.rng, 1)
			d.mixTL[m].closeAt(until)
		}
	}
}

// runners are one worker's runs of the strategies over its draws.
func (p *planning) runners(sts []*mcStrategy, lanes []*candidate, mixes []mixLane, d *draws) []*run {
	out := make([]*run, len(sts))
	for k, s := range sts {
		ls := make([]lane, len(s.lanes))
		for j, li := range s.lanes {
			c := lanes[li]
			ls[j] = lane{usdHour: c.spotUSD, speed: c.speed, score: c.score, tl: d.laneTL[li]}
		}
		if s.mixes {
			for m, mx := range mixes {
				if slices.Contains(s.lanes, mx.lane) {
					tl := d.laneTL[mx.lane]
					if tl != nil && mx.covers != nil {
						tl = &d.mixTL[m]
					}
					ls = append(ls, lane{usdHour: mx.usdHour, speed: lanes[mx.lane].speed, score: mx.score, tl: tl, mix: true})
				}
			}
		}
		r := &run{sp: &sts[k].sp, lanes: ls}
		if s.od != nil {
			r.od = &lane{usdHour: s.od.odUSD, speed: s.od.speed}
		}
		out[k] = r
	}
	return out
}

// mcResult sums a strategy's runs.
func (p *planning) mcResult(s *mcStrategy) Result {
	runs := float64(len(s.cost))
	r := p.result(s.name, s.cands)
	var inter float64
	var on int
	for i := range s.cost {
		inter += float64(s.inter[i])
		if s.onTime[i] {
			on++
		}
	}
	r.ExpectedCostUSD = meanOf(s.cost)
	r.P95CostUSD = quantile(s.cost, 0.95)
	r.OnTimePct = 100 * float64(on) / runs
	r.ExpectedInterruptions = inter / runs
	r.USDPerUsefulGPUHour = r.ExpectedCostUSD / p.usefulGPUHours()
	// The median and p95 finish of every run, the late ones too.
	r.End, r.EndP95 = p.endAt(quantile(s.finish, 0.5), s.sp), p.endAt(quantile(s.finish, 0.95), s.sp)
	if s.block != nil {
		p.withBlock(&r, s.block.o)
	}
	if s.od != nil {
		r.OnDemandPool = s.od.p.Key
	}
	r.Assumptions = s.assume
	return r
}

// withBlock widens a result to the block it holds.
func (p *planning) withBlock(r *Result, o domain.Offering) {
	r.Start, r.End, r.EndP95 = domain.Earlier(o.Start, r.Start), domain.Later(o.End, r.End), domain.Later(o.End, r.EndP95)
	r.OfferingID = o.ID
	r.Regions = appendNew(r.Regions, o.Region)
	r.InstanceType = o.InstanceType + "+" + r.InstanceType
	r.Provider = strings.Join(appendNew(strings.Split(r.Provider, ","), o.Provider), ",")
	r.Cloud = strings.Join(appendNew(strings.Split(r.Cloud, ","), string(o.Cloud)), ",")
	r.Instances, r.GPUs = o.InstanceCount, o.GPUCount()
}

// finishCost is the work a run left undone, on on-demand.
func (p *planning) finishCost(left float64, s *mcStrategy, lanes []*candidate) float64 {
	if left <= 0 {
		return 0
	}
	if od := p.finisher(s); od != nil {
		return od.odUSD * (p.d + left/od.speed)
	}
	return lanes[s.lanes[0]].score * left
}

// finishAt is when that work would end on on-demand (+Inf: none known).
func (p *planning) finishAt(left float64, s *mcStrategy) float64 {
	if od := p.finisher(s); od != nil {
		return s.sp.horizon + p.d + left/od.speed
	}
	return math.Inf(1)
}

// finisher is the on-demand pool that finishes what a run left: the
// strategy's own, else the cheapest.
func (p *planning) finisher(s *mcStrategy) *candidate {
	if s.od != nil {
		return s.od
	}
	return p.bestOnDemand()
}

// endAt is a finish as a time; one never reached is the horizon.
func (p *planning) endAt(h float64, sp spec) time.Time {
	if math.IsInf(h, 0) || math.IsNaN(h) {
		h = sp.horizon
	}
	return p.at(h)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// spotCandidates are the spot pools, cheapest per hour of work first.
func (p *planning) spotCandidates() []*candidate {
	var out []*candidate
	for i := range p.cands {
		c := &p.cands[i]
		if !math.IsNaN(c.spotUSD) && c.spotUSD >= 0 && !math.IsNaN(c.score) && !math.IsInf(c.score, 1) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *candidate) int {
		return cmp.Or(cmp.Compare(a.score, b.score), strings.Compare(a.p.Key, b.p.Key))
	})
	return out
}

// diverse takes the best pools, at most perRegion a region (SpotHedge).
func (p *planning) diverse(spot []*candidate) []*candidate {
	var out []*candidate
	count := map[string]int{}
	for _, c := range spot {
		k := string(c.p.Cloud) + "/" + c.p.Region
		if count[k] >= perRegion {
			continue
		}
		count[k]++
		out = append(out, c)
		if len(out) == p.opt.MaxPools {
			break
		}
	}
	return out
}

// bestOnDemand is the on-demand pool cheapest per hour of work.
func (p *planning) bestOnDemand() *candidate {
	var best *candidate
	for i := range p.cands {
		c := &p.cands[i]
		if math.IsNaN(c.odUSD) {
			continue
		}
		if best == nil || c.odScore < best.odScore {
			best = c
		}
	}
	return best
}

// ownOnDemand is the pool's own on-demand, else the fallback.
func (p *planning) ownOnDemand(c *candidate, fallback *candidate) *candidate {
	if !math.IsNaN(c.odUSD) {
		return c
	}
	for i := range p.cands {
		o := &p.cands[i]
		if o.p.InstanceType == c.p.InstanceType && o.p.Region == c.p.Region && !math.IsNaN(o.odUSD) {
			return o
		}
	}
	return fallback
}

func regionsOf(cs []*candidate) []string {
	var out []string
	for _, c := range cs {
		out = appendNew(out, c.p.Region)
	}
	return out
}

// anyAvailability is the share of time some pool has capacity.
func anyAvailability(cs []*candidate) float64 {
	type group struct{ region, noneOfZones float64 }
	groups := map[string]*group{}
	var order []string
	for _, c := range cs {
		g := groups[c.regionGroup]
		if g == nil {
			g = &group{region: math.Pow(c.risk.Availability, c.risk.RegionShare), noneOfZones: 1}
			groups[c.regionGroup] = g
			order = append(order, c.regionGroup)
		}
		g.noneOfZones *= 1 - math.Pow(c.risk.Availability, 1-c.risk.RegionShare)
	}
	none := 1.0
	for _, k := range order {
		g := groups[k]
		none *= 1 - g.region*(1-g.noneOfZones)
	}
	return 1 - none
}

// quantile is the q-quantile of xs (nearest rank), on a sorted copy.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// blockSpot pairs a block holding part of the job with spot and the
// safety net for the rest: the pair of cheapest estimate, nil for none.
func (p *planning) blockSpot(offs []domain.Offering, multi []*candidate, od *candidate) *mcStrategy {
	type option struct {
		b        blockWork
		blockHrs float64 // work the block does
		from, to float64 // the spot phase
		before   bool
		estimate float64
	}
	var opts []option
	for _, o := range offs {
		b, ok := p.blockWork(o)
		usable := b.kind == StrategyBlock || b.kind == StrategyCalendar || b.kind == StrategyTrainingPlan && onePlanSegment(o)
		if !ok || !usable || b.from < 0 || b.until > p.span+1e-9 {
			continue
		}
		blockHrs := (b.until - b.from - p.d) * b.speed
		if blockHrs <= 0 || blockHrs >= p.work-1e-9 {
			continue // no use, or the block alone holds the job
		}
		rest := p.work - blockHrs
		need := rest/od.speed + p.d
		est := o.UpfrontUSD + rest*multi[0].score
		if b.from >= need { // spot first, the block to finish
			opts = append(opts, option{b, blockHrs, 0, b.from, true, est})
		}
		if p.span-b.until >= need { // the block first, spot to finish
			opts = append(opts, option{b, blockHrs, b.until, p.span, false, est})
		}
	}
	if len(opts) == 0 {
		return nil
	}
	// The cheapest estimate, the first listed of equals.
	op := slices.MinFunc(opts, func(a, b option) int { return cmp.Compare(a.estimate, b.estimate) })
	b := op.b
	sp := spec{work: p.work - op.blockHrs, start: op.from, deadline: op.to, d: p.d, ckpt: p.ckpt, horizon: op.to + p.work + 24}
	when := "after"
	if op.before {
		when = "before"
	}
	return &mcStrategy{name: StrategyBlockSpot, pol: policyFor(StrategyBlockSpot, anyAvailability(multi)),
		lanes: seq(len(multi)), od: od, sp: sp, fixed: b.o.UpfrontUSD, cands: multi, block: &op.b,
		assume: fmt.Sprintf("%.0f h block (%s to %s UTC) does %s h of the work; the other %s h on spot over %d pools with the on-demand safety net, %s it; %s",
			b.hoursPaid, b.o.Start.UTC().Format("Jan 2 15:04"), b.o.End.UTC().Format("Jan 2 15:04"), tenths(op.blockHrs),
			tenths(p.work-op.blockHrs), len(multi), when, p.ckptWords())}
}

// riskWords says where each pool's risk came from, by source.
func riskWords(cs []*candidate) string {
	var sources []string
	places := map[string][]string{}
	for _, c := range cs {
		src := c.risk.Source
		if _, ok := places[src]; !ok {
			sources = append(sources, src)
		}
		places[src] = appendNew(places[src], domain.Place(c.p.Region, c.p.Zone))
	}
	parts := make([]string, len(sources))
	for i, src := range sources {
		parts[i] = "risk of " + strings.Join(places[src], ", ") + " from " + src
	}
	return strings.Join(parts, "; ")
}
