package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// The same fleet launched again after the first launch's answer was lost
// (the command run twice, L pressed again) must not launch a second
// fleet: the earlier intent is looked up first, and when the cloud does
// not show it, it is re-sent under the same ClientToken, which the cloud
// honours as the same launch.
func TestFleetLaunchAgainAfterLostAnswer(t *testing.T) {
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2,
		MaxPriceUSD: domain.Float(30)}
	ctx := context.Background()

	t.Run("landed", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		// The launch lands at the cloud; its answer is lost.
		f.fake.LaunchHook = func(ctx context.Context, spec domain.FleetSpec) error {
			f.fake.LaunchHook = nil
			f.fake.LaunchFleet(ctx, spec)
			return context.DeadlineExceeded
		}
		first, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
		if !errors.Is(err, ledger.ErrUnknownOutcome) {
			t.Fatalf("lost answer: %v", err)
		}
		_, err = f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
		if err == nil || !strings.Contains(err.Error(), first.Row.ID) {
			t.Fatalf("launch again: %v, want a refusal naming row %s", err, first.Row.ID)
		}
		if n := f.fake.Fleets(); n != 1 {
			t.Fatalf("%d fleets at the cloud, want 1", n)
		}
		r, _ := f.st.Get(ctx, first.Row.ID)
		if r.State != ledger.StateActive || r.ProviderRef != "fleet-0001" {
			t.Fatalf("the earlier row should be settled by the look-up: %+v", r)
		}
		// Once settled, the same fleet again is a duplicate of the one
		// running, unless asked for as such.
		if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec}); err == nil || !strings.Contains(err.Error(), first.Row.ID) {
			t.Fatalf("the same fleet again: %v, want a duplicate naming %s", err, first.Row.ID)
		}
		if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Again: true}); err != nil {
			t.Fatal(err)
		}
		if n := f.fake.Fleets(); n != 2 {
			t.Fatalf("%d fleets, want 2 after a deliberate second launch", n)
		}
	})

	t.Run("not found: re-sent under the same token", func(t *testing.T) {
		// The lost launch already counts against the day's budget; its
		// re-send adds nothing, so it is not refused for the budget.
		f := newFixture(t, "", "aws", ledger.Budget{MaxDailyUSD: 24 * 30}) // a fleet with no end is held for its first day
		f.fake.SpotUSDHour = 10
		var tokens []string
		f.fake.LaunchHook = func(ctx context.Context, spec domain.FleetSpec) error {
			tokens = append(tokens, spec.ClientToken)
			if len(tokens) == 1 {
				return context.DeadlineExceeded // lost before it reached the cloud
			}
			return nil
		}
		first, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
		if !errors.Is(err, ledger.ErrUnknownOutcome) {
			t.Fatalf("lost answer: %v", err)
		}
		again, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		if len(tokens) != 2 || tokens[0] != tokens[1] || tokens[0] != first.Row.ID {
			t.Fatalf("client tokens %v, want the first intent's %s twice", tokens, first.Row.ID)
		}
		rows := listRows(t, f.st)
		if len(rows) != 1 || again.Row.ID != first.Row.ID || rows[0].State != ledger.StateActive {
			t.Fatalf("rows %+v, want the one intent, active", rows)
		}
	})

	t.Run("in flight", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		started, release := make(chan struct{}), make(chan struct{})
		f.fake.LaunchHook = func(context.Context, domain.FleetSpec) error {
			close(started)
			<-release
			return nil
		}
		done := make(chan error, 1)
		go func() {
			_, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
			done <- err
		}()
		<-started
		f.fake.LaunchHook = nil
		_, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
		close(release)
		if err == nil || !strings.Contains(err.Error(), "in flight") {
			t.Fatalf("second launch while the first is on the wire: %v", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := f.fake.Fleets(); n != 1 {
			t.Fatalf("%d fleets, want 1", n)
		}
	})
}

// TestLaunchedFleetIsNeverPending: "pending" in the ledger means the call
// is being made, and a pending row older than the call's timeout is taken
// for a process that died mid-call. A fleet the provider answered for —
// here a simulated one whose spot instances wait under the max price —
// exists, so its row must not read pending, or the next reconciliation
// records it failed ("lost with the process") while it lives on.
func TestLaunchedFleetIsNeverPending(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := t0
	clock := func() time.Time { return now }
	market := sim.New(sim.Options{Seed: 1, Now: clock})
	svc := ledger.New(st, []domain.Provider{market}, ledger.Options{Now: clock, Timeout: time.Second})
	ctx := context.Background()
	spec := domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge", "p4d.24xlarge"},
		TargetCapacity: 2, MaxPriceUSD: domain.Float(0.001)}
	res, err := svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: 1, GPUs: 16}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Row.State == ledger.StatePending || res.Row.ProviderRef == "" {
		t.Fatalf("launched fleet recorded %q (%s)", res.Row.State, res.Row.ProviderRef)
	}
	now = now.Add(10 * time.Minute)
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.RefreshFleet(ctx, res.Row.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := st.Get(ctx, res.Row.ID)
	if r.State != res.Row.State {
		t.Fatalf("a live fleet's row went %s → %s (%s)", res.Row.State, r.State, r.Error)
	}
}

// zonesFake reports, for p5.48xlarge in two zones, a price that changed
// lately in one (cheap) and earlier in the other (dear): both are in
// force now.
type zonesFake struct{ *ledgertest.Fake }

func (z zonesFake) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	pool := func(zone string) domain.PoolKey {
		return domain.PoolKey{Provider: "aws", Region: "us-east-1", Zone: zone, InstanceType: "p5.48xlarge"}
	}
	sink(domain.Event{Provider: "aws", Region: "us-east-1", Points: []domain.PricePoint{
		{Pool: pool("us-east-1a"), At: req.Until.Add(-3 * time.Hour), USDHour: 50},
		{Pool: pool("us-east-1b"), At: req.Until.Add(-time.Hour), USDHour: 40},
	}})
	return nil
}

// TestFleetEstimateTakesTheDearestZone: a fleet may land in any zone of
// its types, so its estimate (what the budget checks) is priced at the
// dearest price in force, not at whichever zone's price changed last.
func TestFleetEstimateTakesTheDearestZone(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := zonesFake{ledgertest.New("aws")}
	svc := ledger.New(st, []domain.Provider{p}, ledger.Options{Now: func() time.Time { return t0 }, Timeout: time.Second})
	est := svc.EstimateFleet(context.Background(), domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2})
	if est.USDHour != 100 {
		t.Fatalf("estimate $%v/h (%s), want $100/h: 2 × the dearest zone's $50", est.USDHour, est.Basis)
	}
	// A fleet held to one zone is priced there.
	est = svc.EstimateFleet(context.Background(), domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"},
		Zones: []string{"us-east-1b"}, TargetCapacity: 2})
	if est.USDHour != 80 {
		t.Fatalf("estimate in us-east-1b $%v/h (%s), want $80/h", est.USDHour, est.Basis)
	}
	// The fake knows no on-demand price: an on-demand base makes the
	// cost unknown, not priced as spot.
	est = svc.EstimateFleet(context.Background(), domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"},
		TargetCapacity: 2, OnDemandBase: 1})
	if !math.IsNaN(est.USDHour) || !strings.Contains(est.Basis, "no on-demand price") {
		t.Fatalf("on-demand base at an unknown price: $%v/h (%s), want unknown", est.USDHour, est.Basis)
	}
}

// reuseFake behaves as the real providers may: it describes its pools
// (with their on-demand price) only on a back-fill, and reuses an event's
// slices once the sink returns.
type reuseFake struct{ *ledgertest.Fake }

func (r reuseFake) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	key := domain.PoolKey{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge"}
	if req.Backfill {
		pools := []domain.Pool{{Provider: "aws", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", OnDemandUSDHour: domain.Float(100)}}
		sink(domain.Event{Provider: "aws", Region: "us-east-1", Pools: pools})
		pools[0] = domain.Pool{}
	}
	buf := []domain.PricePoint{{Pool: key, At: req.Until.Add(-time.Hour), USDHour: 40}}
	sink(domain.Event{Provider: "aws", Region: "us-east-1", Points: buf})
	buf[0] = domain.PricePoint{}
	return nil
}

// TestFleetEstimateReadsEventsInTheirCall: the estimate asks for a
// back-fill (or it never learns the on-demand price) and reads each event
// while the sink is called, not after the provider reused its slices.
func TestFleetEstimateReadsEventsInTheirCall(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := ledger.New(st, []domain.Provider{reuseFake{ledgertest.New("aws")}}, ledger.Options{Now: func() time.Time { return t0 }, Timeout: time.Second})
	est := svc.EstimateFleet(context.Background(), domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"},
		TargetCapacity: 2, OnDemandBase: 1})
	if est.USDHour != 140 {
		t.Fatalf("estimate $%v/h (%s), want $140/h: $100 on-demand + $40 spot", est.USDHour, est.Basis)
	}
}

// TestFleetUnknownCostIsNotAPrice: a fleet launched while its prices are
// unknown (no budget to refuse it) is recorded with CostUSD 0, and
// CostUnknown says that 0 is no price; a priced fleet's row is not.
func TestFleetUnknownCostIsNotAPrice(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{}) // the fake knows no price
	ctx := context.Background()
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	row, err := f.st.Get(ctx, res.Row.ID)
	if err != nil || !math.IsNaN(res.Estimate.USDHour) || !math.IsNaN(row.USDHour) || !ledger.CostUnknown(row) {
		t.Fatalf("unpriced fleet: estimate %+v, row %+v, %v; want an unknown cost", res.Estimate, row, err)
	}
	f.fake.SpotUSDHour = 40
	spec.TargetCapacity = 3
	res, err = f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil || res.Row.USDHour != 120 || ledger.CostUnknown(res.Row) {
		t.Fatalf("priced fleet: row %+v, %v; want $120/h known", res.Row, err)
	}
}

// TestFleetCancelledBeforeTheCallIsFailed is TestCancelledBeforeTheCallIsFailed
// for a fleet launch.
func TestFleetCancelledBeforeTheCallIsFailed(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second,
		Logger: slog.New(cancelOnIntent{cancel: cancel})})
	f.fake.LaunchHook = func(ctx context.Context, _ domain.FleetSpec) error { return ctx.Err() }
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err == nil || res.Row.State != ledger.StateFailed || f.fake.Calls("LaunchFleet") != 0 {
		t.Fatalf("cancelled before the call: %v, row %+v, %d launches", err, res.Row, f.fake.Calls("LaunchFleet"))
	}
}

// TestFleetEstimateNamesItsPool: the estimate says which pool its spot
// price is (the dearest zone the fleet may land in) and which type its
// on-demand price is, not only the region.
func TestFleetEstimateNamesItsPool(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := ledger.New(st, []domain.Provider{zonesFake{ledgertest.New("aws")}}, ledger.Options{Now: func() time.Time { return t0 }, Timeout: time.Second})
	est := svc.EstimateFleet(context.Background(), domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2})
	if !strings.Contains(est.Basis, "$50.0000/h spot, p5.48xlarge us-east-1a") {
		t.Errorf("basis %q does not name the pool priced", est.Basis)
	}
	svc = ledger.New(st, []domain.Provider{reuseFake{ledgertest.New("aws")}}, ledger.Options{Now: func() time.Time { return t0 }, Timeout: time.Second})
	est = svc.EstimateFleet(context.Background(), domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"P5.48xlarge"},
		TargetCapacity: 2, OnDemandBase: 1})
	if !strings.Contains(est.Basis, "$40.0000/h spot, p5.48xlarge us-east-1a; $100.0000/h on-demand, P5.48xlarge") {
		t.Errorf("basis %q does not name the pool and the on-demand type", est.Basis)
	}
}

// validatingFake refuses every spec before any call, as a provider whose
// API would (AWS: a target beyond EC2 Fleet's quota).
type validatingFake struct{ *ledgertest.Fake }

func (validatingFake) ValidateFleet(spec domain.FleetSpec) (domain.FleetSpec, error) {
	return spec, fmt.Errorf("%w: target %d is over the API's limit", domain.ErrInvalidQuery, spec.TargetCapacity)
}

// TestInvalidFleetSpecWritesNoRow: a spec the provider's validator
// refuses is refused before the ledger's intent, and nothing is launched.
func TestInvalidFleetSpecWritesNoRow(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fake := validatingFake{ledgertest.New("aws")}
	fake.SpotUSDHour = 1
	svc := ledger.New(st, []domain.Provider{fake}, ledger.Options{Now: func() time.Time { return t0 }, Timeout: time.Second})
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2, Strategy: domain.StrategyPriceCapacityOptimized}
	_, err = svc.LaunchFleet(context.Background(), ledger.FleetRequest{Spec: spec})
	if !errors.Is(err, domain.ErrInvalidQuery) {
		t.Fatalf("err %v, want the validator's refusal", err)
	}
	rows, lerr := st.List(context.Background())
	if lerr != nil || len(rows) != 0 || fake.Fleets() != 0 {
		t.Errorf("rows %v (%v), fleets %d: want nothing written or launched", rows, lerr, fake.Fleets())
	}
}

// mixedSizesFake prices two types of different sizes in one zone: a
// 1-GPU H100 VM at $2/h and a 2-GPU one at $4.60/h.
type mixedSizesFake struct{ *ledgertest.Fake }

func (mixedSizesFake) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	pool := func(t string) domain.PoolKey {
		return domain.PoolKey{Provider: "azure", Region: "swedencentral", Zone: "3", InstanceType: t}
	}
	sink(domain.Event{Provider: "azure", Region: "swedencentral", Points: []domain.PricePoint{
		{Pool: pool("Standard_NC40ads_H100_v5"), At: req.Until.Add(-time.Hour), USDHour: 2},
		{Pool: pool("Standard_NC80adis_H100_v5"), At: req.Until.Add(-time.Hour), USDHour: 4.6},
	}})
	return nil
}

// TestFleetEstimatePerGPUHourCountsThePricedInstances: a fleet of a
// 1-GPU and a 2-GPU type is priced at the dearest pool (2 × $4.60/h);
// its $ per GPU-hour is that over the 4 GPUs of those instances
// ($2.30), not over the first type's 2 GPUs ($4.60, what the Fleet
// view's confirmation and `fleet launch` said).
func TestFleetEstimatePerGPUHourCountsThePricedInstances(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := ledger.New(st, []domain.Provider{mixedSizesFake{ledgertest.New("azure")}}, ledger.Options{Now: func() time.Time { return t0 }, Timeout: time.Second})
	spec := domain.FleetSpec{Provider: "azure", Region: "swedencentral", InstanceTypes: []string{"Standard_NC40ads_H100_v5", "Standard_NC80adis_H100_v5"},
		TargetCapacity: 2}
	est := svc.EstimateFleet(context.Background(), spec)
	if est.USDHour != 9.2 || est.PricedGPUs != 4 {
		t.Fatalf("estimate $%v/h over %v GPUs (%s); want $9.20/h over 4 GPUs", est.USDHour, est.PricedGPUs, est.Basis)
	}
	if got := est.USDHour / est.PricedGPUs; math.Abs(got-2.3) > 1e-9 {
		t.Fatalf("$%v per GPU-hour, want $2.30", got)
	}
	// A max price below every pool prices every instance at it, per GPU
	// at the fewest GPUs a type has (the dearest it could be).
	capUSD := 1.5
	spec.MaxPriceUSD = &capUSD
	est = svc.EstimateFleet(context.Background(), spec)
	if est.USDHour != 3 || est.PricedGPUs != 2 {
		t.Fatalf("capped: $%v/h over %v GPUs (%s)", est.USDHour, est.PricedGPUs, est.Basis)
	}
}
