package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// planFields are the JSON fields of a plan row, in order.
var planFields = []string{"strategy", "provider", "cloud", "regions", "instance_type", "instances", "gpus", "start", "end", "end_p95",
	"expected_cost_usd", "p95_cost_usd", "on_time_pct", "expected_interruptions", "usd_per_useful_gpu_hour", "offering_id", "over_cap", "assumptions"}

func TestPlanUsageErrors(t *testing.T) {
	ok := []string{"plan", "--gpus", "16", "--gpu", "H100", "--hours", "48", "--start", "+1d", "--deadline", "+4d"}
	with := func(extra ...string) []string { return append(slices.Clone(ok), extra...) }
	cases := []struct {
		args []string
		want string // what the one line must name
	}{
		{[]string{"plan", "--deadline", "+3d"}, "--gpu is required"},
		{[]string{"plan", "--gpu", "H100"}, "--deadline is required"},
		{with("--deadline", "soon"), "--deadline"},
		{with("--start", "tomorrow"), "--start"},
		{with("--gpus", "0"), "--gpus"},
		{with("--gpus", "-3"), "--gpus"},
		{with("--gpus", "x"), "--gpus"},
		{with("--hours", "0"), "--hours"},
		{with("--hours", "abc"), "--hours"},
		{with("--hours", "96"), "--deadline"}, // before start + hours
		// A window in the past (a one-digit month typo) is named, not planned.
		{with("--start", pastDay(30)+" 09:00", "--deadline", pastDay(28)+" 09:00"), "--start " + pastDay(30) + " 09:00"},
		{with("--start", "", "--deadline", pastDay(1)+" 09:00"), "--deadline " + pastDay(1) + " 09:00"},
		// A workshop whose changeover leaves less than its hours.
		{with("--hours", "3", "--start", "+1d", "--deadline", "+27h", "--changeover", "12m", "--no-checkpoint"),
			"no strategy fits: the 12m changeover leaves 2h48m for 3h of work"},
		{with("--gpu", "H900"), "--gpu"}, // not a GPU at all
		{with("--on-time", "120"), "--on-time"},
		{with("--runs", "0"), "--runs"},
		{with("--checkpoint", "15m", "--no-checkpoint"), "--checkpoint"},
		{with("--changeover", "-1m"), "--changeover"},
		{with("--changeover", "soon"), "--changeover"},
		{with("-o", "yaml"), "-o"},
		{with("--timeout", "0s"), "--timeout"},
		// A catalog GPU the market does not sell there: found after the
		// market is read, still bad usage.
		{with("--gpu", "V100", "--region", "eastus"), "--gpu V100: no pool of the market in eastus sells V100"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, c.args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "gpumarket: ") || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 2 and one line naming %s", code, stdout, stderr, c.want)
			}
		})
	}
}

// pastDay is the local date days ago, as people type it.
func pastDay(days int) string { return time.Now().AddDate(0, 0, -days).Format("2006-01-02") }

// runIn runs a command line in an isolated data dir shared by the calls.
func runIn(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestPlanOnSim is `plan`'s acceptance through the command: 16 H100 for
// 48 h from tomorrow 09:00 (local), due three days later, on the
// simulated market, as JSON with the contract's fields; the block it
// proposes is bookable by id.
func TestPlanOnSim(t *testing.T) {
	clearOfSimDayTurns(t)
	isolate(t)
	// No budget cap, so the dry run below is about the offering only.
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "gpumarket")
	if err := os.MkdirAll(cfg, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(cfg, "config.yaml"), []byte("budget: {max_booking_usd: 0, max_daily_usd: 0}\n"), 0o600)
	tomorrow := time.Now().AddDate(0, 0, 1).Format("2006-01-02") + " 09:00"
	start, _ := time.ParseInLocation("2006-01-02 15:04", tomorrow, time.Local)
	deadline := start.Add(72 * time.Hour).Format(time.RFC3339)
	code, stdout, stderr := runIn("plan", "--gpus", "16", "--gpu", "H100", "--hours", "48", "--start", tomorrow, "--deadline", deadline,
		"--runs", "2000", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stderr, "SIMULATED MARKET") {
		t.Errorf("stderr %q, want the SIMULATED MARKET line", stderr)
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(stdout), &raw); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, stdout)
	}
	first := stdout[:strings.Index(stdout, "}")]
	last := -1
	for _, k := range planFields {
		i := strings.Index(first, `"`+k+`":`)
		if i < 0 || i < last {
			t.Errorf("field %s missing or out of order", k)
		}
		last = i
	}
	type row struct {
		Strategy, Cloud, Regions, InstanceType string
		Instances                              int
		GPUs                                   float64
		Start, End                             time.Time
		ExpectedCostUSD                        float64 `json:"expected_cost_usd"`
		P95CostUSD                             float64 `json:"p95_cost_usd"`
		OnTimePct                              float64 `json:"on_time_pct"`
		USDPerUsefulGPUHour                    float64 `json:"usd_per_useful_gpu_hour"`
		OfferingID                             *string `json:"offering_id"`
		Assumptions                            string
	}
	var rows []row
	json.Unmarshal([]byte(stdout), &rows)
	if len(rows) != len(raw) || len(rows) < 6 {
		t.Fatalf("%d rows", len(rows))
	}
	seen := map[string]bool{}
	var block, net *row
	azure := false
	eight := []row{}
	for i := range rows {
		r := &rows[i]
		seen[r.Strategy] = true
		if r.Cloud == "azure" {
			azure = true
		}
		if len(raw[i]) != len(planFields) || r.Assumptions == "" || r.GPUs < 16 {
			t.Errorf("row %d: %+v", i, r)
		}
		switch r.Strategy {
		case "capacity-block":
			if block == nil {
				block = r
			}
		case "spot+od-planner":
			net = r
		case "spot-one-pool":
			if r.GPUs/float64(r.Instances) == 8 {
				eight = append(eight, *r)
			}
		}
		// On time at least 95 %: cheapest first; then the rest.
		if i > 0 {
			p := rows[i-1]
			if (r.OnTimePct >= 95) && (p.OnTimePct < 95 || p.ExpectedCostUSD > r.ExpectedCostUSD) {
				t.Errorf("row %d (%s) out of order after %s", i, r.Strategy, p.Strategy)
			}
		}
	}
	for _, s := range []string{"capacity-block", "on-demand", "spot-one-pool", "spot-multi-pool", "spot+od-planner"} {
		if !seen[s] {
			t.Errorf("no %s row", s)
		}
	}
	if !azure || block == nil || net == nil || len(eight) == 0 {
		t.Fatalf("azure %v block %v net %v eight-GPU single pool %v", azure, block, net, eight)
	}
	if hours := block.End.Sub(block.Start).Hours(); hours < 49 || block.Cloud != "aws" || block.OfferingID == nil ||
		!strings.Contains(block.Assumptions, "paid in full") || block.USDPerUsefulGPUHour*16*48 < block.ExpectedCostUSD*0.999 {
		t.Errorf("block %+v", block)
	}
	for _, e := range eight {
		if e.OnTimePct > net.OnTimePct-30 {
			t.Errorf("one pool of %s on time %.1f%%, the safety net %.1f%%", e.InstanceType, e.OnTimePct, net.OnTimePct)
		}
	}
	// The block's id is what `book` takes.
	code, out, stderr := runIn("book", *block.OfferingID, "--dry-run", "-o", "json")
	if code != 0 || !strings.Contains(out, `"dry_run":true`) {
		t.Errorf("book %s --dry-run: exit %d, %s %s", *block.OfferingID, code, out, stderr)
	}
}

func TestPlanTable(t *testing.T) {
	code, stdout, stderr := runCmd(t, "plan", "--gpus", "8", "--gpu", "A100", "--hours", "12", "--start", "+1d", "--deadline", "+3d", "--runs", "500")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	if !strings.HasPrefix(lines[0], "SIMULATED MARKET") || !strings.HasPrefix(lines[1], "STRATEGY") || strings.Contains(lines[1], "ASSUMPTIONS") {
		t.Errorf("table starts %q / %q", lines[0], lines[1])
	}
	// The rows on time, then those that are not under a line saying so
	// (as the Plan view does), a blank line, one assumption per row.
	i := slices.Index(lines, "assumptions:")
	if i < 0 || lines[i-1] != "" {
		t.Fatalf("no assumptions after the rows:\n%s", stdout)
	}
	var strategies []string
	late := false
	for _, l := range lines[2 : i-1] {
		switch {
		case l == "on time less than 95 % of the runs:":
			late = true
		case l == "" || strings.HasPrefix(l, "STRATEGY"):
		default:
			f := strings.Fields(l)
			// START and END are local, with the zone: "2026-12-07 09:00 CET".
			if !regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d [A-Z+\-0-9]+ +\d{4}-\d\d-\d\d \d\d:\d\d [A-Z+\-0-9]+ `).MatchString(l) {
				t.Errorf("row %q: want START and END as local times with the zone", l)
			}
			if last := f[len(f)-1]; strings.HasPrefix(last, "max_") {
				f = f[:len(f)-1] // CAP "over max_…" is two words
			}
			pct, _ := strconv.ParseFloat(f[len(f)-5], 64)
			if late != (pct < 95) {
				t.Errorf("row %q on time %v %% is on the wrong side of the split (late %v)", l, pct, late)
			}
			strategies = append(strategies, f[0])
		}
	}
	if !late {
		t.Errorf("no row under the on-time line:\n%s", stdout)
	}
	notes := lines[i+1 : len(lines)-1]
	if len(notes) != len(strategies) || len(strategies) < 4 {
		t.Fatalf("%d rows, %d assumptions", len(strategies), len(notes))
	}
	for n, l := range notes {
		if !strings.HasPrefix(l, "  "+itoa(n+1)+". "+strategies[n]+": ") {
			t.Errorf("assumption %d %q is not row %d's (%s)", n+1, l, n+1, strategies[n])
		}
	}
}

// A row whose expected cost is over a budget cap says so: over_cap names
// the key in JSON, CAP in the table, and a line says where to raise it.
func TestPlanOverCap(t *testing.T) {
	isolate(t)
	cfg := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "gpumarket")
	os.MkdirAll(cfg, 0o700)
	os.WriteFile(filepath.Join(cfg, "config.yaml"), []byte("budget: {max_booking_usd: 1500, max_daily_usd: 0}\n"), 0o600)
	args := []string{"plan", "--gpus", "8", "--gpu", "H100", "--hours", "24", "--start", "+1d", "--deadline", "+3d", "--runs", "300"}
	code, stdout, stderr := runIn(append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []struct {
		Strategy        string
		ExpectedCostUSD float64 `json:"expected_cost_usd"`
		OverCap         *string `json:"over_cap"`
		End             time.Time
		EndP95          time.Time `json:"end_p95"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	over := 0
	for _, r := range rows {
		want := ""
		switch {
		case r.ExpectedCostUSD > 1500:
			want = "max_booking_usd"
		}
		got := ""
		if r.OverCap != nil {
			got = *r.OverCap
			over++
		}
		if got != want {
			t.Errorf("%s $%.2f: over_cap %q, want %q", r.Strategy, r.ExpectedCostUSD, got, want)
		}
		if r.EndP95.Before(r.End) || r.End.IsZero() {
			t.Errorf("%s: end %v, end_p95 %v", r.Strategy, r.End, r.EndP95)
		}
	}
	if over == 0 || over == len(rows) {
		t.Fatalf("%d of %d rows over the cap: the case tests nothing", over, len(rows))
	}
	code, stdout, stderr = runIn(args...)
	if code != 0 || !strings.Contains(stdout, "over max_booking_usd") || !strings.Contains(stdout, "raise them in "+filepath.Join(cfg, "config.yaml")) {
		t.Errorf("table: exit %d:\n%s%s", code, stdout, stderr)
	}
}

func TestBacktestCommand(t *testing.T) {
	dir := t.TempDir()
	week := make([]string, 7*24*12)
	for i := range week {
		week[i] = []string{"1", "1", "0"}[i%3]
	}
	good := filepath.Join(dir, "a.json")
	os.WriteFile(good, []byte(`{"metadata": {"gap_seconds": 300}, "data": [`+strings.Join(week, ", ")+`]}`), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"metadata": {"gap_seconds": 300}, "data": [1, -2]}`), 0o644)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backtest"}, "backtest needs traces"},
		{[]string{"backtest", "--trace", filepath.Join(dir, "missing.json")}, "missing.json: no such file"},
		{[]string{"backtest", "--trace", bad}, "bad.json: data[1] -2"},
		{[]string{"backtest", "--trace", good, "--sim"}, "--sim"},
		{[]string{"backtest", "--trace", good, "--deadline-hours", "10"}, "--deadline-hours"},
		{[]string{"backtest", "--trace", good, "--starts", "0"}, "--starts"},
		{[]string{"backtest", "--trace", good, "--starts", "some"}, "--starts \"some\": want a whole number of start times from 1 to 1000000, or all"},
		{[]string{"backtest", "--trace", good, "--job-hours", "24", "--deadline-hours", "24.1"}, "shorter than the work plus one changeover"},
		{[]string{"backtest", "--trace", good, "--instances", "0"}, "--instances"},
		{[]string{"backtest", "--trace", good, "--spot-usd-hour", "NaN"}, "--spot-usd-hour"},
		{[]string{"backtest", "--trace", good, "--seed", "0"}, "--seed"},
		{[]string{"backtest", "--sim", "--instance-type", "p9.huge"}, "--instance-type"},
		{[]string{"backtest", "--sim", "--sim-days", "0"}, "--sim-days"},
		{[]string{"backtest", "--trace", good, "--out", dir}, "--out is for --sim"},
	} {
		code, stdout, stderr := runCmd(t, c.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: want exit 2 and one line naming %s", c.args[1:], code, stdout, stderr, c.want)
		}
	}

	// Two pools: one flag and one positional file.
	code, stdout, stderr := runCmd(t, "backtest", "--trace", good, good, "--job-hours", "24", "--deadline-hours", "36", "--starts", "50", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) != 4 {
		t.Fatalf("%v: %s", err, stdout)
	}
	want := []string{"policy", "runs", "deadlines_met_pct", "mean_cost_usd", "savings_vs_on_demand_pct", "p95_cost_usd"}
	for i, r := range rows {
		if len(r) != len(want) || r["policy"] != []string{"on-demand", "greedy", "uniform-progress", "planner"}[i] {
			t.Errorf("row %d: %v", i, r)
		}
	}
	if rows[1]["runs"].(float64) != 100 || rows[3]["runs"].(float64) != 50 {
		t.Errorf("runs: greedy %v (2 pools × 50 starts), planner %v", rows[1]["runs"], rows[3]["runs"])
	}

	// --predict adds what was claimed at each start beside each row.
	code, stdout, stderr = runCmd(t, "backtest", "--trace", good, "--job-hours", "24", "--deadline-hours", "36", "--starts", "20", "--predict", "-o", "json")
	rows = nil
	if err := json.Unmarshal([]byte(stdout), &rows); code != 0 || err != nil || len(rows) != 4 {
		t.Fatalf("--predict: exit %d %v %s %s", code, err, stdout, stderr)
	}
	for _, r := range rows {
		p, ok := r["predicted_cost_usd"].(float64)
		if len(r) != len(want)+4 || !ok || p <= 0 || r["over_p95_pct"] == nil || r["predicted_on_time_pct"] == nil || r["predicted_p95_cost_usd"] == nil {
			t.Errorf("--predict row %v", r)
		}
	}

	// --sim writes the traces where it says, and replays them.
	out := filepath.Join(dir, "sim")
	code, stdout, stderr = runCmd(t, "backtest", "--sim", "--out", out, "--sim-days", "20", "--starts", "100", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.json"))
	if len(files) < 8 || !strings.Contains(stderr, "wrote "+itoa(len(files))+" traces") || !strings.Contains(stderr, out) {
		t.Errorf("%d files; stderr %q", len(files), stderr)
	}
	rows = nil
	json.Unmarshal([]byte(stdout), &rows)
	if len(rows) != 4 || rows[3]["savings_vs_on_demand_pct"].(float64) <= rows[2]["savings_vs_on_demand_pct"].(float64) ||
		rows[3]["deadlines_met_pct"].(float64) < 99 {
		t.Errorf("sim rows %v", rows)
	}
	// The files it wrote are traces the command reads back.
	if code, _, stderr := runCmd(t, append([]string{"backtest", "--trace"}, files...)...); code != 0 {
		t.Errorf("replaying the written traces: exit %d %s", code, stderr)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
