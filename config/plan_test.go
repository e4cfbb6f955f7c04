package config

import (
	"strings"
	"testing"
	"time"
)

func TestPlanSection(t *testing.T) {
	clearEnv(t)
	c, err := Load(writeFile(t, `plan:
  gpus: 16
  hours: 48
  checkpoint: 30m
  changeover: 15m
  speed: {a100: 0.5, H200: 1.3}
  priors:
    h100: {interruptions_per_hour: 0.9, gap_median_hours: 0.6, availability: 0.35}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Plan
	if p.GPUs != 16 || p.Hours != 48 || p.Checkpoint.D() != 30*time.Minute || p.Changeover.D() != 15*time.Minute {
		t.Errorf("plan %+v", p)
	}
	// GPU names come back in the catalog's spelling.
	if p.Speed["A100"] != 0.5 || p.Speed["H200"] != 1.3 || p.Priors["H100"].Availability != 0.35 || len(p.Speed) != 2 {
		t.Errorf("speed %v priors %v", p.Speed, p.Priors)
	}
	// Defaults, and 0s for a job that cannot checkpoint.
	if d := Default().Plan; d.GPUs != 8 || d.Hours != 24 || d.Checkpoint.D() != 15*time.Minute || d.Changeover.D() != 12*time.Minute {
		t.Errorf("default plan %+v", d)
	}
	c, err = Load(writeFile(t, "plan: {checkpoint: 0s}\n"))
	if err != nil || c.Plan.Checkpoint != 0 {
		t.Errorf("checkpoint 0s: %+v %v", c.Plan, err)
	}
}

func TestPlanSectionErrors(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"unknown key", "plan:\n  gpu: 8\n", []string{":2:3:", `unknown key "gpu"`, "gpus, hours"}},
		{"zero gpus", "plan:\n  gpus: 0\n", []string{":2:3:", "plan.gpus", "1 to 512"}},
		{"gpus not a number", "plan: {gpus: many}\n", []string{"plan.gpus", "whole number"}},
		{"hours", "plan:\n  hours: -1\n", []string{":2:3:", "plan.hours", "above 0"}},
		{"negative checkpoint", "plan:\n  checkpoint: -5m\n", []string{"plan.checkpoint", "0s"}},
		{"bad changeover", "plan:\n  changeover: 2d\n", []string{"plan.changeover", "15m"}},
		{"long changeover", "plan:\n  changeover: 25h\n", []string{"plan.changeover", "24h"}},
		{"unknown speed GPU", "plan:\n  speed:\n    B200: 2\n", []string{":3:5:", "plan.speed.B200", "H100"}},
		{"zero speed", "plan:\n  speed:\n    A100: 0\n", []string{":3:5:", "plan.speed.A100", "above 0"}},
		{"speed twice", "plan:\n  speed: {a100: 0.4, A100: 0.5}\n", []string{"plan.speed", "twice"}},
		{"prior rate", "plan:\n  priors:\n    H100: {interruptions_per_hour: 0, gap_median_hours: 0.5, availability: 0.5}\n",
			[]string{"plan.priors.H100.interruptions_per_hour", "0.1-1.4"}},
		{"prior availability", "plan:\n  priors:\n    H100: {interruptions_per_hour: 1, gap_median_hours: 0.5, availability: 2}\n",
			[]string{"plan.priors.H100.availability", "at most 1"}},
		{"prior missing a field", "plan:\n  priors:\n    H100: {interruptions_per_hour: 1}\n", []string{"plan.priors.H100.gap_median_hours"}},
		{"prior unknown key", "plan:\n  priors:\n    H100: {rate: 1}\n", []string{":3:12:", `unknown key "rate"`, "interruptions_per_hour"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			p := writeFile(t, c.body)
			_, err := Load(p)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, p) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with the file", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

// TestOldRiskKeysKeepTheirMeaning: risk.checkpoint_interval and risk.restart_overhead
// are read as the plan: keys that replaced them, unless plan: sets those itself.
func TestOldRiskKeysKeepTheirMeaning(t *testing.T) {
	c, err := Parse("old.yaml", []byte("risk: {checkpoint_interval: 30m, restart_overhead: 9m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Plan.Checkpoint.D() != 30*time.Minute || c.Plan.Changeover.D() != 9*time.Minute {
		t.Errorf("plan checkpoint %v changeover %v, want the old risk keys' 30m and 9m", c.Plan.Checkpoint.D(), c.Plan.Changeover.D())
	}
	c, err = Parse("both.yaml", []byte("risk: {checkpoint_interval: 30m, restart_overhead: 9m}\nplan: {checkpoint: 1h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Plan.Checkpoint.D() != time.Hour || c.Plan.Changeover.D() != 9*time.Minute {
		t.Errorf("plan checkpoint %v changeover %v, want plan's own 1h and the old 9m", c.Plan.Checkpoint.D(), c.Plan.Changeover.D())
	}
	d := Default()
	if c, err := Parse("none.yaml", []byte("window: 7d\n")); err != nil || c.Plan.Checkpoint != d.Plan.Checkpoint || c.Plan.Changeover != d.Plan.Changeover {
		t.Errorf("a file without risk: changed the plan defaults: %+v %v", c.Plan, err)
	}
}
