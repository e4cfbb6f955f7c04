package cmd

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// usageFields are the README's `usage` JSON fields, in order.
var usageFields = []string{"id", "kind", "provider", "cloud", "region", "instance_type", "gpus", "actor", "start", "end",
	"booked_gpu_hours", "running_gpu_hours", "busy_gpu_hours", "interruptions", "cost_usd", "idle_usd", "metrics_source"}

// usageSession runs commands in one data dir (state persists between
// them, as for a user running one command after another).
func usageSession(t *testing.T) (run func(args ...string) (int, string, string), dataDir string) {
	t.Helper()
	isolate(t)
	dataDir = filepath.Join(t.TempDir(), "data")
	t.Setenv("GPUMARKET_DATA_DIR", dataDir)
	c := &cli{table: app.DefaultTable()}
	return func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := c.run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}, dataDir
}

// seedLedger writes ledger rows of the simulated market that ran in the
// past: a capacity block of 2 × p5.48xlarge over the last 30 hours (fee
// $4,000) whose instances report GPU metrics, and a fleet of 4 × g6.xlarge launched 20 hours ago, one of them
// on-demand (its spot ones ran only if the pools had capacity 20 hours
// ago, wall-clock time: the on-demand one always did).
func seedLedger(t *testing.T, dataDir string) (block, fleet ledger.Entry) {
	t.Helper()
	st, err := ledger.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	ctx := context.Background()
	block = ledger.Entry{ID: simMeteredID(t, "01JSEEDB"), Kind: ledger.KindBlock, Provider: "sim", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a",
		InstanceType: "p5.48xlarge", InstanceCount: 2, GPUCount: 16, Start: now.Add(-30 * time.Hour), End: now.Add(18 * time.Hour),
		CostUSD: 4000, State: ledger.StateActive, ProviderRef: "cr-0123456789abcdef0", Actor: "alice@lab", IdemKey: "cb-1",
		CreatedAt: now.Add(-40 * time.Hour)}
	if block, err = st.RecordIntent(ctx, block, nil); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(domain.FleetSpec{Provider: "sim", Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 4, OnDemandBase: 1})
	fleet = ledger.Entry{Kind: ledger.KindFleet, Provider: "sim", Cloud: "aws", Region: "us-east-1", InstanceType: "g6.xlarge",
		InstanceCount: 4, GPUCount: 4, USDHour: 1.2, CostNote: "estimate: first hour at current prices; a fleet bills until deleted",
		State: ledger.StateActive, ProviderRef: "fleet-11111111-2222-4333-8444-555555555555", Actor: "bob@lab", IdemKey: "tok-1",
		CreatedAt: now.Add(-20 * time.Hour), Request: spec}
	if fleet, err = st.RecordIntent(ctx, fleet, nil); err != nil {
		t.Fatal(err)
	}
	return block, fleet
}

// simMeteredID returns a ledger row id, in ledger.NewID's form, of a row
// whose instances the simulated market (of the default seed) reports
// GPU metrics for. Its usage follows the row's id: one id in eight is of
// instances that run no metrics agent, whose busy hours and idle cost
// are unknown, so a row given ledger.NewID's random id had none one run
// in eight (and `ledger` then had no idle block to warn of).
func simMeteredID(t *testing.T, prefix string) string {
	t.Helper()
	m := sim.New(sim.Options{Seed: config.Default().Sim.Seed})
	at := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		id := prefix + fmt.Sprintf("%0*d", 26-len(prefix), i)
		rep, err := m.Usage(context.Background(), domain.UsageQuery{Ref: id, Kind: domain.KindBlock, Region: "us-east-1",
			Zone: "us-east-1a", InstanceType: "p5.48xlarge", InstanceCount: 1, Start: at, End: at.Add(2 * time.Hour), From: at, To: at.Add(2 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Source != "" {
			return id
		}
	}
	t.Fatalf("no id of the form %s… has metrics in the simulated market", prefix)
	return ""
}

func TestUsageJSONOnTheSimulatedMarket(t *testing.T) {
	run, dir := usageSession(t)
	block, fleet := seedLedger(t, dir)
	code, out, errOut := run("usage", "--since", "7d", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, keys := jsonRows(t, out)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want the block and the fleet: %s", len(rows), out)
	}
	for i, r := range rows {
		if len(r) != len(usageFields) {
			t.Errorf("row %d has %d fields, want %d: %v", i, len(r), len(usageFields), r)
		}
		for _, f := range usageFields {
			if _, ok := r[f]; !ok {
				t.Errorf("row %d lacks %q", i, f)
			}
		}
		// Field order is the contract's.
		if strings.Join(keys[i], ",") != strings.Join(usageFields, ",") {
			t.Errorf("row %d fields %v, want %v", i, keys[i], usageFields)
		}
		booked, running := r["booked_gpu_hours"].(float64), r["running_gpu_hours"].(float64)
		if busy, ok := r["busy_gpu_hours"].(float64); ok {
			if !(busy <= running && running <= booked) {
				t.Errorf("row %v: busy %v ≤ running %v ≤ booked %v does not hold", r["id"], busy, running, booked)
			}
		} else if r["metrics_source"] != nil || r["idle_usd"] != nil {
			t.Errorf("row %v: busy null but metrics_source %v idle %v", r["id"], r["metrics_source"], r["idle_usd"])
		}
	}
	byID := map[any]map[string]any{}
	for _, r := range rows {
		byID[r["id"]] = r
	}
	b := byID[block.ID]
	if b == nil || b["kind"] != "block" || b["gpus"] != 16.0 || b["actor"] != "alice@lab" || b["cost_usd"] != 4000.0 {
		t.Fatalf("block row: %v", b)
	}
	// 16 GPUs for the 30 hours the block has run (clocks move while
	// the command runs: allow a minute).
	if bk := b["booked_gpu_hours"].(float64); math.Abs(bk-16*30) > 16.0/60 {
		t.Errorf("block booked %v GPU-hours, want 480", bk)
	}
	if busy, ok := b["busy_gpu_hours"].(float64); ok {
		// idle_usd = price × (booked − busy): the fee over the window's
		// 16 × 48 GPU-hours is the price.
		price := 4000.0 / (16 * 48)
		want := price * (b["booked_gpu_hours"].(float64) - busy)
		if idle := b["idle_usd"].(float64); math.Abs(idle-want) > 0.02 {
			t.Errorf("block idle_usd %v, want price × (booked − busy) = %v", idle, want)
		}
	}
	f := byID[fleet.ID]
	if f == nil || f["kind"] != "fleet" || f["interruptions"] == nil || f["cost_usd"] == nil {
		t.Fatalf("fleet row: %v", f)
	}
	// At most 20 h (and the minute the command may take) of one
	// g6.xlarge on-demand at its list price, $0.8048/h, and three spot
	// ones at the simulated spot prices, at least 60 % below it.
	if c := f["cost_usd"].(float64); !(c > 0) || c > (20+1.0/60)*0.8048*(1+3*0.4) {
		t.Errorf("fleet cost so far %v: want 20 h of one g6.xlarge on-demand and up to 3 spot", c)
	}
	if !strings.Contains(errOut, "SIMULATED MARKET") {
		t.Errorf("stderr %q lacks the SIMULATED MARKET line", errOut)
	}
}

func TestUsageTotalsByDayAndActor(t *testing.T) {
	run, dir := usageSession(t)
	seedLedger(t, dir)
	code, out, errOut := run("usage", "--by", "actor", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	actors, _ := jsonRows(t, out)
	if len(actors) != 2 {
		t.Fatalf("actors: %v", actors)
	}
	for _, a := range actors {
		if a["actor"] != "alice@lab" && a["actor"] != "bob@lab" || a["rows"] != 1.0 || a["booked_gpu_hours"] == nil {
			t.Errorf("actor total %v", a)
		}
	}
	code, out, errOut = run("usage", "--by", "day", "-o", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 3 || strings.Join(recs[0], ",") != "day,rows,booked_gpu_hours,running_gpu_hours,busy_gpu_hours,interruptions,cost_usd,idle_usd,rows_without_metrics" {
		t.Fatalf("csv by day: %q", recs)
	}
	for _, r := range recs[1:] {
		if _, err := time.Parse("2006-01-02", r[0]); err != nil {
			t.Errorf("day %q: %v", r[0], err)
		}
	}
}

func TestUsageTableMostIdleFirstAndSections(t *testing.T) {
	run, dir := usageSession(t)
	seedLedger(t, dir)
	code, out, errOut := run("usage")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"SIMULATED MARKET", "BOOKED GPU-H", "DAY (UTC)", "ACTOR", "ALL", "alice@lab", "bob@lab"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestUsageWithNoMetricsSaysSo(t *testing.T) {
	// A row whose provider is not reachable in this run has no metrics:
	// busy and idle null, never 0 % busy, and the rest of the report
	// still prints.
	run, dir := usageSession(t)
	block, _ := seedLedger(t, dir)
	st, err := ledger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	block.Provider = "gone"
	if _, err := st.Update(context.Background(), block); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, out, errOut := run("usage", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != 2 {
		t.Fatalf("rows: %v", rows)
	}
	for _, r := range rows {
		if r["id"] != block.ID {
			continue
		}
		if r["busy_gpu_hours"] != nil || r["metrics_source"] != nil || r["idle_usd"] != nil || r["running_gpu_hours"] != nil {
			t.Errorf("unreachable provider's row: %v, want busy, running, idle and metrics_source null", r)
		}
		if r["cost_usd"] != 4000.0 {
			t.Errorf("cost %v: the fee is known without the provider", r["cost_usd"])
		}
	}
	if !strings.Contains(errOut, "gone") {
		t.Errorf("stderr does not say why: %q", errOut)
	}
}

func TestUsageFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"usage", "--since", "3x"}, "--since"},
		{[]string{"usage", "--since", "91d"}, "--since"},
		{[]string{"usage", "--by", "week"}, "--by \"week\": want row, day or actor"},
		{[]string{"usage", "-o", "yaml"}, "-o"},
		{[]string{"usage", "--timeout", "0s"}, "--timeout"},
	} {
		code, _, errOut := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want 2 naming %s", c.args, code, errOut, c.want)
		}
	}
}

func TestLedgerWarnsOfIdleCapacity(t *testing.T) {
	run, dir := usageSession(t)
	seedLedger(t, dir)
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, "budget: {max_idle_pct: 1}\n")
	t.Setenv("GPUMARKET_CONFIG", path)
	code, _, errOut := run("ledger", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "warning:") || !strings.Contains(errOut, "budget.max_idle_pct 1%") {
		t.Errorf("ledger with max_idle_pct 1 printed no idle warning: %q", errOut)
	}
	writeFile(t, path, "budget: {max_idle_pct: 0}\n")
	if _, _, errOut := run("ledger", "-o", "json"); strings.Contains(errOut, "max_idle_pct") {
		t.Errorf("max_idle_pct 0 (off) warned: %q", errOut)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// failingUsageSim is the simulated market whose usage reads fail once
// fail is set: the cloud that no longer answers for a row (Azure's
// deleted reservation, expired credentials).
type failingUsageSim struct {
	*sim.Market
	fail *atomic.Bool
}

func (f failingUsageSim) Usage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	if f.fail.Load() {
		return domain.UsageReport{}, errors.New("sim: usage of " + q.Ref + ": the reservation is not there any more")
	}
	return f.Market.Usage(ctx, q)
}

// TestUsageKeptWhenTheProviderFails: `usage -o json` run twice on the
// simulated market. The first run reads the rows' usage and keeps it in
// the ledger; at the second the provider fails for every row, and the
// running and busy GPU-hours are those kept — not null — with a note on
// stderr saying when they were read and why the live read failed. A row
// added after the first run has nothing kept, and its figures are
// unknown as before.
func TestUsageKeptWhenTheProviderFails(t *testing.T) {
	isolate(t)
	dir := filepath.Join(t.TempDir(), "data")
	t.Setenv("GPUMARKET_DATA_DIR", dir)
	fail := &atomic.Bool{}
	table := app.DefaultTable()
	for i, r := range table {
		if r.Desc.Name == "sim" {
			table[i].Build = func(_ context.Context, e *app.Settings) (domain.Provider, error) {
				return failingUsageSim{Market: sim.New(sim.Options{Seed: e.Config.Sim.Seed}), fail: fail}, nil
			}
		}
	}
	c := &cli{table: table}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := c.run(context.Background(), args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	block, fleet := seedLedger(t, dir)
	code, out, errOut := run("usage", "-o", "json")
	if code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	first, _ := jsonRows(t, out)
	st, err := ledger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{block.ID, fleet.ID} {
		if rep, _, ok, err := st.LoadUsage(context.Background(), id); !ok || err != nil || len(rep.Instances) == 0 {
			t.Fatalf("row %s: nothing kept after the first run (%v, %v)", id, ok, err)
		}
	}
	late := block
	late.ID, late.IdemKey, late.ProviderRef = simMeteredID(t, "01JSEEDL"), "cb-late", "cr-0fedcba9876543210"
	if _, err := st.RecordIntent(context.Background(), late, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()

	fail.Store(true)
	code, out, errOut = run("usage", "-o", "json")
	if code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	second, _ := jsonRows(t, out)
	byID := func(rows []map[string]any) map[any]map[string]any {
		m := map[any]map[string]any{}
		for _, r := range rows {
			m[r["id"]] = r
		}
		return m
	}
	was, now := byID(first), byID(second)
	for _, id := range []string{block.ID, fleet.ID} {
		a, b := was[id], now[id]
		if a == nil || b == nil {
			t.Fatalf("row %s missing: %v / %v", id, a, b)
		}
		// Counted as last read: the same running and busy GPU-hours,
		// though the booked ones grew with the clock.
		// (One row id in eight is of simulated instances without
		// metrics: busy and metrics_source are null at both runs.)
		if b["running_gpu_hours"] == nil || b["interruptions"] == nil {
			t.Errorf("row %s: running %v interruptions %v, want the kept figures", id, b["running_gpu_hours"], b["interruptions"])
		}
		for _, f := range []string{"running_gpu_hours", "busy_gpu_hours", "interruptions", "metrics_source"} {
			if fmt.Sprint(a[f]) != fmt.Sprint(b[f]) {
				t.Errorf("row %s %s: %v at the first run, %v when the provider failed: want the kept figure", id, f, a[f], b[f])
			}
		}
	}
	if !strings.Contains(errOut, "figures as last read at ") || !strings.Contains(errOut, "the reservation is not there any more") {
		t.Errorf("stderr does not say the figures are kept, or why: %q", errOut)
	}
	if r := now[late.ID]; r == nil || r["running_gpu_hours"] != nil || r["busy_gpu_hours"] != nil {
		t.Errorf("a row never read has kept figures: %v", r)
	}
}

// A partial-GPU size's count is said as a person reads it (0.33, not
// 0.3333333333333333) in the usage table.
func TestUsageTableSaysPartialGPUs(t *testing.T) {
	run, dir := usageSession(t)
	st, err := ledger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.RecordIntent(context.Background(), ledger.Entry{Kind: ledger.KindBlock, Provider: "sim", Cloud: "azure", Region: "eastus",
		InstanceType: "Standard_NV6ads_A10_v5", InstanceCount: 2, GPUCount: 2.0 / 6, Start: now.Add(-3 * time.Hour), End: now.Add(time.Hour),
		CostUSD: 4, State: ledger.StateActive, ProviderRef: "cr-partial", Actor: "alice@lab", IdemKey: "cb-partial", CreatedAt: now.Add(-4 * time.Hour)}, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, out, errOut := run("usage")
	if code != 0 || !strings.Contains(out, " 0.33 ") || strings.Contains(out, "0.333") {
		t.Errorf("exit %d, stderr %s, table:\n%s", code, errOut, out)
	}
}
