package watch

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/series"
)

// clock is a clock the tests move.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

func openState(t testing.TB, dir string) *State {
	t.Helper()
	st, err := OpenState(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newEvaluator(t *testing.T, opt Options) *Evaluator {
	t.Helper()
	if opt.State == nil {
		opt.State = openState(t, t.TempDir())
	}
	e, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func f64(v float64) *float64 { return &v }

// spotRule is a rule on one pool's price.
func spotRule(name, it, region, zone string, below float64, cooldown time.Duration) Spec {
	cd := config.Duration(cooldown)
	return Spec{Name: name, Cond: &SpotRule{InstanceType: it, Region: region, Zone: zone, BelowUSDHour: f64(below)}, Cooldown: &cd}
}

// validRules runs the config's checks on rules, as a config file's
// would be.
func validRules(t *testing.T, n config.Notify, rules ...Spec) []Spec {
	t.Helper()
	if err := ValidateSpecs(rules, "watch", n); err != nil {
		t.Fatal(err)
	}
	return rules
}

// snapshotOf is a ready market of one source with the pools at their
// prices.
func snapshotOf(at time.Time, prices map[domain.Pool]float64) *feed.Snapshot {
	s := &feed.Snapshot{Taken: at, Ready: true, Sources: []feed.SourceStatus{{Provider: "sim", Simulated: true, State: feed.StateReady, LastOK: at}}}
	for p, usd := range prices {
		s.Pools = append(s.Pools, feed.PoolView{Pool: p, Key: p.Key().String(),
			History: series.Series{}.Merge([]int64{at.Unix()}, []float64{usd})})
	}
	return s
}

func p5(zone string) domain.Pool {
	return domain.Pool{Provider: "sim", Cloud: domain.CloudAWS, Region: "us-west-2", Zone: zone, InstanceType: "p5.48xlarge",
		GPU: domain.GPUSpec{Model: "H100", Count: 8}, Simulated: true}
}

func logger(buf *testutil.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitFor polls cond for up to 10s: a liveness bound, not a timing
// claim.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
