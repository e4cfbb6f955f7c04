package cmd

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestWatchOncePricesAPlanRule: `watch --once` loads a plan rule and
// prices it on the simulated market: a budget any on-time plan beats
// fires (exit 3, the alert naming the strategy), one none can meet does
// not (exit 0).
func TestWatchOncePricesAPlanRule(t *testing.T) {
	start := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02")
	deadline := time.Now().UTC().Add(7 * 24 * time.Hour).Format("2006-01-02")
	rule := func(name, below string) string {
		return fmt.Sprintf("  - name: %s\n    plan: {gpu: H100, gpus: 8, hours: 24, start: %q, deadline: %q, below_usd: %s}\n", name, start, deadline, below)
	}
	s := newSession(t, "watch:\n"+rule("cheap-enough", "1000000"))
	code, out, errOut := s.run("watch", "--once")
	if code != exitFired || !strings.Contains(out, "alert cheap-enough") {
		t.Fatalf("a plan under a huge budget: exit %d, stdout %q, stderr %s; want %d and an alert", code, out, errOut, exitFired)
	}
	s = newSession(t, "watch:\n"+rule("never", "1"))
	if code, out, errOut := s.run("watch", "--once"); code != 0 || out != "" {
		t.Errorf("a plan under $1: exit %d, stdout %q, stderr %s; want 0 and nothing", code, out, errOut)
	}
}
