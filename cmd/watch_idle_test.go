package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/ledger"
)

// An idle rule over the simulated market's usage, end to end: blocks of
// 2 × p5.48xlarge that have run 30 of their 48 hours ($4,000 each) are in
// the ledger; a rule on one of them (id:) whose figure is under its idle
// share tells it, once, and one above it does not.
func TestWatchOnceTellsAnIdleBlock(t *testing.T) {
	run, dir := usageSession(t)
	// The sim's usage follows a row's id (busy, idle, late, or no
	// metrics agent): eight blocks, so that one has metrics.
	st, err := ledger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := range 8 {
		b := ledger.Entry{Kind: ledger.KindBlock, Provider: "sim", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", InstanceCount: 2, GPUCount: 16, Start: now.Add(-30 * time.Hour), End: now.Add(18 * time.Hour),
			CostUSD: 4000, State: ledger.StateActive, ProviderRef: fmt.Sprintf("cr-%017d", i), Actor: "alice@lab", IdemKey: fmt.Sprint("cb-", i),
			CreatedAt: now.Add(-40 * time.Hour)}
		if _, err := st.RecordIntent(context.Background(), b, nil); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	code, out, errOut := run("usage", "--since", "7d", "-o", "json")
	if code != 0 {
		t.Fatalf("usage: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	id, pct := "", 0.0
	for _, r := range rows {
		idle, ok := r["idle_usd"].(float64)
		// The share is of the cost so far: the fee over the 30 hours
		// run. Figures halfway to each end hold however the clock moves
		// between the two runs.
		if p := 100 * idle / (4000 * 30.0 / 48); ok && p > 2 && p < 98 {
			id, pct = r["id"].(string), p
			break
		}
	}
	if id == "" {
		t.Skipf("none of the eight blocks has an idle share between 2%% and 98%%: %s", out)
	}
	config := fmt.Sprintf("watch:\n  - name: under\n    idle: {above_pct: %.2f, id: %s}\n  - name: over\n    idle: {above_pct: %.2f, id: %s}\n",
		pct/2, id, (pct+100)/2, id)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPUMARKET_CONFIG", path)
	code, out, errOut = run("watch", "--once")
	if code != exitFired {
		t.Fatalf("exit %d, want %d: stdout %q stderr %s", code, exitFired, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := fmt.Sprintf(" alert under: block %s 16 GPU p5.48xlarge in us-east-1a is %.0f%% idle", id, pct)
	if len(lines) != 1 || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "its 30 h so far cost") || !strings.Contains(lines[0], "SIMULATED") {
		t.Errorf("stdout %q, want one line with %q", out, want)
	}
	// Told once: the next run (cron) tells nothing.
	if code, out, errOut = run("watch", "--once"); code != 0 || out != "" {
		t.Errorf("second run: exit %d, stdout %q, stderr %s; want 0 and nothing", code, out, errOut)
	}
}
