package cmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanOnTraces: plan --trace plans on a market of trace files, each
// row's assumptions naming the history each pool's risk was fitted on.
func TestPlanOnTraces(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, pattern := range [][]string{{"16", "16", "16", "0"}, {"16", "8", "0", "16"}} {
		data := make([]string, 7*24*12)
		for k := range data {
			data[k] = pattern[k/24%len(pattern)]
		}
		name := filepath.Join(dir, []string{"us-west-2a_v100_1.json", "us-east-2b_v100_1.json"}[i])
		if err := os.WriteFile(name, []byte(`{"metadata": {"gap_seconds": 300}, "data": [`+strings.Join(data, ", ")+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	args := []string{"plan", "--trace", files[0], "--trace", files[1], "--gpus", "16", "--gpu", "V100", "--hours", "24",
		"--start", "+1h", "--deadline", "+31h", "--runs", "500", "-o", "json"}
	code, stdout, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatal(err)
	}
	var net map[string]any
	for _, r := range rows {
		if r["strategy"] == "spot+od-planner" {
			net = r
		}
	}
	a, _ := net["assumptions"].(string)
	for _, want := range []string{"risk of us-west-2a_v100_1 from fitted on 168 h of us-west-2a_v100_1", "risk of us-east-2b_v100_1 from fitted on 168 h of us-east-2b_v100_1"} {
		if !strings.Contains(a, want) {
			t.Errorf("planner row %v does not say %q", net, want)
		}
	}
	code, _, stderr = runCmd(t, append(args, "--spot-usd-hour", "0")...)
	if code != 2 || !strings.Contains(stderr, "--spot-usd-hour 0: want a price above 0") {
		t.Errorf("a free spot price: exit %d %s", code, stderr)
	}
}
