package planner

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func goodJob() Job {
	return Job{GPUs: 16, Models: []string{"H100"}, Hours: 48, Start: t0, Deadline: t0.Add(72 * time.Hour),
		Checkpointable: true, Checkpoint: 15 * time.Minute, Changeover: 12 * time.Minute}
}

func TestJobValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Job)
		field string // "" for a valid job
		says  string
	}{
		{"valid", func(*Job) {}, "", ""},
		{"deadline exactly start+hours", func(j *Job) { j.Deadline = t0.Add(48 * time.Hour) }, "", ""},
		{"not checkpointable needs no interval", func(j *Job) { j.Checkpointable, j.Checkpoint = false, 0 }, "", ""},
		{"zero GPUs", func(j *Job) { j.GPUs = 0 }, "gpus", "from 1 to 512"},
		{"negative GPUs", func(j *Job) { j.GPUs = -4 }, "gpus", "-4"},
		{"too many GPUs", func(j *Job) { j.GPUs = 513 }, "gpus", "512"},
		{"no model", func(j *Job) { j.Models = nil }, "gpu", "H100,H200"},
		{"unknown model", func(j *Job) { j.Models = []string{"H900"} }, "gpu", `"H900"`},
		{"model twice", func(j *Job) { j.Models = []string{"H100", "H100"} }, "gpu", "twice"},
		{"zero hours", func(j *Job) { j.Hours = 0 }, "hours", "above 0"},
		{"NaN hours", func(j *Job) { j.Hours = math.NaN() }, "hours", "above 0"},
		{"too long", func(j *Job) { j.Hours = 5000 }, "hours", "26 weeks"},
		{"no start", func(j *Job) { j.Start = time.Time{} }, "start", "missing"},
		{"no deadline", func(j *Job) { j.Deadline = time.Time{} }, "deadline", "missing"},
		{"deadline before start+hours", func(j *Job) { j.Deadline = t0.Add(47 * time.Hour) }, "deadline", "before start + hours"},
		{"deadline far away", func(j *Job) { j.Deadline = t0.Add(200 * 24 * time.Hour) }, "deadline", "26 weeks"},
		{"checkpoint 0 keeps progress", func(j *Job) { j.Checkpoint = 0 }, "", ""},
		{"negative checkpoint", func(j *Job) { j.Checkpoint = -time.Minute }, "checkpoint", "positive interval"},
		{"negative changeover", func(j *Job) { j.Changeover = -time.Minute }, "changeover", "0s to 24h"},
		{"huge changeover", func(j *Job) { j.Changeover = 25 * time.Hour }, "changeover", "0s to 24h"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := goodJob()
			tc.edit(&j)
			err := j.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid job refused: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FieldError on %s", err, tc.field)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Msg, tc.says) {
				t.Errorf("got %q on %s, want %s saying %q", fe.Msg, fe.Field, tc.field, tc.says)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message spans lines: %q", err)
			}
		})
	}
	if s := goodJob().Slack(); s != 24*time.Hour {
		t.Errorf("slack %s, want 24h", s)
	}
}

func TestSpeedsRelative(t *testing.T) {
	s := Speeds{"A100": 0.5} // configured over the default 0.45
	for _, tc := range []struct {
		model, ref string
		want       float64
	}{
		{"H100", "H100", 1},
		{"A100", "H100", 0.5},
		{"H100", "A100", 2},
		{"H200", "H100", 1.2},
		{"V100", "A100", 0.18 / 0.5},
		{"X1", "H100", 0},
		{"X1", "X1", 1},
	} {
		if got := s.Relative(tc.model, tc.ref); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Relative(%s, %s) = %v, want %v", tc.model, tc.ref, got, tc.want)
		}
	}
	if got := DefaultSpeeds.Relative("A100", "H100"); got != 0.45 {
		t.Errorf("default A100 = %v, want 0.45", got)
	}
}
