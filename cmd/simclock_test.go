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
}

// A data dir recorded at one speed refuses another (1 included) as bad
// usage naming both; a fast clock with a cloud among the providers is
// refused too, before anything is recorded.
func TestSimSpeedMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runAtSpeed(t, dir, "7200", "--provider", "aws", "prices")
	if code != 2 || !strings.Contains(stderr, "sim.speed 7200") || !strings.Contains(stderr, "aws") {
		t.Errorf("a cloud at speed: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, sim.ClockFile)); err == nil {
		t.Error("a refused run recorded a clock")
	}
	if code, _, stderr := runAtSpeed(t, dir, "7200", "prices", "--gpu", "H100"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, speed := range []string{"60", ""} {
		code, _, stderr := runAtSpeed(t, dir, speed, "prices", "--gpu", "H100")
		if code != 2 || !strings.Contains(stderr, "7200×") || !strings.Contains(stderr, "GPUMARKET_SIM_SPEED=7200") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("speed %q on a 7200× data dir: exit %d: %q", speed, code, stderr)
		}
	}
	code, _, stderr = runAtSpeed(t, dir, "0", "prices")
	if code != 2 || !strings.Contains(stderr, "GPUMARKET_SIM_SPEED") {
		t.Errorf("speed 0: exit %d: %s", code, stderr)
	}
}
