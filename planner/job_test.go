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

// A window in the past is refused, naming the time; the deadline check
// counts the changeover and says what it leaves for the work.
func TestJobCheck(t *testing.T) {
	now := t0.Add(-30 * time.Second)
	workshop := func() Job {
		return Job{GPUs: 16, Models: []string{"H100"}, Hours: 3, Start: t0, Deadline: t0.Add(3 * time.Hour), Changeover: 12 * time.Minute}
	}
	cases := []struct {
		name  string
		job   Job
		now   time.Time
		field string // "" for accepted
		says  string
	}{
		{"a job from now", goodJob(), now, "", ""},
		{"start passed", goodJob(), t0.Add(2 * time.Hour), "start", "2026-12-02 09:00 UTC has passed"},
		{"deadline passed", func() Job { j := goodJob(); j.Start = t0.Add(-80 * time.Hour); return j }(), t0, "start", "has passed"},
		{"a typo month back", func() Job {
			j := goodJob()
			j.Start, j.Deadline = t0.AddDate(0, -1, 0), t0.AddDate(0, -1, 3)
			return j
		}(), now, "start", "2026-11-02 09:00 UTC has passed"},
		{"the changeover does not fit", workshop(), now, "deadline", "no strategy fits: the 12m changeover leaves 2h48m for 3h of work"},
		{"the changeover fits", func() Job { j := workshop(); j.Deadline = j.Deadline.Add(12 * time.Minute); return j }(), now, "", ""},
		{"no changeover", func() Job { j := workshop(); j.Changeover = 0; return j }(), now, "", ""},
		// Work measured on an A100 fits in less time on an H100.
		{"a faster second model", func() Job { j := workshop(); j.Models = []string{"A100", "H100"}; return j }(), now, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.job.Check(tc.now, nil)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.says) {
				t.Fatalf("got %v; want %s: …%s…", err, tc.field, tc.says)
			}
		})
	}
	// Plan refuses the same deadline, whoever calls it.
	if _, err := Plan(workshop(), Market{}, Options{Runs: 1}); err == nil || !strings.Contains(err.Error(), "no strategy fits") {
		t.Errorf("Plan of a job the changeover does not fit: %v", err)
	}
}

// Re-planning after part of a plan was carried out plans only the work
// the held rows leave, in the longest stretch they leave free.
func TestUncovered(t *testing.T) {
	job := goodJob() // 16 H100 × 48 h, t0 to t0+72h, 12m changeover
	h := func(row, kind string, gpus float64, from, hours float64) Held {
		start := t0.Add(time.Duration(from * float64(time.Hour)))
		return Held{Row: row, Kind: kind, Model: "H100", GPUs: gpus, Start: start, End: start.Add(time.Duration(hours * float64(time.Hour)))}
	}
	// A day's block in the middle: 24 h less AWS's 30 minutes and a
	// changeover do 23.3 h; the 24.7 h left go after it, the longer stretch.
	left, by := Uncovered(job, []Held{h("row-b", "block", 16, 24, 24)}, t0, nil)
	if math.Abs(left.Hours-24.7) > 1e-9 || !left.Start.Equal(t0.Add(47*time.Hour+30*time.Minute)) || !left.Deadline.Equal(job.Deadline) ||
		strings.Join(by, ",") != "row-b" {
		t.Errorf("a day's block: left %v h from %v to %v, by %v", left.Hours, left.Start, left.Deadline, by)
	}
	// A block that holds the whole job covers it.
	if left, by := Uncovered(job, []Held{h("row-all", "block", 16, 0, 72)}, t0, nil); left.Hours != 0 || strings.Join(by, ",") != "row-all" {
		t.Errorf("a whole block: left %v h, by %v", left.Hours, by)
	}
	// So does the plan's fleet over the job's window (no early stop).
	if left, by := Uncovered(job, []Held{h("row-f", "fleet", 16, 0, 72)}, t0, nil); left.Hours != 0 || len(by) != 1 {
		t.Errorf("the plan's fleet: left %v h, by %v", left.Hours, by)
	}
	// Half the GPUs, or another model, cover nothing.
	other := h("row-a", "block", 16, 0, 72)
	other.Model = "A100"
	for _, held := range []Held{h("row-half", "block", 8, 0, 72), other} {
		if left, by := Uncovered(job, []Held{held}, t0, nil); left.Hours != 48 || len(by) != 0 || !left.Start.Equal(t0) {
			t.Errorf("%+v: left %v h from %v, by %v; want the whole job", held, left.Hours, left.Start, by)
		}
	}
	// Planned later, what is left starts now.
	now := t0.Add(5 * time.Hour)
	if left, _ := Uncovered(job, []Held{h("row-b", "block", 16, 48, 24)}, now, nil); !left.Start.Equal(now) || !left.Deadline.Equal(t0.Add(48*time.Hour)) {
		t.Errorf("from now: %v to %v", left.Start, left.Deadline)
	}
}
