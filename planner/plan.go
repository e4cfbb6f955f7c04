// Package planner answers "G GPUs for W hours, done by D: how, at what
// cost and risk" by Monte Carlo over each pool's spot risk, and replays
// the same policies on traces (Backtest). Its figures' sources are in
// docs/DESIGN.md (The planner).
package planner

import (
	"context"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Strategies the planner evaluates, as they appear in a Result.
const (
	StrategyBlock       = "capacity-block"
	StrategyReservation = "reservation"
	// StrategyCalendar is a Google calendar-mode reservation, ranked as a block.
	StrategyCalendar        = "gcp-calendar"
	StrategyOnDemand        = "on-demand"
	StrategySpotOne         = "spot-one-pool"
	StrategySpotMulti       = "spot-multi-pool"
	StrategyUniformProgress = "spot+od-uniform-progress"
	StrategySafetyNet       = "spot+od-planner"
	StrategyBlockSpot       = "block+spot"
)

// Result is one way to carry the job out, evaluated.
type Result struct {
	Strategy     string
	Provider     string
	Cloud        string
	Regions      []string
	InstanceType string
	Instances    int
	GPUs         float64
	// Start and End are the capacity's window: a block's own, else the start
	// and the median finish of every run; EndP95 is the runs' p95 finish.
	Start, End            time.Time
	EndP95                time.Time
	ExpectedCostUSD       float64
	P95CostUSD            float64
	OnTimePct             float64
	ExpectedInterruptions float64
	// USDPerUsefulGPUHour is the expected cost over G × W GPU-hours.
	USDPerUsefulGPUHour float64
	// OfferingID is the block or reservation to book, "" for others.
	OfferingID  string
	Assumptions string
	// Pools are the keys of the pools a carried-out plan launches in, best first.
	Pools []string
	// OnDemandPool is the safety net's on-demand pool, "" for none.
	OnDemandPool string
}

// Options tune a Plan.
type Options struct {
	// Runs is the number of Monte Carlo runs (default 10,000).
	Runs int
	// Seed makes the runs reproducible (default 1).
	Seed uint64
	// Speeds are the GPU models' relative speeds (default DefaultSpeeds).
	Speeds Speeds
	// MaxPools caps a spread's pools (default 6, at most 2 per region).
	MaxPools int
	// Workers is the goroutines used (default GOMAXPROCS, at most 4).
	Workers int
}

const (
	defaultRuns     = 10000
	defaultMaxPools = 6
	perRegion       = 2
	// cooldown avoids a just-interrupted pool: interruptions come in bursts.
	cooldown = 0.5
)

// candidate is a pool sized for the job.
type candidate struct {
	p            *Pool
	n            int     // instances
	speed        float64 // relative to the first model
	risk         Risk    // for n instances
	spotUSD      float64 // per hour, for all n; NaN if unknown
	odUSD        float64
	score        float64 // expected spot cost per hour of work
	odScore      float64
	regionGroup  string
	instanceGPUs float64
}

// Plan evaluates every way to carry the job out, unsorted (see Rank).
func Plan(job Job, m Market, opt Options) ([]Result, error) {
	return PlanContext(context.Background(), job, m, opt)
}

// PlanContext is Plan that stops when ctx is done.
func PlanContext(ctx context.Context, job Job, m Market, opt Options) ([]Result, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	if opt.Runs <= 0 {
		opt.Runs = defaultRuns
	}
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	if opt.MaxPools <= 0 {
		opt.MaxPools = defaultMaxPools
	}
	if opt.Speeds == nil {
		opt.Speeds = DefaultSpeeds
	}
	if err := job.Fits(opt.Speeds); err != nil {
		return nil, err
	}
	ref := job.Models[0]
	for _, model := range job.Models {
		if opt.Speeds.Relative(model, ref) <= 0 {
			return nil, fieldErr("gpu", "no speed is known for %s relative to %s; set plan.speed.%s", model, ref, model)
		}
		if !sold(m, model) {
			return nil, fieldErr("gpu", "no pool or offering of the market sells %s (the market has %s)", model, strings.Join(modelsIn(m), ", "))
		}
	}
	p := newPlanning(ctx, job, opt, m)
	var out []Result
	out = append(out, p.onDemand()...)
	out = append(out, p.offerings(m.Offerings)...)
	out = append(out, p.trainingPlans(m.Offerings)...)
	out = append(out, p.montecarlo(m.Offerings)...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func sold(m Market, model string) bool {
	for _, p := range m.Pools {
		if p.GPUModel == model && !p.Restricted {
			return true
		}
	}
	for _, o := range m.Offerings {
		if o.GPU.Model == model {
			return true
		}
	}
	return false
}

func modelsIn(m Market) []string {
	seen := map[string]bool{}
	for _, p := range m.Pools {
		seen[p.GPUModel] = true
	}
	var out []string
	for _, g := range domain.GPUModels {
		if seen[g] {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return []string{"no GPU pools"}
	}
	return out
}

// planning is one Plan's working state.
type planning struct {
	ctx        context.Context
	job        Job
	opt        Options
	ref        string
	d, work    float64
	ckpt, span float64
	cands      []candidate
}

// newPlanning is the job's terms in hours and its candidate pools, scored as
// every strategy and a live job's lanes price them.
func newPlanning(ctx context.Context, job Job, opt Options, m Market) *planning {
	p := &planning{ctx: ctx, job: job, opt: opt, ref: job.Models[0], d: job.Changeover.Hours(), work: job.Hours,
		ckpt: math.Inf(1), span: job.Deadline.Sub(job.Start).Hours()}
	if job.Checkpointable {
		p.ckpt = job.Checkpoint.Hours()
	}
	p.candidates(m)
	return p
}

func (p *planning) candidates(m Market) {
	for i := range m.Pools {
		pl := &m.Pools[i]
		if pl.Restricted || pl.GPUsPerInstance <= 0 || !slices.Contains(p.job.Models, pl.GPUModel) {
			continue
		}
		speed := p.opt.Speeds.Relative(pl.GPUModel, p.ref)
		n := int(math.Ceil(float64(p.job.GPUs)/pl.GPUsPerInstance - 1e-9))
		c := candidate{p: pl, n: n, speed: speed, risk: pl.Risk.ForInstances(n), instanceGPUs: pl.GPUsPerInstance,
			spotUSD: float64(n) * pl.SpotUSDHour, odUSD: float64(n) * pl.OnDemandUSDHour,
			regionGroup: string(pl.Cloud) + "/" + pl.Region + "/" + pl.InstanceType}
		w := p.work / speed
		c.score = c.spotUSD * paidHours(c.risk.InterruptionsPerHour, w, p.d, p.ckpt) / p.work
		c.odScore = c.odUSD / speed
		p.cands = append(p.cands, c)
	}
}

func (p *planning) at(h float64) time.Time {
	return p.job.Start.Add(time.Duration(h * float64(time.Hour))).Truncate(time.Second)
}

func (p *planning) usefulGPUHours() float64 { return float64(p.job.GPUs) * p.work }

func (p *planning) ckptWords() string {
	switch {
	case math.IsInf(p.ckpt, 1):
		return "not checkpointable: an interruption starts the job over"
	case p.ckpt == 0:
		return "progress kept at an interruption (checkpoint 0)"
	default:
		return fmt.Sprintf("checkpoint every %s", domain.FormatDuration(p.job.Checkpoint))
	}
}

// onDemand is the cheapest on-demand pool per hour of work in each cloud.
func (p *planning) onDemand() []Result {
	best := map[domain.Cloud]*candidate{}
	for i := range p.cands {
		c := &p.cands[i]
		if math.IsNaN(c.odUSD) {
			continue
		}
		if b := best[c.p.Cloud]; b == nil || c.odScore < b.odScore {
			best[c.p.Cloud] = c
		}
	}
	var out []Result
	for _, cloud := range slices.Sorted(maps.Keys(best)) {
		c := best[cloud]
		hours := p.d + p.work/c.speed
		cost := c.odUSD * hours
		r := p.result(StrategyOnDemand, []*candidate{c})
		r.End = p.at(hours)
		r.EndP95 = r.End
		r.ExpectedCostUSD, r.P95CostUSD = cost, cost
		r.OnTimePct = pct(hours <= p.span+1e-9)
		r.USDPerUsefulGPUHour = cost / p.usefulGPUHours()
		r.Assumptions = fmt.Sprintf("%d × %s on-demand in %s from the start, %s changeover; capacity assumed there (InsufficientInstanceCapacity is not modelled)",
			c.n, c.p.InstanceType, c.p.Region, domain.FormatDuration(p.job.Changeover))
		out = append(out, r)
	}
	return out
}

func pct(ok bool) float64 {
	if ok {
		return 100
	}
	return 0
}

// result fills the fields every strategy shares from the pools it uses.
func (p *planning) result(strategy string, cs []*candidate) Result {
	r := Result{Strategy: strategy, Start: p.job.Start}
	var provs, clouds, regions, types []string
	for _, c := range cs {
		provs = appendNew(provs, c.p.Provider)
		clouds = appendNew(clouds, string(c.p.Cloud))
		regions = appendNew(regions, c.p.Region)
		types = appendNew(types, c.p.InstanceType)
		r.Pools = append(r.Pools, c.p.Key)
	}
	r.Provider, r.Cloud, r.Regions, r.InstanceType = strings.Join(provs, ","), strings.Join(clouds, ","), regions, strings.Join(types, ",")
	if len(cs) > 0 {
		r.Instances = cs[0].n
		r.GPUs = float64(cs[0].n) * cs[0].instanceGPUs
	}
	return r
}

func appendNew(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// blockWork is where a block or reservation can hold the job.
type blockWork struct {
	o                  domain.Offering
	speed              float64
	from, until        float64 // usable window, hours from the job's start
	kind               string
	hoursPaid, instGPU float64
}

func (p *planning) blockWork(o domain.Offering) (blockWork, bool) {
	if !slices.Contains(p.job.Models, o.GPU.Model) || o.GPU.Count <= 0 || o.InstanceCount < 1 {
		return blockWork{}, false
	}
	if o.GPUCount() < float64(p.job.GPUs)-1e-9 {
		return blockWork{}, false
	}
	b := blockWork{o: o, speed: p.opt.Speeds.Relative(o.GPU.Model, p.ref), kind: StrategyBlock, instGPU: o.GPU.Count}
	end := o.End
	if o.Kind == domain.KindTrainingPlan {
		b.kind = StrategyTrainingPlan
		end = end.Add(-o.Terms().StopsEarly)
	} else if o.StartsOnPurchase {
		b.kind = StrategyReservation
	} else {
		if o.Kind == domain.KindCalendar {
			b.kind = StrategyCalendar
		}
		end = end.Add(-o.Terms().StopsEarly)
	}
	b.from = o.Start.Sub(p.job.Start).Hours()
	b.until = end.Sub(p.job.Start).Hours()
	b.hoursPaid = o.DurationHours()
	return b, b.speed > 0 && b.until > math.Max(b.from, 0)
}

// offerings evaluates each block and reservation that holds the whole job.
func (p *planning) offerings(offs []domain.Offering) []Result {
	type key struct {
		kind, cloud string
		hours       float64
	}
	var best bestPer[key]
	for _, o := range offs {
		b, ok := p.blockWork(o)
		if !ok || b.kind == StrategyTrainingPlan {
			continue
		}
		begin := math.Max(0, b.from)
		finish := begin + p.d + p.work/b.speed
		if finish > b.until+1e-9 {
			continue // it cannot hold the whole job
		}
		r := p.offeringResult(b.kind, o, finish)
		if b.kind == StrategyReservation {
			r.Assumptions = fmt.Sprintf("%d × %s reserved in %s from purchase to %s (%.0f h billed at the on-demand rate; gpumarket releases it then) for %s h of work",
				o.InstanceCount, o.InstanceType, domain.Place(o.Region, o.Zone), o.End.UTC().Format(time.RFC3339), b.hoursPaid, tenths(p.work/b.speed))
		} else {
			stop := "they run to its end"
			if early := o.Terms().StopsEarly; early > 0 {
				stop = "instances stop " + domain.FormatDuration(early) + " before its end"
			}
			r.Assumptions = fmt.Sprintf("%.0f h block (%s to %s UTC, a %s) paid in full for %s h of work + %s changeover; %s; no interruptions",
				b.hoursPaid, o.Start.UTC().Format("Jan 2 15:04"), o.End.UTC().Format("Jan 2 15:04"), o.Terms().Name, tenths(p.work/b.speed),
				domain.FormatDuration(p.job.Changeover), stop)
		}
		// A block per length; one reservation per cloud (it bills until released).
		k := key{b.kind, string(o.Cloud), math.Round(b.hoursPaid)}
		if b.kind == StrategyReservation {
			k.hours = 0
		}
		best.add(k, r)
	}
	return best.results()
}

// offeringResult is the row of an offering paid upfront that finishes the
// work at finish (hours from the start): its cost is known, it has no
// interruptions.
func (p *planning) offeringResult(kind string, o domain.Offering, finish float64) Result {
	return Result{Strategy: kind, Provider: o.Provider, Cloud: string(o.Cloud), Regions: []string{o.Region},
		InstanceType: o.InstanceType, Instances: o.InstanceCount, GPUs: o.GPUCount(), Start: o.Start, End: o.End, EndP95: o.End,
		ExpectedCostUSD: o.UpfrontUSD, P95CostUSD: o.UpfrontUSD, OnTimePct: pct(finish <= p.span+1e-9),
		USDPerUsefulGPUHour: o.UpfrontUSD / p.usefulGPUHours(), OfferingID: o.ID}
}

// bestPer keeps the better row per key, in the order keys first came.
type bestPer[K comparable] struct {
	keys []K
	best map[K]Result
}

func (b *bestPer[K]) add(k K, r Result) {
	prev, seen := b.best[k]
	if !seen {
		b.keys = append(b.keys, k)
	}
	if b.best == nil {
		b.best = map[K]Result{}
	}
	if !seen || better(r, prev) {
		b.best[k] = r
	}
}

func (b *bestPer[K]) results() []Result {
	out := make([]Result, 0, len(b.keys))
	for _, k := range b.keys {
		out = append(out, b.best[k])
	}
	return out
}

func better(a, b Result) bool {
	if (a.OnTimePct >= 100) != (b.OnTimePct >= 100) {
		return a.OnTimePct >= 100
	}
	return a.ExpectedCostUSD < b.ExpectedCostUSD
}

// Rank orders results: on time at least minOnTime %, cheapest first;
// then the rest, most often on time first.
func Rank(rs []Result, minOnTime float64) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		okA, okB := a.OnTimePct >= minOnTime, b.OnTimePct >= minOnTime
		if okA != okB {
			return okA
		}
		if !okA && a.OnTimePct != b.OnTimePct {
			return a.OnTimePct > b.OnTimePct
		}
		return a.ExpectedCostUSD < b.ExpectedCostUSD
	})
}

func (o Options) workers() int {
	w := o.Workers
	if w <= 0 {
		w = min(runtime.GOMAXPROCS(0), 4)
	}
	return max(w, 1)
}

// parallel runs fn over every run in fixed chunks per worker, so results
// do not depend on the workers; no chunk starts once ctx is done.
func parallel(ctx context.Context, runs, workers int, newWorker func() func(run int)) {
	const chunk = 250
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do := newWorker()
			for start := range next {
				for i := start; i < min(start+chunk, runs) && ctx.Err() == nil; i++ {
					do(i)
				}
			}
		}()
	}
	for s := 0; s < runs && ctx.Err() == nil; s += chunk {
		next <- s
	}
	close(next)
	wg.Wait()
}

// OverCap is the budget key (max_booking_usd, then max_daily_usd; 0 is
// none) a plan's whole expected cost is over, "" for none.
func OverCap(usd, maxBookingUSD, maxDailyUSD float64) string {
	switch {
	case maxBookingUSD > 0 && usd > maxBookingUSD:
		return "max_booking_usd"
	case maxDailyUSD > 0 && usd > maxDailyUSD:
		return "max_daily_usd"
	}
	return ""
}

// Pool is one spot pool as plain figures; prices per instance-hour, NaN
// when unknown.
type Pool struct {
	Key             string
	Provider        string
	Cloud           domain.Cloud
	Region, Zone    string
	InstanceType    string
	GPUModel        string
	GPUsPerInstance float64
	SpotUSDHour     float64
	OnDemandUSDHour float64
	Risk            Risk
	// Restricted pools (not offered to the account there) are left out.
	Restricted bool
}

// PoolOf reads a provider's pool, its spot price and its risk.
func PoolOf(p domain.Pool, spotUSDHour float64, priors Priors) Pool {
	od := math.NaN()
	if p.OnDemandUSDHour != nil && *p.OnDemandUSDHour > 0 {
		od = *p.OnDemandUSDHour
	}
	return Pool{
		Key: p.Key().String(), Provider: p.Provider, Cloud: p.Cloud, Region: p.Region, Zone: p.Zone,
		InstanceType: p.InstanceType, GPUModel: p.GPU.Model, GPUsPerInstance: p.GPU.Count,
		SpotUSDHour: spotUSDHour, OnDemandUSDHour: od, Risk: RiskOf(p, priors), Restricted: p.Restricted,
	}
}

// Market is the pools and the offerings the caller found (BlockQueries).
type Market struct {
	Pools     []Pool
	Offerings []domain.Offering
}
