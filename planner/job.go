package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Job is G GPUs of an acceptable model for W hours, from Start to Deadline.
type Job struct {
	// GPUs is G, the GPUs needed at once, of Models, acceptable models; work is measured on the first.
	GPUs   int
	Models []string
	// Hours is W, the hours of work on Models[0]; Start the earliest start S; Deadline D.
	Hours           float64
	Start, Deadline time.Time
	// Checkpointable jobs keep progress to the last checkpoint, every Checkpoint (c); others restart.
	Checkpointable bool
	Checkpoint     time.Duration
	// Changeover is a start's or switch's wall time (d; 0.2-0.3 h measured).
	Changeover time.Duration
}

// Limits of a job.
const (
	// MaxGPUs is a capacity block's 64 instances of 8 GPUs.
	MaxGPUs = 512
	// MaxSpan is the longest capacity block (26 weeks).
	MaxSpan = 182 * 24 * time.Hour
	// MaxChangeover bounds a changeover.
	MaxChangeover = 24 * time.Hour
)

// FieldError is a value that cannot be planned, named as the CLI's flag;
// Msg says what is wrong and what is accepted.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks the job on its own (Plan checks the models are sold).
func (j Job) Validate() error {
	if j.GPUs < 1 || j.GPUs > MaxGPUs {
		return fieldErr("gpus", "%d: want a whole number of GPUs from 1 to %d", j.GPUs, MaxGPUs)
	}
	if len(j.Models) == 0 {
		return fieldErr("gpu", "want one or more GPU models such as H100 or H100,H200 (one of %s)", strings.Join(domain.GPUModels, ", "))
	}
	for i, m := range j.Models {
		if !slices.Contains(domain.GPUModels, m) {
			return fieldErr("gpu", "unknown GPU %q; want one of %s", m, strings.Join(domain.GPUModels, ", "))
		}
		if slices.Contains(j.Models[:i], m) {
			return fieldErr("gpu", "%s is named twice", m)
		}
	}
	if math.IsNaN(j.Hours) || j.Hours <= 0 || j.Hours > MaxSpan.Hours() {
		return fieldErr("hours", "%v: want a number of hours of work above 0, at most %.0f (26 weeks)", j.Hours, MaxSpan.Hours())
	}
	if j.Start.IsZero() {
		return fieldErr("start", "missing: want %s", domain.WhenForm)
	}
	if j.Deadline.IsZero() {
		return fieldErr("deadline", "missing: want %s", domain.WhenForm)
	}
	work := time.Duration(j.Hours * float64(time.Hour))
	if earliest := j.Start.Add(work); j.Deadline.Before(earliest) {
		return fieldErr("deadline", "%s is before start + hours (%s); want a deadline at or after it",
			j.stamp(j.Deadline), j.stamp(earliest))
	}
	if j.Deadline.Sub(j.Start) > MaxSpan {
		return fieldErr("deadline", "%s is more than 26 weeks after the start; want a deadline within 26 weeks", j.stamp(j.Deadline))
	}
	if j.Checkpointable && j.Checkpoint < 0 {
		return fieldErr("checkpoint", "%s: want 0 (progress kept at an interruption) or a positive interval such as 15m (or a job that is not checkpointable)", j.Checkpoint)
	}
	if j.Changeover < 0 || j.Changeover > MaxChangeover {
		return fieldErr("changeover", "%s: want a duration from 0s to 24h such as 12m", j.Changeover)
	}
	return nil
}

// Slack is D − S − W: the time the job may lose and still be on time.
func (j Job) Slack() time.Duration {
	return j.Deadline.Sub(j.Start) - time.Duration(j.Hours*float64(time.Hour))
}

// StampLayout writes a time in messages: local, with the zone.
const StampLayout = "2006-01-02 15:04 MST"

// stamp writes t in the job's own zone (the one its start was read in).
func (j Job) stamp(t time.Time) string { return t.In(j.Start.Location()).Format(StampLayout) }

// Check is Validate at now: a passed start or deadline is refused, and a
// deadline too short for the work (Fits); every entry point checks here.
func (j Job) Check(now time.Time, speeds Speeds) error {
	floor := now.Truncate(time.Minute)
	if !j.Start.IsZero() && j.Start.Before(floor) {
		return fieldErr("start", "%s has passed (it is %s now); want a later start, or none for now", j.stamp(j.Start), j.stamp(now))
	}
	if !j.Deadline.IsZero() && j.Deadline.Before(floor) {
		return fieldErr("deadline", "%s has passed (it is %s now); want a later deadline", j.stamp(j.Deadline), j.stamp(now))
	}
	if err := j.Validate(); err != nil {
		return err
	}
	return j.Fits(speeds)
}

// Fits refuses a deadline no strategy can meet.
func (j Job) Fits(speeds Speeds) error {
	if speeds == nil {
		speeds = DefaultSpeeds
	}
	best := 0.0
	for _, m := range j.Models {
		best = max(best, speeds.Relative(m, j.Models[0]))
	}
	if best <= 0 {
		return nil // Plan names the model with no speed
	}
	work := time.Duration(j.Hours / best * float64(time.Hour))
	span := j.Deadline.Sub(j.Start)
	if j.Changeover+work <= span {
		return nil
	}
	left := max(span-j.Changeover, 0)
	return fieldErr("deadline", "%s: no strategy fits: the %s changeover leaves %s for %s of work; want a deadline at or after %s",
		j.stamp(j.Deadline), domain.FormatDuration(j.Changeover), domain.FormatDuration(left.Round(time.Minute)),
		domain.FormatDuration(work.Round(time.Minute)), j.stamp(j.Start.Add(j.Changeover+work)))
}

// Held is capacity a job already holds: a ledger row carried out for it.
type Held struct {
	// Row is the ledger row's id; Kind says how early its instances stop; Model and
	// GPUs are what it holds (fewer GPUs do not cover the job).
	Row, Kind, Model string
	GPUs             float64
	// Start and End bound it; a zero End runs to the job's deadline.
	Start, End time.Time
}

// Uncovered is the job the held rows leave, planned from now, in the
// longest free part of the window; by names the rows that do some work.
func Uncovered(job Job, held []Held, now time.Time, speeds Speeds) (left Job, by []string) {
	if speeds == nil {
		speeds = DefaultSpeeds
	}
	left = job
	from := domain.Later(now, job.Start)
	type span struct{ a, b time.Time }
	var taken []span
	done := 0.0
	for _, h := range held {
		speed := speeds.Relative(h.Model, job.Models[0])
		if h.GPUs < float64(job.GPUs)-1e-9 || speed <= 0 || !slices.Contains(job.Models, h.Model) {
			continue
		}
		a, b := domain.Later(job.Start, h.Start), h.End
		if b.IsZero() || b.After(job.Deadline) {
			b = job.Deadline
		}
		if t := domain.TermsOfKind(h.Kind); t != nil && !h.End.IsZero() {
			b = domain.Earlier(b, h.End.Add(-t.StopsEarly))
		}
		if usable := b.Sub(a) - job.Changeover; usable > 0 {
			done += usable.Hours() * speed
			by = append(by, h.Row)
			taken = append(taken, span{a, b})
		}
	}
	left.Hours = max(0, job.Hours-done)
	if left.Hours < 1e-6 {
		left.Hours = 0
		return left, by
	}
	slices.SortFunc(taken, func(x, y span) int { return x.a.Compare(y.a) })
	best := span{from, from}
	cur := from
	for _, s := range append(taken, span{job.Deadline, job.Deadline}) {
		if s.a.After(cur) && s.a.Sub(cur) > best.b.Sub(best.a) {
			best = span{cur, s.a}
		}
		if s.b.After(cur) {
			cur = s.b
		}
	}
	left.Start, left.Deadline = best.a, best.b
	return left, by
}

// Speeds are training speeds relative to an H100 (config plan.speed).
type Speeds map[string]float64

// DefaultSpeeds are from public benchmarks, conservative (DESIGN.md).
var DefaultSpeeds = Speeds{
	"H200": 1.2, "H100": 1.0, "A100": 0.45, "L40S": 0.4, "L4": 0.12,
	"A10G": 0.15, "A10": 0.15, "V100": 0.18, "T4": 0.06,
}

// of returns a model's speed, the configured one first.
func (s Speeds) of(model string) float64 {
	if v, ok := s[model]; ok && v > 0 {
		return v
	}
	if v, ok := DefaultSpeeds[model]; ok {
		return v
	}
	return 0
}

// Relative is work per hour of model in hours of ref; 0 when unknown.
func (s Speeds) Relative(model, ref string) float64 {
	if model == ref {
		return 1
	}
	m, r := s.of(model), s.of(ref)
	if m <= 0 || r <= 0 {
		return 0
	}
	return m / r
}

// BlockQueries are the offering searches that may hold the job (DESIGN.md).
func BlockQueries(job Job, now time.Time, speeds Speeds) []domain.OfferingQuery {
	if speeds == nil {
		speeds = DefaultSpeeds
	}
	after := domain.Later(now, job.Start.Add(-24*time.Hour))
	before := job.Deadline
	if !before.After(after) {
		return nil
	}
	var out []domain.OfferingQuery
	seen := map[[2]any]bool{}
	add := func(model string, d time.Duration, from time.Time) {
		k := [2]any{model, d}
		if seen[k] || d <= 0 || d > MaxSpan {
			return
		}
		seen[k] = true
		out = append(out, domain.OfferingQuery{GPU: model, GPUs: job.GPUs, Duration: d, StartAfter: from, StartBefore: before})
	}
	for _, model := range job.Models {
		s := speeds.Relative(model, job.Models[0])
		if s <= 0 {
			continue
		}
		work := time.Duration((job.Hours/s)*float64(time.Hour)) + job.Changeover
		days := int(math.Ceil((work+30*time.Minute).Hours()/24 - 1e-9))
		for _, n := range []int{days, days + 1} {
			add(model, time.Duration(awsDays(n))*24*time.Hour, after)
		}
		if days > 1 {
			add(model, 24*time.Hour, after)
		}
		// A reservation bills from when it is made.
		hold := work
		if wait := job.Start.Sub(now); wait > 0 {
			hold += wait
		}
		hours := math.Ceil(hold.Hours() - 1e-9)
		add(model, time.Duration(hours)*time.Hour, now)
	}
	return out
}

// awsDays rounds up to a length AWS sells: 1-14 days, then weeks.
func awsDays(n int) int {
	if n <= 14 {
		return max(n, 1)
	}
	return max(21, (n+6)/7*7)
}
