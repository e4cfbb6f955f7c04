package cmd

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// pricesFields is DESIGN.md's contract for `prices` rows, in order.
var pricesFields = []string{"provider", "cloud", "region", "zone", "instance_type", "gpu_model", "gpu_count",
	"gpu_memory_gib", "spot_usd_hour", "spot_usd_gpu_hour", "on_demand_usd_hour", "savings_pct",
	"window_min_usd_hour", "window_avg_usd_hour", "window_max_usd_hour", "interruption", "placement_score",
	"placement_note", "effective_usd_gpu_hour", "observed_at", "as_of", "cached"}

var historyFields = []string{"provider", "cloud", "region", "zone", "instance_type", "at", "usd_hour"}

// fakeMarket is a provider with three pools of known prices, relative to
// a fixed now, and optionally a failing region.
type fakeMarket struct {
	now        time.Time
	failRegion string
	failAll    bool
}

func (f *fakeMarket) Name() string { return "fake" }
func (f *fakeMarket) Describe() domain.Descriptor {
	return domain.Descriptor{Name: "fake"}
}

func (f *fakeMarket) Fetch(_ context.Context, req domain.FetchRequest, sink domain.Sink) error {
	if f.failAll {
		return errors.New("credentials expired")
	}
	h100, _ := domain.NewInterruption(">20%", "test", time.Time{})
	a := domain.Pool{Provider: "fake", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a",
		InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: 8, MemoryGiB: 80},
		OnDemandUSDHour: domain.Float(98.32), Interruption: h100, PlacementScore: domain.Int(7)}
	b := domain.Pool{Provider: "fake", Cloud: domain.CloudAzure, Region: "eastus",
		InstanceType: "Standard_NC24ads_A100_v4", GPU: domain.GPUSpec{Model: "A100", Count: 1, MemoryGiB: 80}}
	c := domain.Pool{Provider: "fake", Cloud: domain.CloudAWS, Region: "us-west-2", Zone: "us-west-2b",
		InstanceType: "g5.xlarge", GPU: domain.GPUSpec{Model: "A10G", Count: 1, MemoryGiB: 24}}
	at := func(h float64) time.Time { return f.now.Add(time.Duration(-h * float64(time.Hour))) }
	for _, ev := range []domain.Event{
		{Region: "us-east-1", Pools: []domain.Pool{a}, Points: []domain.PricePoint{
			{Pool: a.Key(), At: at(48), USDHour: 30}, {Pool: a.Key(), At: at(10), USDHour: 20}, {Pool: a.Key(), At: at(1), USDHour: 25}}},
		{Region: "eastus", Pools: []domain.Pool{b}, Points: []domain.PricePoint{{Pool: b.Key(), At: at(2), USDHour: 1.5}}},
		{Region: "us-west-2", Pools: []domain.Pool{c}},
	} {
		if ev.Region == f.failRegion {
			sink(domain.Event{Region: ev.Region, Err: errors.New("UnauthorizedOperation: not allowed")})
			continue
		}
		sink(ev)
	}
	return nil
}

func testEnv(t testing.TB, q domain.Query) (*env, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var out, errOut bytes.Buffer
	cfg := config.Default()
	if q.Window == 0 {
		q.Window = 24 * time.Hour
	}
	return &env{Settings: app.Settings{Config: cfg, Query: q, Log: slogDiscard()},
		out: &out, errOut: &errOut, stdin: strings.NewReader("")}, &out, &errOut
}

func fakeSnapshot(t *testing.T, e *env, f *fakeMarket) *feed.Snapshot {
	t.Helper()
	snap, err := e.snapshotOf(context.Background(), []domain.Provider{f}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestPriceRowsJSONContract(t *testing.T) {
	e, out, _ := testEnv(t, domain.Query{})
	f := &fakeMarket{now: time.Now()}
	snap := fakeSnapshot(t, e, f)
	rows := e.priceRows(snap)
	if err := writeRows(out, "json", rows); err != nil {
		t.Fatal(err)
	}
	var got []map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("got %d rows, want 3:\n%s", len(got), out)
	}
	for _, r := range got {
		var keys []string
		for k := range r {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Clone(pricesFields)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Errorf("keys %v, want %v", keys, want)
		}
	}
	// key order in the text is the contract's order
	first := out.String()[:strings.Index(out.String(), "}")]
	last := -1
	for _, k := range pricesFields {
		i := strings.Index(first, `"`+k+`":`)
		if i < last {
			t.Errorf("key %s out of order", k)
		}
		last = i
	}

	// Rows are sorted by EFF: the A100 pool (1 GPU, no bucket: the class
	// prior) before the H100 pool (">20%"), the unpriced pool last.
	byType := func(typ string) map[string]json.RawMessage {
		for _, r := range got {
			if string(r["instance_type"]) == `"`+typ+`"` {
				return r
			}
		}
		t.Fatalf("no %s row", typ)
		return nil
	}
	if string(got[0]["instance_type"]) != `"Standard_NC24ads_A100_v4"` || string(got[1]["instance_type"]) != `"p5.48xlarge"` {
		t.Errorf("rows in order %s, %s; want the A100 pool first (EFF 1.82 < 5.01)", got[0]["instance_type"], got[1]["instance_type"])
	}
	// the H100 pool, every value known
	a := byType("p5.48xlarge")
	want := map[string]string{
		"provider": `"fake"`, "cloud": `"aws"`, "region": `"us-east-1"`, "zone": `"us-east-1a"`,
		"instance_type": `"p5.48xlarge"`, "gpu_model": `"H100"`, "gpu_count": "8", "gpu_memory_gib": "80",
		"spot_usd_hour": "25", "spot_usd_gpu_hour": "3.125", "on_demand_usd_hour": "98.32",
		"savings_pct": "74.57", "window_min_usd_hour": "20", "window_max_usd_hour": "30",
		"interruption": `">20%"`, "placement_score": "7",
	}
	for k, v := range want {
		if string(a[k]) != v {
			t.Errorf("%s = %s, want %s", k, a[k], v)
		}
	}
	// (14 h at 30, 9 h at 20, 1 h at 25) / 24 h, give or take the
	// milliseconds between the fake's clock and the snapshot's
	var avg float64
	json.Unmarshal(a["window_avg_usd_hour"], &avg)
	if math.Abs(avg-625.0/24) > 1e-3 {
		t.Errorf("window_avg_usd_hour = %v, want time-weighted %v", avg, 625.0/24)
	}
	// EFF for the default job (8 GPUs × 24 h, checkpoint 15m, changeover
	// 12m) on one p5.48xlarge: the H100 prior at ">20%" is λ = 0.8 × 1.8 =
	// 1.44/h; η = e^(−λd)·λc/(e^(λc)−1) = 0.622884; the last run keeps
	// r = η/λ = 0.432559 h; paid = (24 − r)/η + d + r = 38.468532 h, so
	// 3.125 $/GPU-h × 38.468532 / 24.
	var gotEff float64
	json.Unmarshal(a["effective_usd_gpu_hour"], &gotEff)
	if want := 5.008923; math.Abs(gotEff-want) > 1e-5 {
		t.Errorf("effective = %v, want %v", gotEff, want)
	}
	if gotEff < 1.05*3.125 {
		t.Errorf("effective %v is within 5%% of the plain price for a >20%% pool", gotEff)
	}
	var obs time.Time
	if err := json.Unmarshal(a["observed_at"], &obs); err != nil || !strings.HasSuffix(string(a["observed_at"]), `Z"`) {
		t.Errorf("observed_at = %s, want RFC 3339 UTC", a["observed_at"])
	}

	// the Azure pool knows no on-demand price, no interruption, no zone;
	// its EFF comes from the A100 prior (0.6/h at the middle bucket) for 8
	// instances of 1 GPU: 1.5 × 29.098 / 24.
	b := byType("Standard_NC24ads_A100_v4")
	var bEff float64
	if err := json.Unmarshal(b["effective_usd_gpu_hour"], &bEff); err != nil || math.Abs(bEff-1.818641) > 1e-5 {
		t.Errorf("azure effective = %s, want 1.818641 (the A100 prior)", b["effective_usd_gpu_hour"])
	}
	for _, k := range []string{"zone", "on_demand_usd_hour", "savings_pct", "interruption", "placement_score"} {
		if string(b[k]) != "null" {
			t.Errorf("azure %s = %s, want null", k, b[k])
		}
	}
	if string(b["spot_usd_hour"]) != "1.5" {
		t.Errorf("azure spot = %s", b["spot_usd_hour"])
	}
	// row 3: no price at all
	c := got[2]
	for _, k := range []string{"spot_usd_hour", "spot_usd_gpu_hour", "window_min_usd_hour", "window_avg_usd_hour", "window_max_usd_hour", "observed_at"} {
		if string(c[k]) != "null" {
			t.Errorf("unpriced %s = %s, want null", k, c[k])
		}
	}
}

func TestPriceRowsFilterAndSort(t *testing.T) {
	e, _, _ := testEnv(t, domain.Query{GPUs: []string{"H100"}})
	snap := fakeSnapshot(t, e, &fakeMarket{now: time.Now()})
	rows := e.priceRows(snap)
	if len(rows) != 1 || rows[0].GPU.Model != "H100" {
		t.Errorf("--gpu H100 gave %d rows", len(rows))
	}
	e.Query = domain.Query{Regions: []string{"eastus", "us-west-2"}, Window: 24 * time.Hour}
	rows = e.priceRows(snap)
	if len(rows) != 2 || rows[0].Region != "eastus" || rows[1].Region != "us-west-2" {
		t.Errorf("region filter gave %+v", rows)
	}
}

func TestPricesRegionErrors(t *testing.T) {
	e, _, errOut := testEnv(t, domain.Query{})
	snap := fakeSnapshot(t, e, &fakeMarket{now: time.Now(), failRegion: "eastus"})
	if got := errOut.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "fake eastus: UnauthorizedOperation") {
		t.Errorf("stderr %q, want one warning naming the region", got)
	}
	if n := len(e.priceRows(snap)); n != 2 {
		t.Errorf("got %d rows, want the 2 that answered", n)
	}

	e, _, _ = testEnv(t, domain.Query{})
	_, err := e.snapshotOf(context.Background(), []domain.Provider{&fakeMarket{now: time.Now(), failAll: true}}, time.Minute)
	if err == nil {
		t.Error("no source answered, yet no error")
	}
}

func TestPricesCSVHeader(t *testing.T) {
	e, out, _ := testEnv(t, domain.Query{})
	snap := fakeSnapshot(t, e, &fakeMarket{now: time.Now()})
	if err := writeRows(out, "csv", e.priceRows(snap)); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs[0], pricesFields) {
		t.Errorf("header %v, want %v", recs[0], pricesFields)
	}
	if len(recs) != 4 {
		t.Errorf("%d records, want header + 3", len(recs))
	}
}

// historyOf runs `history`'s writer with -o json and reads its rows back.
func historyOf(t *testing.T, e *env, snap *feed.Snapshot, instanceType string) ([]historyRow, []map[string]any) {
	t.Helper()
	var out bytes.Buffer
	e.out = &out
	if err := e.writeHistory(snap, instanceType, "json"); err != nil {
		t.Fatal(err)
	}
	var rows []historyRow
	var raw []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	return rows, raw
}

func TestHistoryRows(t *testing.T) {
	e, _, _ := testEnv(t, domain.Query{Window: 24 * time.Hour})
	snap := fakeSnapshot(t, e, &fakeMarket{now: time.Now()})
	rows, got := historyOf(t, e, snap, "P5.48XLARGE")
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3 (window start + 2 changes): %+v", len(rows), rows)
	}
	start := snap.Taken.Add(-24 * time.Hour).Unix()
	if rows[0].At.Unix() != start || rows[0].USDHour != 30 {
		t.Errorf("first row %+v, want the price in force (30) at the window start", rows[0])
	}
	if rows[1].USDHour != 20 || rows[2].USDHour != 25 || !rows[1].At.Before(rows[2].At) {
		t.Errorf("rows %+v", rows)
	}
	for _, r := range got {
		if len(r) != len(historyFields) {
			t.Errorf("row %v, want keys %v", r, historyFields)
		}
		for _, k := range historyFields {
			if _, ok := r[k]; !ok {
				t.Errorf("row lacks %s", k)
			}
		}
	}
	// a window of 1h holds only the newest change: the window start row
	// carries the 20 in force then
	e.Query.Window = 90 * time.Minute
	rows, _ = historyOf(t, e, snap, "p5.48xlarge")
	if len(rows) != 2 || rows[0].USDHour != 20 || rows[1].USDHour != 25 {
		t.Errorf("90m window: %+v", rows)
	}
}

func TestBanner(t *testing.T) {
	e, out, errOut := testEnv(t, domain.Query{Providers: []string{"sim"}})
	a := newCLI().appOf(context.Background(), e)
	a.banner("json")
	if out.Len() != 0 || !strings.Contains(errOut.String(), "SIMULATED MARKET") {
		t.Errorf("json: stdout %q stderr %q, want the banner on stderr", out, errOut)
	}
	out.Reset()
	errOut.Reset()
	a.banner("table")
	if !strings.HasPrefix(out.String(), "SIMULATED MARKET") || errOut.Len() != 0 {
		t.Errorf("table: stdout %q, want the banner first", out)
	}
	e, out, errOut = testEnv(t, domain.Query{Providers: []string{"aws"}})
	newCLI().appOf(context.Background(), e).banner("table")
	if out.Len()+errOut.Len() != 0 {
		t.Error("banner without the sim")
	}
}

var _ io.Writer = (*bytes.Buffer)(nil)

func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// allHistory lists every matching pool's price points in the window at
// once, by pool key then time: what writeHistory streams pool by pool.
func allHistory(e *env, snap *feed.Snapshot) []historyRow {
	from, to := e.windowOf(snap)
	var rows []historyRow
	for i := range snap.Pools { // snapshot pools are sorted by key
		if pv := &snap.Pools[i]; e.wantHistory(pv, "") {
			rows = poolHistory(rows, pv, from, to)
		}
	}
	return rows
}

func TestWriteHistoryStreamsSameAsRows(t *testing.T) {
	for _, format := range []string{"json", "csv", "table"} {
		e, out, _ := testEnv(t, domain.Query{Window: 48 * time.Hour})
		snap := fakeSnapshot(t, e, &fakeMarket{now: time.Now()})
		if err := e.writeHistory(snap, "", format); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := writeRows(&want, format, allHistory(e, snap)); err != nil {
			t.Fatal(err)
		}
		if out.String() != want.String() {
			t.Errorf("%s: streamed\n%s\nwant\n%s", format, out, want.String())
		}
	}
}

// stuckMarket never finishes its back-fill.
type stuckMarket struct{}

func (stuckMarket) Name() string { return "stuck" }
func (stuckMarket) Describe() domain.Descriptor {
	return domain.Descriptor{Name: "stuck"}
}
func (stuckMarket) Fetch(ctx context.Context, _ domain.FetchRequest, _ domain.Sink) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestPricesTimeoutNamesTheFlag(t *testing.T) {
	e, _, _ := testEnv(t, domain.Query{})
	_, err := e.snapshotOf(context.Background(), []domain.Provider{stuckMarket{}}, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "--timeout") {
		t.Errorf("err = %v, want one that says to raise --timeout", err)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		t.Error("a timeout is a runtime failure (exit 1), not bad usage")
	}
}

func TestPricesOneSourceFailsOtherAnswers(t *testing.T) {
	e, _, errOut := testEnv(t, domain.Query{})
	snap, err := e.snapshotOf(context.Background(), []domain.Provider{
		&fakeMarket{now: time.Now(), failAll: true},
		namedMarket{"other", &fakeMarket{now: time.Now()}},
	}, time.Minute)
	if err != nil {
		t.Fatalf("one source answered, yet: %v", err)
	}
	if !strings.Contains(errOut.String(), "fake: credentials expired") {
		t.Errorf("stderr %q, want a warning naming the failed source", errOut)
	}
	if len(snap.Pools) == 0 {
		t.Error("no pools from the source that answered")
	}
}

// namedMarket renames a provider, and its pools, so two fakes can run side
// by side.
type namedMarket struct {
	name string
	p    domain.Provider
}

func (n namedMarket) Name() string { return n.name }
func (n namedMarket) Describe() domain.Descriptor {
	return domain.Descriptor{Name: n.name}
}
func (n namedMarket) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	return n.p.Fetch(ctx, req, func(ev domain.Event) {
		for i := range ev.Pools {
			ev.Pools[i].Provider = n.name
		}
		for i := range ev.Points {
			ev.Points[i].Pool.Provider = n.name
		}
		sink(ev)
	})
}

// notingMarket adds a status note to every event of a provider.
type notingMarket struct {
	domain.Provider
	note string
}

func (n notingMarket) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	return n.Provider.Fetch(ctx, req, func(ev domain.Event) {
		ev.Note = n.note
		sink(ev)
	})
}

func TestPricesSaysSourceNotes(t *testing.T) {
	e, _, errOut := testEnv(t, domain.Query{})
	note := "list prices only: spot history, eviction rates and actions need a signed-in Azure account"
	if _, err := e.snapshotOf(context.Background(), []domain.Provider{notingMarket{&fakeMarket{now: time.Now()}, note}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := errOut.String(); !strings.Contains(got, "gpumarket: fake: "+note+"\n") {
		t.Errorf("stderr %q, want the source's note", got)
	}
}
