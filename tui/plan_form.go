package tui

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/tui/widget/form"
)

// planForm is the job as typed; parse reads it as `gpumarket plan` reads
// its flags. An empty start is now, empty regions every region shown.
type planForm struct {
	gpus, models, hours    string
	start, deadline        string
	checkpointable         bool
	checkpoint, changeover string
	regions                string // a comma list
	onTime                 string
}

// planTerms is a parsed form; onTime is the share ranked first.
type planTerms struct {
	job     planner.Job
	regions []string
	onTime  float64
}

// newPlanForm is config plan.*'s job on the session's GPUs and regions.
func newPlanForm(basis planner.Basis, gpus, regions []string, now time.Time) planForm {
	f := planForm{
		gpus: strconv.Itoa(basis.GPUs), models: "H100", hours: decimal(basis.Hours),
		checkpointable: basis.Checkpoint > 0, checkpoint: domain.FormatDuration(basis.Checkpoint), changeover: domain.FormatDuration(basis.Changeover),
		regions: strings.Join(regions, ","), onTime: "95",
	}
	if basis.Checkpoint <= 0 {
		f.checkpoint = "15m"
	}
	if ms := normalModels(gpus); len(ms) > 0 {
		f.models = strings.Join(ms, ",")
	}
	f.deadline = defaultDeadline(now, basis.Hours, now)
	return f
}

// normalModels keeps the GPU models the planner knows, in canonical case.
func normalModels(gpus []string) []string {
	var out []string
	for _, g := range gpus {
		if m, ok := domain.CanonicalGPU(g); ok && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// defaultDeadline gives a job of hours from start half as long again, on
// the hour: a deadline the user sees, never one left implied.
func defaultDeadline(start time.Time, hours float64, now time.Time) string {
	if math.IsNaN(hours) || hours <= 0 || hours > planner.MaxSpan.Hours() {
		hours = 24
	}
	d := start.Add(time.Duration(hours * 1.5 * float64(time.Hour)))
	if t := d.Truncate(time.Hour); t.Before(d) {
		d = t.Add(time.Hour)
	}
	return d.In(now.Location()).Format("2006-01-02 15:04")
}

// decimal is x in the fewest digits: 48, 18.5.
func decimal(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// planStart is the form's start; empty is the next minute, as in the command.
func planStart(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "now") {
		return now.Truncate(time.Minute).Add(time.Minute), nil
	}
	return domain.ParseWhen(s, now)
}

// parse reads the form, naming the field that is wrong and what it accepts.
func (f planForm) parse(now time.Time) (planTerms, error) {
	var t planTerms
	j := &t.job
	var err error
	if j.GPUs, err = strconv.Atoi(strings.TrimSpace(f.gpus)); err != nil || j.GPUs < 1 || j.GPUs > planner.MaxGPUs {
		return t, fmt.Errorf("GPUs %q: want a whole number of GPUs from 1 to %d", f.gpus, planner.MaxGPUs)
	}
	for _, g := range strings.Split(f.models, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		m, ok := domain.CanonicalGPU(g)
		if !ok {
			return t, fmt.Errorf("GPU models: unknown GPU %q; want one or more of %s, such as H100 or H100,H200", g, strings.Join(domain.GPUModels, ", "))
		}
		if slices.Contains(j.Models, m) {
			return t, fmt.Errorf("GPU models: %s is named twice", m)
		}
		j.Models = append(j.Models, m)
	}
	if len(j.Models) == 0 {
		return t, fmt.Errorf("GPU models: none; want one or more of %s, such as H100 or H100,H200", strings.Join(domain.GPUModels, ", "))
	}
	j.Hours, err = strconv.ParseFloat(strings.TrimSpace(f.hours), 64)
	if err != nil || math.IsNaN(j.Hours) || j.Hours <= 0 || j.Hours > planner.MaxSpan.Hours() {
		return t, fmt.Errorf("hours of work %q: want a number of hours above 0, at most %.0f (26 weeks), such as 48", f.hours, planner.MaxSpan.Hours())
	}
	if j.Start, err = planStart(f.start, now); err != nil {
		return t, fmt.Errorf("earliest start %q: want %s, or empty for now", strings.TrimSpace(f.start), domain.WhenForm)
	}
	d := strings.TrimSpace(f.deadline)
	if d == "" {
		return t, fmt.Errorf("deadline: missing; want %s (+3d is from now)", domain.WhenForm)
	}
	if j.Deadline, err = domain.ParseWhen(d, now); err != nil {
		return t, fmt.Errorf("deadline %q: want %s (+3d is from now)", d, domain.WhenForm)
	}
	j.Checkpointable = f.checkpointable
	if f.checkpointable {
		if j.Checkpoint, err = time.ParseDuration(strings.TrimSpace(f.checkpoint)); err != nil || j.Checkpoint <= 0 {
			return t, fmt.Errorf("checkpoint every %q: want a positive duration such as 15m or 1h (or Checkpointable: no)", f.checkpoint)
		}
	}
	if j.Changeover, err = time.ParseDuration(strings.TrimSpace(f.changeover)); err != nil {
		return t, fmt.Errorf("changeover %q: want a duration from 0s to 24h such as 12m", f.changeover)
	}
	for _, r := range strings.Split(f.regions, ",") {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(t.regions, r) {
			t.regions = append(t.regions, r)
		}
	}
	t.onTime, err = strconv.ParseFloat(strings.TrimSpace(f.onTime), 64)
	if err != nil || math.IsNaN(t.onTime) || t.onTime < 0 || t.onTime > 100 {
		return t, fmt.Errorf("on time %q: want a percentage from 0 to 100, such as 95", f.onTime)
	}
	if err := j.Check(now, nil); err != nil {
		return t, planFieldErr(err)
	}
	return t, nil
}

// planFieldLabels name the planner's fields as the form does.
var planFieldLabels = map[string]string{
	"gpus": "GPUs", "gpu": "GPU models", "hours": "hours of work", "start": "earliest start",
	"deadline": "deadline", "checkpoint": "checkpoint every", "changeover": "changeover",
}

// planFieldErr words a planner refusal with the form's name of its field.
func planFieldErr(err error) error {
	var fe *planner.FieldError
	if errors.As(err, &fe) {
		return fmt.Errorf("%s: %s", cmp.Or(planFieldLabels[fe.Field], fe.Field), fe.Msg)
	}
	return err
}

// planSeed is what p in the Market or Blocks view brings to the form; empty
// fields leave the form's. latest is the Blocks form's latest start.
type planSeed struct {
	models     []string
	regions    []string
	setRegions bool // regions replace the form's, none meaning all
	gpus       string
	hours      float64
	start      string
	latest     string
}

// seeded is the form with the seed's terms; a deadline too early for the
// hours is made again.
func (f planForm) seeded(s planSeed, now time.Time) planForm {
	if ms := normalModels(s.models); len(ms) > 0 {
		f.models = strings.Join(ms, ",")
	}
	if s.setRegions {
		f.regions = strings.Join(s.regions, ",")
	}
	if s.gpus != "" {
		f.gpus = s.gpus
	}
	if s.hours > 0 {
		f.hours = decimal(s.hours)
	}
	if s.start != "" {
		f.start = s.start
	}
	start, err := planStart(f.start, now)
	if err != nil {
		return f // the form says so when it runs
	}
	hours, err := strconv.ParseFloat(strings.TrimSpace(f.hours), 64)
	if err != nil {
		return f
	}
	if s.latest != "" {
		if l, err := domain.ParseWhen(strings.TrimSpace(s.latest), now); err == nil {
			f.deadline = l.Add(time.Duration(hours * float64(time.Hour))).In(now.Location()).Format("2006-01-02 15:04")
			return f
		}
	}
	d, err := domain.ParseWhen(strings.TrimSpace(f.deadline), now)
	if err != nil || d.Before(start.Add(time.Duration(hours*float64(time.Hour)))) {
		f.deadline = defaultDeadline(start, hours, now)
	}
	return f
}

// fields are the form's fields, bound to f.
func (f *planForm) fields() []form.Field {
	return []form.Field{form.Text("GPUs", &f.gpus), form.Text("GPU models", &f.models), form.Text("Hours of work", &f.hours),
		form.Text("Earliest start", &f.start).Empty("now"), form.Text("Deadline", &f.deadline),
		form.Toggle("Checkpointable", "no", "yes", &f.checkpointable), form.Text("Checkpoint every", &f.checkpoint),
		form.Text("Changeover", &f.changeover), form.Text("Regions", &f.regions).Empty("all"), form.Text("On time ≥ %", &f.onTime)}
}

// planHint says what field i takes; the start's examples are dated from now.
func planHint(i int, now time.Time) string {
	if planHints[i] == "" {
		return domain.WhenExample(now) + " or tomorrow 09:00 (local), +6h, +2d; empty: now"
	}
	return planHints[i]
}

// planHints say, beside each field of fields, what it takes.
var planHints = []string{
	"the GPUs the job needs at once, 1-512",
	"H100, or H100,H200: the hours are measured on the first; the others run at their relative speed (config plan.speed)",
	"hours of work on the first model, such as 48",
	"", // planHint
	"the same forms; +3d is 3 days from now, not from the start",
	"←/→ yes or no: a job that cannot checkpoint starts over when interrupted (a workshop, a load test)",
	"time between checkpoints, such as 15m or 1h",
	"wall time a start or a switch costs: provisioning, image, restore (0.2-0.3 h measured), such as 12m",
	"a comma list such as us-east-1,eastus; empty: every region the market shows",
	"strategies on time at least this often come first, cheapest expected first",
}
