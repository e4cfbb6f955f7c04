package watch

import (
	"context"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
)

// simMarket is the simulated market on a clock the test moves, behind
// the real hub and booking service.
type simMarket struct {
	clk *clock
	m   *sim.Market
	h   *feed.Hub
	svc *ledger.Service
	sub <-chan *feed.Snapshot
}

func newSimMarket(t *testing.T, at time.Time, q domain.Query) *simMarket {
	t.Helper()
	clk := newClock(at)
	m := sim.New(sim.Options{Seed: 1, Now: clk.Now})
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q.Providers = []string{sim.Name}
	// The hub polls when the test says (Refresh), at the test's time.
	h := feed.New([]domain.Provider{m}, feed.Options{Query: q, Interval: func(string) time.Duration { return time.Hour },
		PublishEvery: 2 * time.Millisecond, Now: clk.Now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &simMarket{clk: clk, m: m, h: h, sub: h.Subscribe(ctx),
		svc: ledger.New(st, []domain.Provider{m}, ledger.Options{Now: clk.Now})}
}

// at moves the market to t and returns its first ready snapshot taken
// then.
func (s *simMarket) at(t *testing.T, at time.Time) *feed.Snapshot {
	t.Helper()
	s.clk.Set(at)
	s.h.Refresh()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case snap := <-s.sub:
			if snap.Ready && !snap.Taken.Before(at) {
				return snap
			}
		case <-deadline:
			t.Fatalf("no snapshot of %s", at)
		}
	}
}

// On the simulated market, a rule on a price that the sim
// crosses fires once per crossing, the cooldown respected. The expected
// firings are worked out from the sim's own prices, step by step.
func TestSimSpotRuleFiresOncePerCrossing(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const region, it = "us-east-1", "p5.48xlarge"
	s := newSimMarket(t, t0, domain.Query{Regions: []string{region}, GPUs: []string{"H100"}, Window: time.Hour})
	var keys []domain.PoolKey
	for _, p := range s.m.Pools(t0) {
		if p.Region == region && p.InstanceType == it {
			keys = append(keys, p.Key())
		}
	}
	if len(keys) < 2 {
		t.Fatalf("the sim has %d zones of %s in %s, want several (the rule watches any zone)", len(keys), it, region)
	}
	// The cheapest zone's price at each 15-minute step (the sim's slot)
	// over three days; the figure is its median, so it is crossed often.
	const step = 15 * time.Minute
	var times []time.Time
	var lows []float64
	for at := t0; at.Before(t0.Add(72 * time.Hour)); at = at.Add(step) {
		low := math.Inf(1)
		for _, k := range keys {
			usd, _ := s.m.SpotPrice(k, at)
			low = math.Min(low, usd)
		}
		times, lows = append(times, at), append(lows, low)
	}
	sorted := append([]float64(nil), lows...)
	sort.Float64s(sorted)
	figure := sorted[len(sorted)/2]
	if lows[0] < figure { // start above the figure, so the first dip is a crossing
		figure = lows[0] - 0.005
	}

	const cooldown = 2 * time.Hour
	// What the rule promises: a crossing below the figure is told at
	// once, or when the cooldown ends if it is still below then.
	var want []time.Time
	below, owed := false, false
	var last time.Time
	for i, at := range times {
		cond := lows[i] < figure
		switch {
		case !cond:
			below, owed = false, false
		case !below || owed:
			below = true
			if last.IsZero() || at.Sub(last) >= cooldown {
				want, last, owed = append(want, at), at, false
			} else {
				owed = true
			}
		}
	}
	crossings := 0
	for i := 1; i < len(lows); i++ {
		if lows[i] < figure && lows[i-1] >= figure {
			crossings++
		}
	}
	if crossings < 3 || len(want) >= crossings {
		t.Fatalf("the sim crosses $%.2f %d times and the cooldown leaves %d: want a market that tests both", figure, crossings, len(want))
	}

	e := newEvaluator(t, Options{Hub: s.h, Now: s.clk.Now,
		Rules: validRules(t, config.Notify{}, spotRule("dip", it, region, "", figure, cooldown))})
	ctx := context.Background()
	for _, at := range times {
		e.evalSnapshot(ctx, s.at(t, at))
	}
	got := e.Alerts(0)
	if len(got) != len(want) {
		t.Fatalf("%d alerts, want %d (%d crossings, cooldown %s)", len(got), len(want), crossings, cooldown)
	}
	for i, a := range got {
		if !a.At.Equal(want[i]) || *a.USDHour >= figure || !a.Simulated || *a.Region != region {
			t.Errorf("alert %d at %s ($%.3f), want at %s below $%.3f", i, a.At, *a.USDHour, want[i], figure)
		}
	}
	t.Logf("$%.3f crossed %d times in 72h; %d alerts with a %s cooldown", figure, crossings, len(got), cooldown)
}

// On the simulated market, a rule for a block that the sim
// offers fires within one refresh of its coming on sale — and the one
// evaluator searches once for it, however many sessions watch.
func TestSimBlockRuleFiresWithinOneRefresh(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s := newSimMarket(t, t0, domain.Query{Regions: []string{"us-east-1"}, Window: time.Hour})
	// Blocks for mid-February: more than 8 weeks away at t0, so not on
	// sale yet.
	after, before := time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 4, 0, 0, 0, 0, time.UTC)
	rule := Spec{Name: "h100-feb", Cond: &BlockRule{GPU: "H100", GPUs: 16, Hours: 48,
		StartAfter: after.Format(time.RFC3339), StartBefore: before.Format(time.RFC3339), MaxUSDGPUHour: f64(6)}}
	e := newEvaluator(t, Options{Offerings: s.svc, Now: s.clk.Now, Tick: 2 * time.Millisecond,
		MaxLead: domain.CapacityBlockTerms.MaxLead, Rules: validRules(t, config.Notify{}, rule)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subs := make([]<-chan struct{}, 50)
	for i := range subs {
		subs[i] = e.Subscribe(ctx)
	}
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the rule to say it is not on sale yet", func() bool { return e.Rules()[0].Note != "" })
	if e.Searches() != 0 || len(e.Alerts(0)) != 0 {
		t.Fatalf("searched %d times and raised %v for blocks not on sale", e.Searches(), e.Alerts(0))
	}
	// A week later the range is within 8 weeks: the sim offers blocks.
	s.clk.Set(t0.Add(7 * 24 * time.Hour))
	offers, err := s.m.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", GPUs: 16, Duration: 48 * time.Hour, StartAfter: after, StartBefore: before})
	if err != nil {
		t.Fatal(err)
	}
	cheapest := math.Inf(1)
	ids := map[string]bool{}
	for _, o := range offers {
		if p := o.USDPerGPUHour(); p <= 6 {
			ids[o.ID] = true
			cheapest = math.Min(cheapest, p)
		}
	}
	if len(ids) == 0 {
		t.Fatal("the sim offers no such block: pick other terms")
	}
	waitFor(t, "the alert", func() bool { return len(e.Alerts(0)) > 0 })
	a := e.Alerts(0)[0]
	if !ids[*a.OfferingID] || *a.USDGPUHour != cheapest || *a.GPUCount < 16 || !a.Simulated || a.Start.Before(after) || a.Start.After(before) {
		t.Errorf("alert %+v: want the sim's cheapest offering ($%.3f/GPU-h)", a, cheapest)
	}
	if n := e.Searches(); n != 1 {
		t.Errorf("%d searches before the alert, want 1: it fires within one refresh", n)
	}
	for i, ch := range subs {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("session %d was not told", i)
		}
	}
	// Later refreshes find it still on sale: no second alert, and a
	// search per refresh, not per session or per tick.
	for i := 1; i <= 3; i++ {
		s.clk.Set(t0.Add(7*24*time.Hour + time.Duration(i)*DefaultEvery))
		waitFor(t, "the next refresh", func() bool { return e.Searches() == int64(1+i) })
	}
	time.Sleep(20 * time.Millisecond) // ticks with nothing due
	if n, as := e.Searches(), e.Alerts(0); n != 4 || len(as) != 1 {
		t.Errorf("%d searches and %d alerts after 3 more refreshes, want 4 and 1", n, len(as))
	}
	// The offering can be booked by id: the search kept it.
	if _, err := s.svc.Quote(ctx, *a.OfferingID); err != nil {
		t.Errorf("the alert's offering cannot be quoted: %v", err)
	}
}
