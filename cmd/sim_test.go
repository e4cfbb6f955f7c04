package cmd

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// These tests run the real commands in-process on the simulated market.

func TestPricesOnSimJSON(t *testing.T) {
	code, stdout, stderr := runCmd(t, "prices", "--gpu", "H100", "--window", "7d", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stderr, "SIMULATED MARKET") {
		t.Errorf("stderr %q, want the SIMULATED MARKET line (on stderr for json)", stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("stdout is not a JSON array: %v", err)
	}
	if len(rows) < 5 {
		t.Fatalf("%d H100 pools, want several", len(rows))
	}
	clouds := map[any]bool{}
	for _, r := range rows {
		if len(r) != len(pricesFields) {
			t.Errorf("row has %d keys, want %d: %v", len(r), len(pricesFields), r)
		}
		for _, k := range pricesFields {
			if _, ok := r[k]; !ok {
				t.Errorf("row lacks %q", k)
			}
		}
		if r["provider"] != "sim" || r["gpu_model"] != "H100" {
			t.Errorf("row provider %v gpu %v, want sim H100", r["provider"], r["gpu_model"])
		}
		for _, k := range []string{"spot_usd_hour", "spot_usd_gpu_hour", "on_demand_usd_hour", "savings_pct",
			"window_min_usd_hour", "window_avg_usd_hour", "window_max_usd_hour", "effective_usd_gpu_hour", "observed_at"} {
			if r[k] == nil {
				t.Errorf("%s %s is null", r["instance_type"], k)
			}
		}
		if s, ok := r["savings_pct"].(float64); !ok || s < 60 || s > 91 {
			t.Errorf("%s savings %v, want 60-91 %%", r["instance_type"], r["savings_pct"])
		}
		lo, avg, hi := r["window_min_usd_hour"].(float64), r["window_avg_usd_hour"].(float64), r["window_max_usd_hour"].(float64)
		if !(lo <= avg && avg <= hi) {
			t.Errorf("min %v avg %v max %v out of order", lo, avg, hi)
		}
		if r["effective_usd_gpu_hour"].(float64) < r["spot_usd_gpu_hour"].(float64) {
			t.Errorf("effective below spot: %v", r)
		}
		clouds[r["cloud"]] = true
	}
	if !clouds["aws"] || !clouds["azure"] {
		t.Errorf("clouds %v, want both", clouds)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i]["effective_usd_gpu_hour"].(float64) < rows[i-1]["effective_usd_gpu_hour"].(float64) {
			t.Errorf("row %d is cheaper than row %d: not sorted by effective $/GPU-h", i, i-1)
		}
	}
}

func TestPricesOnSimTableAndCSV(t *testing.T) {
	code, stdout, _ := runCmd(t, "prices", "--region", "us-east-1")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(stdout, "\n")
	if !strings.HasPrefix(lines[0], "SIMULATED MARKET") || !strings.HasPrefix(lines[1], "PROVIDER") {
		t.Errorf("table starts %q / %q", lines[0], lines[1])
	}
	code, stdout, _ = runCmd(t, "prices", "--provider", "sim", "--gpu", "t4,a100", "-o", "csv")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	recs, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(recs[0], pricesFields) {
		t.Errorf("header %v", recs[0])
	}
	if len(recs) < 2 {
		t.Fatalf("no rows for --gpu t4,a100:\n%s", stdout)
	}
	for _, r := range recs[1:] {
		if r[5] != "T4" && r[5] != "A100" {
			t.Errorf("gpu %q passed --gpu t4,a100", r[5])
		}
	}
}

func TestHistoryOnSim(t *testing.T) {
	code, stdout, stderr := runCmd(t, "history", "--region", "us-east-1", "--instance-type", "p5.48xlarge", "--window", "6h", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("no history")
	}
	for _, r := range rows {
		if len(r) != len(historyFields) || r["instance_type"] != "p5.48xlarge" || r["region"] != "us-east-1" || r["usd_hour"] == nil {
			t.Errorf("row %v", r)
		}
	}
}

// TestBinaryExitCodes builds the real binary once and checks what a shell
// sees.
func TestBinaryExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build the binary with")
	}
	bin := filepath.Join(t.TempDir(), "gpumarket")
	build := exec.Command(goBin, "build", "-o", bin, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	isolate(t)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"prices", "--window", "3x"}, 2, "--window"},
		{[]string{"prices", "--window", "30m", "--gpu", "L4", "-o", "csv"}, 0, "SIMULATED MARKET"},
		{[]string{"prices", "--config", "/nonexistent.yaml"}, 1, "/nonexistent.yaml"},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = os.Environ()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d stderr %q; want %d naming %s", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}
