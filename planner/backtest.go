package planner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Backtest policies.
const (
	PolicyOnDemand        = "on-demand"
	PolicyGreedy          = "greedy"
	PolicyUniformProgress = "uniform-progress"
	PolicyPlanner         = "planner"
)

// BacktestPolicies are the policies a backtest compares, in its order.
var BacktestPolicies = []string{PolicyOnDemand, PolicyGreedy, PolicyUniformProgress, PolicyPlanner}

// perPool are the policies run on each pool alone, as published.
var perPool = []string{PolicyGreedy, PolicyUniformProgress}

// tally is one policy's runs: what each cost, how many were on time.
type tally struct {
	cost []float64
	on   int
}

func (t *tally) add(o outcome, deadline float64) {
	t.cost = append(t.cost, o.cost)
	if o.onTime(deadline) {
		t.on++
	}
}

func (t *tally) onTimePct() float64 { return 100 * float64(t.on) / float64(len(t.cost)) }

// BacktestConfig is a job replayed on traces at instance-hour prices.
type BacktestConfig struct {
	JobHours, DeadlineHours      float64
	SpotUSDHour, OnDemandUSDHour float64
	Changeover                   time.Duration
	// Checkpoint is the interval; 0 keeps all progress, as published.
	Checkpoint time.Duration
	// Starts is how many start times are drawn, uniformly over the traces.
	Starts int
	// AllStarts evaluates every start slot: no sampling noise.
	AllStarts bool
	Seed      uint64
	// Instances is the gang's size (default 1); a trace's data are counts.
	Instances int
	// History is what the planner may look back on (default 7 days).
	History time.Duration
	// Predict adds what the Monte Carlo predicted at each start from the
	// history before it (PredictRuns draws).
	Predict     bool
	PredictRuns int
	// Prior is the risk where history is short (default: V100, middle bucket).
	Prior *Risk
}

// BacktestRow is one policy's result over every run.
type BacktestRow struct {
	Policy               string
	Runs                 int
	DeadlinesMetPct      float64
	MeanCostUSD          float64
	SavingsVsOnDemandPct float64
	P95CostUSD           float64
	// With Predict: the predictions' means and the share of runs above
	// their predicted p95.
	PredictedCostUSD, PredictedP95CostUSD float64
	PredictedOnTimePct, OverP95Pct        float64
}

// BacktestContext replays the job on the traces (each a pool) with every
// policy: greedy and uniform-progress per pool as published, the planner
// over all; it stops when ctx is done. A bad setting is a *FieldError
// named as the CLI's flag.
func BacktestContext(ctx context.Context, traces []Trace, cfg BacktestConfig) ([]BacktestRow, error) {
	if err := cfg.check(traces); err != nil {
		return nil, err
	}
	span := math.Inf(1)
	quantum := 0.0
	for _, t := range traces {
		span = math.Min(span, t.Hours())
		quantum = math.Max(quantum, float64(t.GapSeconds)/3600)
	}
	n := cfg.Instances
	tls := make([]*timeline, len(traces))
	for i, t := range traces {
		tls[i] = t.timeline(n)
	}
	mixes := mixLanes(traces, cfg)
	W, D, d := cfg.JobHours, cfg.DeadlineHours, cfg.Changeover.Hours()
	ckpt := cfg.Checkpoint.Hours()
	spotUSD, odUSD := float64(n)*cfg.SpotUSDHour, float64(n)*cfg.OnDemandUSDHour
	odCost := odUSD * (W + d)

	// Starts on the tick grid, leaving room for the deadline.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6a09e667f3bcc908))
	slots := int(math.Floor((span-D)/quantum)) + 1
	starts := make([]float64, cfg.Starts)
	for i := range starts {
		starts[i] = float64(rng.IntN(slots)) * quantum
	}
	if cfg.AllStarts {
		starts = make([]float64, slots)
		for i := range starts {
			starts[i] = float64(i) * quantum
		}
	}

	od := lane{usdHour: odUSD, speed: 1}
	hist := cfg.History.Hours()
	if hist <= 0 {
		hist = 7 * 24
	}
	type policyRuns struct {
		tally
		pred predTally
	}
	res := map[string]*policyRuns{}
	for _, p := range BacktestPolicies {
		res[p] = &policyRuns{}
	}
	// record keeps a run, beside its prediction where there is one.
	record := func(p string, o outcome, deadline float64, pd []prediction, i int) {
		res[p].add(o, deadline)
		if pd != nil {
			res[p].pred.add(pd[i], o.cost)
		}
	}
	// Predictions first, in parallel, each worker on its own cursors.
	var preds [][][]prediction
	if cfg.Predict {
		preds = make([][][]prediction, len(starts))
		parallel(ctx, len(starts), Options{}.workers(), func() func(int) {
			own, ownMix := cloneTimelines(tls), mixes.clone()
			pr := newPredictor(traces, own, ownMix, cfg, hist, quantum)
			return func(k int) {
				lanes, anyAvail := learned(own, starts[k], hist, spotUSD, d, ckpt)
				lanes = append(lanes, ownMix.learned(starts[k], hist, d, ckpt)...)
				preds[k] = pr.at(k, starts[k], lanes, anyAvail)
			}
		})
	}
	for k, s := range starts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sp := spec{work: W, start: s, deadline: s + D, d: d, ckpt: ckpt, quantum: quantum, horizon: s + D + W}
		// on-demand: known in closed form.
		odOnTime := W+d <= D+1e-9
		res[PolicyOnDemand].cost = append(res[PolicyOnDemand].cost, odCost)
		if odOnTime {
			res[PolicyOnDemand].on++
		}
		lanes, anyAvail := learned(tls, s, hist, spotUSD, d, ckpt)
		lanes = append(lanes, mixes.learned(s, hist, d, ckpt)...)
		pd := make([][]prediction, len(perPool)+1) // none: nil each
		if preds != nil {
			pd = preds[k]
			res[PolicyOnDemand].pred.add(prediction{odCost, odCost, pct(odOnTime)}, odCost)
		}
		for j := range traces {
			one := []lane{{usdHour: spotUSD, speed: 1, tl: tls[j]}}
			for i, p := range perPool {
				record(p, (&run{sp: &sp, lanes: one, od: &od}).exec(policyFor(p, 0)), sp.deadline, pd[i], j)
			}
		}
		o := (&run{sp: &sp, lanes: lanes, od: &od}).exec(policyFor(PolicyPlanner, anyAvail))
		record(PolicyPlanner, o, sp.deadline, pd[len(perPool)], 0)
	}
	var rows []BacktestRow
	for _, p := range BacktestPolicies {
		t := res[p]
		mean := meanOf(t.cost)
		row := BacktestRow{Policy: p, Runs: len(t.cost), DeadlinesMetPct: t.onTimePct(),
			MeanCostUSD: mean, SavingsVsOnDemandPct: 100 * (1 - mean/odCost), P95CostUSD: quantile(t.cost, 0.95)}
		if preds != nil {
			t.pred.fill(&row)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (cfg *BacktestConfig) check(traces []Trace) error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case len(traces) == 0:
		return fieldErr("trace", "no trace given; want one or more trace files (%s)", TraceForm)
	case bad(cfg.JobHours) || cfg.JobHours <= 0:
		return fieldErr("job-hours", "%v: want hours of work above 0", cfg.JobHours)
	case bad(cfg.DeadlineHours) || cfg.DeadlineHours < cfg.JobHours:
		return fieldErr("deadline-hours", "%v: want at least the job's hours (%v)", cfg.DeadlineHours, cfg.JobHours)
	case bad(cfg.SpotUSDHour) || cfg.SpotUSDHour < 0:
		return fieldErr("spot-usd-hour", "%v: want a price ≥ 0 per instance-hour", cfg.SpotUSDHour)
	case bad(cfg.OnDemandUSDHour) || cfg.OnDemandUSDHour <= 0:
		return fieldErr("on-demand-usd-hour", "%v: want a price above 0 per instance-hour", cfg.OnDemandUSDHour)
	case cfg.Changeover < 0 || cfg.Changeover > MaxChangeover:
		return fieldErr("changeover", "%s: want a duration from 0s to 24h such as 12m", cfg.Changeover)
	case cfg.Checkpoint < 0:
		return fieldErr("checkpoint", "%s: want 0 (progress kept) or a positive interval", cfg.Checkpoint)
	case bad(cfg.DeadlineHours) || cfg.DeadlineHours < cfg.JobHours+cfg.Changeover.Hours()-1e-9:
		return fieldErr("deadline-hours", "%v: shorter than the work plus one changeover (%v h + %s); want at least %v",
			cfg.DeadlineHours, cfg.JobHours, cfg.Changeover, cfg.JobHours+cfg.Changeover.Hours())
	case !cfg.AllStarts && (cfg.Starts < 1 || cfg.Starts > 1_000_000):
		return fieldErr("starts", "%d: want a whole number of start times from 1 to 1000000", cfg.Starts)
	}
	if cfg.Instances == 0 {
		cfg.Instances = 1
	}
	if cfg.Instances < 1 || cfg.Instances > maxCount {
		return fieldErr("instances", "%d: want a whole number of instances ≥ 1", cfg.Instances)
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	var short []string
	for _, t := range traces {
		if t.Hours() < cfg.DeadlineHours {
			short = append(short, fmt.Sprintf("%s (%.1f h)", t.Name, t.Hours()))
		}
	}
	if len(short) > 0 {
		return fieldErr("trace", "%s shorter than the deadline (%v h); want traces that cover at least one job window",
			strings.Join(short, ", "), cfg.DeadlineHours)
	}
	return nil
}

// learned is what the planner knows at a start from the history before it: each
// pool's score (its rate pulled to a prior by a day's weight), how often any had capacity.
func learned(tls []*timeline, start, hist, usd, d, ckpt float64) ([]lane, float64) {
	const (
		priorRate  = 0.5 // per hour: the middle of the traces' 0.1-1.4
		priorAvail = 0.5
		weight     = 24.0 // hours of prior
	)
	from := math.Max(0, start-hist)
	lanes := make([]lane, len(tls))
	type seg struct{ a, b float64 }
	var all []seg // every pool's up segments
	for i, tl := range tls {
		var up, downs float64
		tl.rewindTo(from)
		t := from
		for t < start {
			on, next := tl.at(t)
			end := math.Min(next, start)
			if on {
				up += end - t
				all = append(all, seg{t, end})
				if next <= start {
					downs++
				}
			}
			t = end
		}
		rate := (downs + priorRate*weight) / (up + weight)
		eff := efficiency(rate, d, ckpt)
		lanes[i] = lane{usdHour: usd, speed: 1, tl: tls[i], score: usd / math.Max(eff, 1e-6), rate: rate}
	}
	// How often any pool had capacity: the union of the up segments.
	slices.SortFunc(all, func(x, y seg) int { return cmp.Compare(x.a, y.a) })
	covered, end := 0.0, from
	for _, s := range all {
		if s.b <= end {
			continue
		}
		covered += s.b - math.Max(s.a, end)
		end = s.b
	}
	anyAvail := (covered + priorAvail*weight) / (start - from + weight)
	return lanes, anyAvail
}

// prediction is what the Monte Carlo claimed for one run at its start.
type prediction struct {
	cost, p95, onTimePct float64
}

// predTally sums the predictions beside what the runs realized.
type predTally struct {
	n                 int
	cost, p95, onTime float64
	overP95           int
}

func (t *predTally) add(p prediction, realized float64) {
	t.n++
	t.cost += p.cost
	t.p95 += p.p95
	t.onTime += p.onTimePct
	if realized > p.p95+1e-9 {
		t.overP95++
	}
}

func (t *predTally) fill(r *BacktestRow) {
	n := float64(max(t.n, 1))
	r.PredictedCostUSD, r.PredictedP95CostUSD = t.cost/n, t.p95/n
	r.PredictedOnTimePct, r.OverP95Pct = t.onTime/n, 100*float64(t.overP95)/n
}

// defaultPredictRuns are the draws of each prediction.
const defaultPredictRuns = 300

// predictor predicts at a start as a live plan would: pools fitted on
// the trace before it, the policies run over draws of them.
type predictor struct {
	traces []Trace
	tls    []*timeline
	cfg    BacktestConfig
	hist   float64
	prior  Risk
	pRun   []float64
	pGap   []float64
	sp     spec
	od     lane
	gens   []*renewal
	drawn  []timeline
	// Partial gangs: the whole gang's draw widened by its past covers.
	mixes  mixSet
	covers [][]gapCover
	mixed  []timeline
	mixSrc rand.PCG
	mixRng *rand.Rand
}

func newPredictor(traces []Trace, tls []*timeline, mixes mixSet, cfg BacktestConfig, hist, quantum float64) *predictor {
	n := cfg.Instances
	prior := scalePrior(DefaultPriors["V100"], middleBucket).ForInstances(n)
	if cfg.Prior != nil {
		prior = *cfg.Prior
	}
	if cfg.PredictRuns <= 0 {
		cfg.PredictRuns = defaultPredictRuns
	}
	W, D := cfg.JobHours, cfg.DeadlineHours
	pr := &predictor{traces: traces, tls: tls, cfg: cfg, hist: hist, prior: prior,
		sp:    spec{work: W, deadline: D, d: cfg.Changeover.Hours(), ckpt: cfg.Checkpoint.Hours(), quantum: quantum, horizon: D + W},
		od:    lane{usdHour: float64(n) * cfg.OnDemandUSDHour, speed: 1},
		drawn: make([]timeline, len(traces))}
	for range traces {
		pr.gens = append(pr.gens, newRenewal())
	}
	pr.pRun, pr.pGap = priorSpells(prior)
	pr.mixes = mixes
	pr.mixed, pr.covers = make([]timeline, len(mixes.tls)), make([][]gapCover, len(mixes.tls))
	pr.mixRng = rand.New(&pr.mixSrc)
	return pr
}

// coversAt reads each pool's covers per level in [from, s).
func (pr *predictor) coversAt(from, s float64) {
	for b, tl := range pr.mixes.tls {
		pr.covers[b] = coversOf(pr.tls[b%len(pr.tls)], tl, from, s)
	}
}

// drawMixes widens run i's draw of each pool into its partial gangs'.
func (pr *predictor) drawMixes(k, i int, D, zCov float64, fits []*Spells) {
	for b := range pr.mixed {
		j := b % len(pr.tls)
		pr.mixSrc.Seed(pr.cfg.Seed, uint64(k)<<32|uint64(i)<<12|uint64(2048+b&0x7ff))
		s := 1 / math.Sqrt(math.Max((fits[j].Hours+priorHours)/12, 1))
		z := zCov
		pr.mixed[b].widen(&pr.drawn[j], pr.covers[b], pr.mixRng, math.Exp(s*z-s*s/2))
		pr.mixed[b].closeAt(D)
	}
}

// at predicts at the k-th start: each perPool policy per pool, then the planner.
func (pr *predictor) at(k int, s float64, lanes []lane, anyAvail float64) [][]prediction {
	cfg := pr.cfg
	from := math.Max(0, s-pr.hist)
	fits := make([]*Spells, len(pr.tls))
	for j, tl := range pr.tls {
		fits[j] = fitRisk(tl, from, s, pr.prior, pr.pRun, pr.pGap, pr.traces[j].Name).Spells
		pr.gens[j].setupSpells(fits[j])
	}
	pr.coversAt(from, s)
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(k)))
	R := cfg.PredictRuns
	pools := len(pr.tls)
	// A tally per pool of each per-pool policy, then the planner's.
	accs := make([][]tally, len(perPool)+1)
	for i := range perPool {
		accs[i] = make([]tally, pools)
	}
	accs[len(perPool)] = make([]tally, 1)
	spotUSD := float64(cfg.Instances) * cfg.SpotUSDHour
	plan := slices.Clone(lanes)
	D := pr.sp.deadline
	for i := range R {
		zRun, zGap := rng.NormFloat64(), rng.NormFloat64()
		for j := range pr.drawn {
			// Spells share a regime: history counts in half-days.
			pr.gens[j].uncertain(rng, (fits[j].Hours+priorHours)/12, zRun, zGap)
			pr.gens[j].fill(&pr.drawn[j], cfg.Seed, uint64(k)<<32|uint64(i)<<12|uint64(j&0xfff), D)
			pr.drawn[j].closeAt(D)
		}
		pr.drawMixes(k, i, D, -zGap, fits)
		for j := range pr.drawn {
			one := []lane{{usdHour: spotUSD, speed: 1, tl: &pr.drawn[j]}}
			for p, name := range perPool {
				accs[p][j].add((&run{sp: &pr.sp, lanes: one, od: &pr.od}).exec(policyFor(name, 0)), D)
			}
		}
		for j := range plan {
			if j < pools {
				plan[j].tl = &pr.drawn[j]
			} else {
				plan[j].tl = &pr.mixed[j-pools]
			}
		}
		accs[len(perPool)][0].add((&run{sp: &pr.sp, lanes: plan, od: &pr.od}).exec(policyFor(PolicyPlanner, anyAvail)), D)
	}
	out := make([][]prediction, len(accs))
	for p, as := range accs {
		for _, a := range as {
			out[p] = append(out[p], prediction{cost: meanOf(a.cost), p95: quantile(a.cost, 0.95), onTimePct: a.onTimePct()})
		}
	}
	return out
}
