package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/sim"
)

// runAtSpeed runs one command line in-process on a data dir at a
// simulated clock speed.
func runAtSpeed(t *testing.T, dataDir, speed string, args ...string) (int, string, string) {
	t.Helper()
	isolate(t)
	t.Setenv("GPUMARKET_DATA_DIR", dataDir)
	t.Setenv("GPUMARKET_SIM_SPEED", speed)
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// latestObserved runs `prices -o json` and returns the newest observed_at.
func latestObserved(t *testing.T, dataDir, speed string) time.Time {
	t.Helper()
	code, stdout, stderr := runAtSpeed(t, dataDir, speed, "prices", "--gpu", "H100", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []struct {
		ObservedAt time.Time `json:"observed_at"`
	}
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil || len(rows) == 0 {
		t.Fatalf("prices: %v, %d rows", err, len(rows))
	}
	var last time.Time
	for _, r := range rows {
		if r.ObservedAt.After(last) {
			last = r.ObservedAt
		}
	}
	return last
}

// At GPUMARKET_SIM_SPEED=7200 the simulated market's prices are dated by
// its fast clock, from the origin the first run recorded in the data
// dir: a second run a wall second and a half later sees the market hours
// on, ahead of the wall clock.
func TestSimSpeedMovesWhatTheMarketShows(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	first := latestObserved(t, dir, "7200")
	data, err := os.ReadFile(filepath.Join(dir, sim.ClockFile))
	if err != nil {
		t.Fatalf("no clock recorded: %v", err)
	}
	var rec struct {
		Speed  int       `json:"speed"`
		Origin time.Time `json:"origin"`
	}
	if err := json.Unmarshal(data, &rec); err != nil || rec.Speed != 7200 || rec.Origin.Before(start.Add(-time.Second)) {
		t.Fatalf("record %s: %v", data, err)
	}
	time.Sleep(1500 * time.Millisecond)
	second := latestObserved(t, dir, "7200")
	if d := second.Sub(first); d < time.Hour {
		t.Errorf("a wall second and a half moved the market %s, want hours (7200×)", d)
	}
	if wall := time.Now(); !second.After(wall.Add(time.Hour)) {
		t.Errorf("latest price at %s, not ahead of the wall clock %s", second, wall)
	}

	// Offerings' windows and a launched fleet's start follow the clock too.
	code, out, errOut := runAtSpeed(t, dir, "7200", "offerings", "--gpu", "H100", "--count", "1", "--duration", "2d", "-o", "json")
	offs, _ := jsonRows(t, out)
	if code != 0 || len(offs) == 0 {
		t.Fatalf("offerings: exit %d, %d rows: %s", code, len(offs), errOut)
	}
	for _, o := range offs {
		start, err := time.Parse(time.RFC3339, o["start"].(string))
		if err != nil || start.Before(second.Add(-time.Hour)) {
			t.Errorf("offering %v starts %s, before the simulated now %s", o["id"], start, second)
		}
	}
	// Launched or not for want of capacity then, the fleet's ledger row is
	// dated by the simulated clock. A max price keeps the estimate fixed:
	// at 7200× prices move between the estimate and its re-read under the
	// default caps, and a rise refuses the launch before any row.
	code, _, errOut = runAtSpeed(t, dir, "7200", "fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "1",
		"--max-price", "1", "--yes", "-o", "json")
	if code > 1 {
		t.Fatalf("fleet launch: exit %d: %s", code, errOut)
	}
	code, out, errOut = runAtSpeed(t, dir, "7200", "ledger", "-o", "json")
	rows, _ := jsonRows(t, out)
	if code != 0 || len(rows) != 1 {
		t.Fatalf("ledger: exit %d, %v: %s", code, rows, errOut)
	}
	if at, err := time.Parse(time.RFC3339, rows[0]["created_at"].(string)); err != nil || at.Before(second) {
		t.Errorf("the fleet's row was made at %s, before the simulated now %s", rows[0]["created_at"], second)
	}
}
