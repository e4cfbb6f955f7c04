package sim

import (
	"context"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/series"
)

// wed is a Wednesday afternoon in UTC, mid-week in every simulated region.
var wed = time.Date(2026, 11, 25, 15, 0, 0, 0, time.UTC)

func newAt(seed int64, now time.Time) *Market {
	return New(Options{Seed: seed, Now: func() time.Time { return now }})
}

// capture collects a fetch's events.
type capture struct {
	mu     sync.Mutex
	events []domain.Event
	pools  map[string]domain.Pool
	points map[string]map[int64]float64
	n      int
}

func newCapture() *capture {
	return &capture{pools: map[string]domain.Pool{}, points: map[string]map[int64]float64{}}
}

func (c *capture) sink(ev domain.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := ev
	cp.Points = append([]domain.PricePoint(nil), ev.Points...)
	cp.Histories = append([]domain.PoolHistory(nil), ev.Histories...)
	cp.Pools = append([]domain.Pool(nil), ev.Pools...)
	c.events = append(c.events, cp)
	for _, p := range ev.Pools {
		c.pools[p.Key().String()] = p
	}
	for pt := range ev.PricePoints() {
		k := pt.Pool.String()
		if c.points[k] == nil {
			c.points[k] = map[int64]float64{}
		}
		c.points[k][pt.At.Unix()] = pt.USDHour
		c.n++
	}
}

func fetch(t testing.TB, m *Market, req domain.FetchRequest) *capture {
	t.Helper()
	c := newCapture()
	if err := m.Fetch(context.Background(), req, c.sink); err != nil {
		t.Fatalf("Fetch(%v..%v, backfill %v): %v", req.Since, req.Until, req.Backfill, err)
	}
	return c
}

func TestMarketShape(t *testing.T) {
	m := newAt(1, wed)
	pools := m.Pools(wed)
	if len(pools) < 40 || len(pools) > 1000 {
		t.Fatalf("%d pools, want 40 to 1000", len(pools))
	}
	regions := map[domain.Cloud]map[string]bool{domain.CloudAWS: {}, domain.CloudAzure: {}, domain.CloudGCP: {}}
	types := map[string]int{}
	typeRegions := map[string]map[string]bool{}
	awsZone := regexp.MustCompile(`^([a-z]+-[a-z]+-\d)[a-f]$`)
	for _, p := range pools {
		regions[p.Cloud][p.Region] = true
		types[p.InstanceType]++
		if typeRegions[p.InstanceType] == nil {
			typeRegions[p.InstanceType] = map[string]bool{}
		}
		typeRegions[p.InstanceType][p.Region] = true
		if p.Provider != "sim" || !p.Simulated {
			t.Errorf("%s: provider %q simulated %v, want sim and true", p.Key(), p.Provider, p.Simulated)
		}
		e, ok := domain.LookupGPU(p.InstanceType)
		if !ok || e.GPU != p.GPU || e.Cloud != p.Cloud {
			t.Errorf("%s: GPU %+v cloud %s, catalog says %+v %s", p.Key(), p.GPU, p.Cloud, e.GPU, e.Cloud)
		}
		if p.OnDemandUSDHour == nil || *p.OnDemandUSDHour <= 0 {
			t.Errorf("%s: no on-demand price", p.Key())
		}
		if p.Interruption == nil || !strings.HasPrefix(p.Interruption.Source, "sim") {
			t.Errorf("%s: interruption %+v, want one sourced from the sim", p.Key(), p.Interruption)
		}
		switch p.Cloud {
		case domain.CloudAWS:
			if mm := awsZone.FindStringSubmatch(p.Zone); mm == nil || mm[1] != p.Region {
				t.Errorf("%s: zone %q is not an AWS zone of %s", p.Key(), p.Zone, p.Region)
			}
			if p.PlacementScore == nil || *p.PlacementScore < 1 || *p.PlacementScore > 10 {
				t.Errorf("%s: placement score %v, want 1-10", p.Key(), p.PlacementScore)
			}
		case domain.CloudGCP:
			if !strings.HasPrefix(p.Zone, p.Region+"-") || len(p.Zone) != len(p.Region)+2 {
				t.Errorf("%s: zone %q is not a Google zone of %s", p.Key(), p.Zone, p.Region)
			}
			if p.PlacementScore != nil || p.Interruption.Bucket != "" || p.Interruption.Process == nil {
				t.Errorf("%s: Google publishes no bucket or score; got %+v %v", p.Key(), p.Interruption, p.PlacementScore)
			}
		case domain.CloudAzure:
			if p.Zone != "1" && p.Zone != "2" && p.Zone != "3" {
				t.Errorf("%s: zone %q, want 1, 2 or 3", p.Key(), p.Zone)
			}
			if p.PlacementScore != nil {
				t.Errorf("%s: Azure has no placement score, got %d", p.Key(), *p.PlacementScore)
			}
		}
	}
	if n := len(regions[domain.CloudAWS]); n < 8 {
		t.Errorf("%d AWS regions, want at least 8", n)
	}
	if n := len(regions[domain.CloudAzure]); n < 6 {
		t.Errorf("%d Azure regions, want at least 6", n)
	}
	if n := len(regions[domain.CloudGCP]); n < 6 {
		t.Errorf("%d Google regions, want at least 6", n)
	}
	for _, want := range []string{"p5.48xlarge", "p5e.48xlarge", "p4d.24xlarge", "p4de.24xlarge", "g6e.xlarge", "g6.xlarge",
		"g5.xlarge", "g4dn.xlarge", "Standard_ND96isr_H100_v5", "Standard_NC24ads_A100_v4", "Standard_NC40ads_H100_v5",
		"Standard_NV6ads_A10_v5", "Standard_NV12ads_A10_v5", "Standard_NV18ads_A10_v5", "Standard_NC4as_T4_v3",
		"a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a2-highgpu-1g", "a2-ultragpu-8g", "g2-standard-4"} {
		if types[want] == 0 {
			t.Errorf("no pool of %s", want)
		}
	}
	// The big GPUs are scarce, the small ones nearly everywhere.
	if a, b := len(typeRegions["p5.48xlarge"]), len(typeRegions["g4dn.xlarge"]); a >= b {
		t.Errorf("p5.48xlarge in %d regions, g4dn.xlarge in %d: want p5 scarcer", a, b)
	}
	if types["p5.48xlarge"]*3 > types["g5.xlarge"] {
		t.Errorf("%d p5.48xlarge pools against %d g5.xlarge: want p5 in few zones", types["p5.48xlarge"], types["g5.xlarge"])
	}
}

func TestListPrices(t *testing.T) {
	m := newAt(1, wed)
	od := map[string]float64{}
	for _, p := range m.Pools(wed) {
		od[p.Region+" "+p.InstanceType] = *p.OnDemandUSDHour
	}
	for _, tc := range []struct {
		key  string
		want float64
	}{
		{"us-east-1 p5.48xlarge", 55.04},
		{"us-east-1 p4d.24xlarge", 21.96},
		{"us-east-1 p4de.24xlarge", 27.45},
		{"us-east-1 g6e.xlarge", 1.861},
		{"us-east-1 g6.xlarge", 0.8048},
		{"us-east-1 g5.xlarge", 1.006},
		{"us-east-1 g4dn.xlarge", 0.526},
		{"us-east-1 p3.2xlarge", 3.06},
		{"eastus Standard_ND96isr_H100_v5", 98.32},
		{"eastus Standard_NC24ads_A100_v4", 3.673},
		{"eastus Standard_ND96amsr_A100_v4", 32.77},
		{"eastus Standard_NV36ads_A10_v5", 3.20},
		{"eastus Standard_NV6ads_A10_v5", 0.454},
		{"eastus Standard_NC4as_T4_v3", 0.526},
		{"eastus2 Standard_NC40ads_H100_v5", 6.98},
	} {
		got, ok := od[tc.key]
		if !ok {
			t.Errorf("%s: no such pool", tc.key)
			continue
		}
		if math.Abs(got-tc.want) > 0.01 {
			t.Errorf("%s: list price %.4f, want %.4f", tc.key, got, tc.want)
		}
	}
	// Europe and Asia are dearer than the US.
	for _, r := range []string{"eu-central-1", "ap-northeast-1", "eu-west-1"} {
		if od[r+" g5.xlarge"] <= od["us-east-1 g5.xlarge"] {
			t.Errorf("g5.xlarge in %s $%.4f, not dearer than us-east-1 $%.4f", r, od[r+" g5.xlarge"], od["us-east-1 g5.xlarge"])
		}
	}
}

func TestDeterministicWhateverTheChunks(t *testing.T) {
	a, c := wed.Add(-3*24*time.Hour), wed
	b := wed.Add(-26*time.Hour - 17*time.Second)
	q := domain.Query{Regions: []string{"us-east-1", "westeurope", "ap-south-1"}}
	whole := fetch(t, newAt(1, wed), domain.FetchRequest{Query: q, Since: a, Until: c, Backfill: true})

	for _, tc := range []struct {
		name string
		run  func(m *Market, into *capture)
	}{
		{"back-fill then live polls of mixed length", func(m *Market, into *capture) {
			ctx := context.Background()
			if err := m.Fetch(ctx, domain.FetchRequest{Query: q, Since: a, Until: b, Backfill: true}, into.sink); err != nil {
				t.Fatal(err)
			}
			steps := []time.Duration{2 * time.Second, time.Hour, 37 * time.Minute, 2 * time.Second, 5 * time.Hour}
			for since, i := b, 0; since.Before(c); i++ {
				until := since.Add(steps[i%len(steps)])
				if until.After(c) {
					until = c
				}
				if err := m.Fetch(ctx, domain.FetchRequest{Query: q, Since: since, Until: until}, into.sink); err != nil {
					t.Fatal(err)
				}
				since = until
			}
		}},
		{"recent back-fill, then extended to the past", func(m *Market, into *capture) {
			ctx := context.Background()
			for _, r := range [][2]time.Time{{b, c}, {a, b}} {
				if err := m.Fetch(ctx, domain.FetchRequest{Query: q, Since: r[0], Until: r[1], Backfill: true}, into.sink); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := newCapture()
			tc.run(newAt(1, wed), got)
			if len(got.points) != len(whole.points) {
				t.Fatalf("%d pools with points, want %d", len(got.points), len(whole.points))
			}
			for k, want := range whole.points {
				pts := got.points[k]
				for at, usd := range want {
					if g, ok := pts[at]; !ok || g != usd {
						t.Fatalf("%s at %s: got %v (present %v), want %v", k, time.Unix(at, 0).UTC(), g, ok, usd)
					}
				}
				for at := range pts {
					if _, ok := want[at]; !ok && at >= a.Unix() {
						t.Fatalf("%s: point at %s that the one-shot fetch does not have", k, time.Unix(at, 0).UTC())
					}
				}
			}
		})
	}

	other := fetch(t, newAt(2, wed), domain.FetchRequest{Query: q, Since: a, Until: c, Backfill: true})
	same := 0
	for k, want := range whole.points {
		if len(other.points[k]) == len(want) {
			eq := true
			for at, usd := range want {
				if other.points[k][at] != usd {
					eq = false
					break
				}
			}
			if eq {
				same++
			}
		}
	}
	if same > 0 {
		t.Errorf("seed 2 gave %d of %d pools the same history as seed 1", same, len(whole.points))
	}
}

func TestSpotBand(t *testing.T) {
	m := newAt(1, wed)
	var mu sync.Mutex
	od := map[domain.PoolKey]float64{}
	n, bad := 0, 0
	// Checked in the sink (called from several goroutines): 90 days of
	// every pool is millions of points.
	err := m.Fetch(context.Background(), domain.FetchRequest{Since: wed.Add(-domain.MaxWindow), Until: wed, Backfill: true}, func(ev domain.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range ev.Pools {
			od[p.Key()] = *p.OnDemandUSDHour
		}
		for pt := range ev.PricePoints() {
			n++
			if s := domain.SavingsPct(pt.USDHour, od[pt.Pool]); (s < 60 || s > 91) && bad < 10 {
				bad++
				t.Errorf("%s at %s: spot %.4f vs on-demand %.4f saves %.1f %%, want 60-91 %%", pt.Pool, pt.At, pt.USDHour, od[pt.Pool], s)
			}
		}
	})
	if err != nil || n < 1000 {
		t.Fatalf("fetch: %d points, %v", n, err)
	}
}

// avgByClass returns, over every pool fetched, the mean of spot / on-demand
// sampled every 10 minutes of [from, to), for the samples class puts in
// each of two classes (it skips those it puts in -1).
func avgByClass(t *testing.T, c *capture, m *Market, from, to int64, class func(p *simPool, at int64) int) [2]float64 {
	t.Helper()
	var sum, n [2]float64
	for k, pts := range c.points {
		p := m.byKey[k]
		s := seriesOf(pts)
		od := *p.spec.Desc.OnDemandUSDHour
		for x := from; x < to; x += 600 {
			if cl := class(p, x); cl >= 0 {
				if usd, ok := s.PriceAt(x); ok {
					sum[cl] += usd / od
					n[cl]++
				}
			}
		}
	}
	return [2]float64{sum[0] / n[0], sum[1] / n[1]}
}

func seriesOf(pts map[int64]float64) series.Series {
	var s series.Series
	at := make([]int64, 0, len(pts))
	usd := make([]float64, 0, len(pts))
	for a, u := range pts {
		at = append(at, a)
		usd = append(usd, u)
	}
	return s.Merge(at, usd)
}

func TestDailyAndWeeklyCycles(t *testing.T) {
	m := newAt(1, wed)
	from, to := wed.Add(-domain.MaxWindow), wed
	q := domain.Query{GPUs: []string{"H100", "V100"}}
	c := fetch(t, m, domain.FetchRequest{Query: q, Since: from, Until: to, Backfill: true})
	week := avgByClass(t, c, m, from.Unix(), to.Unix(), func(p *simPool, at int64) int {
		day, _ := p.model.local(at)
		if weekend(day) {
			return 1
		}
		return 0
	})
	if week[1] >= week[0] {
		t.Errorf("weekend spot/on-demand %.4f, weekday %.4f: want weekends cheaper", week[1], week[0])
	}
	daily := avgByClass(t, c, m, from.Unix(), to.Unix(), func(p *simPool, at int64) int {
		day, sec := p.model.local(at)
		switch h := sec / 3600; {
		case weekend(day):
			return -1
		case h >= 10 && h < 18:
			return 1
		case h < 6:
			return 0
		}
		return -1
	})
	if daily[1] <= daily[0] {
		t.Errorf("business hours spot/on-demand %.4f, night %.4f: want business hours dearer", daily[1], daily[0])
	}
	t.Logf("weekday %.4f weekend %.4f; night %.4f business hours %.4f", week[0], week[1], daily[0], daily[1])
}

func TestInterruptionOrdering(t *testing.T) {
	m := newAt(1, wed)
	sat := time.Date(2026, 11, 28, 15, 0, 0, 0, time.UTC) // Saturday in every region
	mean := func(pools []domain.Pool, keep func(domain.Pool) bool) float64 {
		var s, n float64
		for _, p := range pools {
			if keep(p) {
				s += float64(domain.BucketRank(p.Interruption.Bucket))
				n++
			}
		}
		if n == 0 {
			t.Fatal("no pools to average")
		}
		return s / n
	}
	weekday, weekendPools := m.Pools(wed), m.Pools(sat)
	byGPU := func(models ...string) func(domain.Pool) bool {
		return func(p domain.Pool) bool { return slices.Contains(models, p.GPU.Model) }
	}
	h100, a100 := mean(weekday, byGPU("H100", "H200")), mean(weekday, byGPU("A100"))
	v100, t4 := mean(weekday, byGPU("V100")), mean(weekday, byGPU("T4"))
	if !(h100 > a100 && a100 > v100 && a100 > t4) {
		t.Errorf("mean interruption bucket (0 <5%%, 4 >20%%): H100/H200 %.1f, A100 %.1f, V100 %.1f, T4 %.1f; want H100 > A100 > V100, T4", h100, a100, v100, t4)
	}
	calmer := 0
	for i, p := range weekday {
		w := weekendPools[i]
		if domain.BucketRank(w.Interruption.Bucket) > domain.BucketRank(p.Interruption.Bucket) {
			t.Errorf("%s: weekend bucket %s above weekday %s", p.Key(), w.Interruption.Bucket, p.Interruption.Bucket)
		}
		if w.Interruption.Bucket != p.Interruption.Bucket {
			calmer++
		}
	}
	if all := func(domain.Pool) bool { return true }; mean(weekendPools, all) >= mean(weekday, all) || calmer < len(weekday)/2 {
		t.Errorf("weekend: %d of %d pools calmer; want weekends calmer", calmer, len(weekday))
	}
	// Some regions are busier than others.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range m.regions {
		v := mean(weekday, func(p domain.Pool) bool { return p.Region == r.name })
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if hi-lo < 0.6 { // buckets are 5 points apart: 3 points
		t.Errorf("region means of the interruption bucket span %.1f..%.1f; want some regions busier", lo, hi)
	}
}

func TestFetchSendsThePriceInForceAtSince(t *testing.T) {
	m := newAt(1, wed)
	since := wed.Add(-6*time.Hour - 7*time.Minute - 3*time.Second)
	wide := fetch(t, m, domain.FetchRequest{Since: since.Add(-24 * time.Hour), Until: wed, Backfill: true})
	c := fetch(t, m, domain.FetchRequest{Since: since, Until: wed, Backfill: true})
	if len(c.points) != len(m.pools) {
		t.Fatalf("%d pools have points, want all %d", len(c.points), len(m.pools))
	}
	for k, pts := range c.points {
		var before []int64
		for at := range pts {
			if at <= since.Unix() {
				before = append(before, at)
			}
		}
		if len(before) != 1 {
			t.Fatalf("%s: %d points at or before since, want exactly 1", k, len(before))
		}
		// It is the last point at or before since in the wider history.
		s := seriesOf(wide.points[k])
		want, _ := s.PriceAt(since.Unix())
		if got := pts[before[0]]; got != want {
			t.Errorf("%s: price in force at since %v, the wider history says %v", k, got, want)
		}
		if _, ok := wide.points[k][before[0]]; !ok {
			t.Errorf("%s: point before since at %d is not in the wider history", k, before[0])
		}
	}
}

func TestLivePollSendsOnlyNewPoints(t *testing.T) {
	m := newAt(1, wed)
	since := wed
	total, ticks, moved := 0, 0, 0
	for until := since.Add(2 * time.Second); !until.After(wed.Add(time.Hour)); until = until.Add(2 * time.Second) {
		c := fetch(t, m, domain.FetchRequest{Since: since, Until: until})
		for _, ev := range c.events {
			if ev.Progress != nil {
				t.Fatalf("live poll sent progress %+v", *ev.Progress)
			}
			if len(ev.Pools) > 0 {
				t.Fatalf("mid-week live poll re-described %d pools", len(ev.Pools))
			}
			if ev.Note != "SIMULATED MARKET (seed 1)" {
				t.Fatalf("event note %q", ev.Note)
			}
			for pt := range ev.PricePoints() {
				if !pt.At.After(since) || pt.At.After(until) {
					t.Fatalf("poll (%s, %s] sent a point at %s", since, until, pt.At)
				}
			}
		}
		total += c.n
		ticks++
		if c.n > 0 {
			moved++
		}
		since = until
	}
	// A live screen moves: most 2 s ticks carry a change.
	if moved*2 < ticks {
		t.Errorf("%d of %d two-second ticks carried a change (%d points), want most", moved, ticks, total)
	}
	t.Logf("%d points in %d ticks; %d ticks moved", total, ticks, moved)
}

func TestLivePollRedescribesAtTheWeekend(t *testing.T) {
	m := newAt(1, wed)
	// Friday 23:59:59 to Saturday 00:00:01 in UTC: the weekend starts in
	// eu-west-1 (UTC+0).
	fri := time.Date(2026, 11, 27, 23, 59, 59, 0, time.UTC)
	c := fetch(t, m, domain.FetchRequest{Query: domain.Query{Regions: []string{"eu-west-1"}}, Since: fri, Until: fri.Add(2 * time.Second)})
	if len(c.pools) == 0 {
		t.Fatal("no pool re-described when the weekend started")
	}
	for k, p := range c.pools {
		before := m.byKey[k].describe(fri)
		if domain.BucketRank(p.Interruption.Bucket) > domain.BucketRank(before.Interruption.Bucket) {
			t.Errorf("%s: weekend bucket %s above Friday's %s", k, p.Interruption.Bucket, before.Interruption.Bucket)
		}
	}
}

func TestBackfillProgressAndNote(t *testing.T) {
	m := newAt(7, wed)
	c := fetch(t, m, domain.FetchRequest{Since: wed.Add(-24 * time.Hour), Until: wed, Backfill: true})
	type prog struct{ first, last, total int }
	seen := map[string]*prog{}
	for _, ev := range c.events {
		if ev.Note != "SIMULATED MARKET (seed 7)" {
			t.Fatalf("event note %q", ev.Note)
		}
		if ev.Provider != "sim" {
			t.Fatalf("event provider %q", ev.Provider)
		}
		if ev.Progress == nil {
			t.Fatalf("back-fill event for %q without progress", ev.Region)
		}
		p := seen[ev.Region]
		if p == nil {
			if ev.Progress.Done != 0 || len(ev.Pools) == 0 {
				t.Fatalf("%s: first event %+v with %d pools, want progress 0 and the pools", ev.Region, *ev.Progress, len(ev.Pools))
			}
			seen[ev.Region] = &prog{first: 0, last: 0, total: ev.Progress.Total}
			continue
		}
		if ev.Progress.Total != p.total || ev.Progress.Done != p.last+1 {
			t.Fatalf("%s: progress %+v after %d of %d", ev.Region, *ev.Progress, p.last, p.total)
		}
		p.last = ev.Progress.Done
	}
	if len(seen) != len(m.regions) {
		t.Errorf("progress for %d regions, want %d", len(seen), len(m.regions))
	}
	for r, p := range seen {
		if p.last != p.total || p.total < 1 {
			t.Errorf("%s: progress ended at %d of %d", r, p.last, p.total)
		}
	}
	if len(c.pools) != len(m.pools) {
		t.Errorf("%d pools described, want %d", len(c.pools), len(m.pools))
	}
}

func TestPastBackfillDescribesPoolsAsTheyAreNow(t *testing.T) {
	m := newAt(1, wed)
	sat := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	c := fetch(t, m, domain.FetchRequest{Since: sat.Add(-time.Hour), Until: sat, Backfill: true})
	now := m.Pools(wed)
	for _, p := range now {
		got := c.pools[p.Key().String()]
		if got.Interruption == nil || got.Interruption.Bucket != p.Interruption.Bucket || !got.Interruption.AsOf.Equal(wed) {
			t.Fatalf("%s: described %+v by a past back-fill, want %+v as of now", p.Key(), got.Interruption, p.Interruption)
		}
	}
}

func TestBackfillHonoursContext(t *testing.T) {
	m := newAt(1, wed)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	chunks, all := 0, 0
	for _, r := range m.regions {
		all += len(r.families)
	}
	err := m.Fetch(ctx, domain.FetchRequest{Since: wed.Add(-7 * 24 * time.Hour), Until: wed, Backfill: true}, func(ev domain.Event) {
		if len(ev.Histories) > 0 {
			mu.Lock()
			chunks++
			mu.Unlock()
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled back-fill returned %v, want context.Canceled", err)
	}
	// Each worker finishes at most the chunk it was making.
	if chunks > maxWorkers || chunks >= all {
		t.Errorf("%d of %d chunks sent after the cancel, want at most %d", chunks, all, maxWorkers)
	}
}

func TestFetchFilters(t *testing.T) {
	m := newAt(1, wed)
	for _, tc := range []struct {
		name string
		q    domain.Query
		keep func(domain.Pool) bool
	}{
		{"H100", domain.Query{GPUs: []string{"h100"}}, func(p domain.Pool) bool { return p.GPU.Model == "H100" }},
		{"regions", domain.Query{Regions: []string{"us-west-2", "japaneast"}}, func(p domain.Pool) bool {
			return p.Region == "us-west-2" || p.Region == "japaneast"
		}},
		{"other provider", domain.Query{Providers: []string{"aws"}}, func(domain.Pool) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fetch(t, m, domain.FetchRequest{Query: tc.q, Since: wed.Add(-time.Hour), Until: wed, Backfill: true})
			want := 0
			for _, p := range m.Pools(wed) {
				if tc.keep(p) {
					want++
				}
			}
			if len(c.pools) != want {
				t.Errorf("%d pools, want %d", len(c.pools), want)
			}
			for k := range c.points {
				if !tc.keep(m.byKey[k].spec.Desc) {
					t.Errorf("points of %s, which the query leaves out", k)
				}
			}
			if len(c.events) == 0 || c.events[0].Note == "" {
				t.Error("no event with the SIMULATED MARKET note")
			}
		})
	}
}

func TestFetchBounds(t *testing.T) {
	m := newAt(1, wed)
	if err := m.Fetch(context.Background(), domain.FetchRequest{Since: wed, Until: wed.Add(-time.Second)}, func(domain.Event) {}); err == nil {
		t.Error("since after until: no error")
	}
	// A window beyond 90 days is cut to its last 90 days.
	c := fetch(t, m, domain.FetchRequest{Query: domain.Query{Regions: []string{"eastus"}}, Since: wed.Add(-200 * 24 * time.Hour), Until: wed, Backfill: true})
	floor := wed.Add(-domain.MaxWindow - 3*time.Hour).Unix()
	for k, pts := range c.points {
		for at := range pts {
			if at < floor {
				t.Fatalf("%s: point at %s, older than 90 days", k, time.Unix(at, 0).UTC())
			}
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	m := newAt(1, wed)
	offers, err := m.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour})
	if err != nil || len(offers) < 4 {
		t.Fatalf("offerings: %d, %v", len(offers), err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			_ = m.Fetch(ctx, domain.FetchRequest{Since: wed.Add(-time.Hour), Until: wed, Backfill: true}, func(domain.Event) {})
			_, _ = m.Book(ctx, domain.BookRequest{Offering: offers[i]})
			_, _ = m.FindOfferings(ctx, domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour})
			_, _ = m.LaunchFleet(ctx, domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g5.xlarge"}, TargetCapacity: 2, ClientToken: "same"})
		}()
	}
	wg.Wait()
	if len(m.fleets) != 1 || len(m.bookings) != 4 {
		t.Errorf("%d fleets and %d bookings, want 1 and 4", len(m.fleets), len(m.bookings))
	}
}
