package ledger

import (
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/domain"
)

// An interruption before the span asked for is not one of the span's,
// though the instance's run overlaps nothing of it; one inside is.
func TestInterruptionsBeforeTheSpanNotCounted(t *testing.T) {
	row := fleet("f", 2, 0, 0, 0.5, StateActive)
	early := running("i-1", 0, 5, 1)
	early.End, early.Interrupted = at(5), true
	inside := running("i-2", 0, 15, 1)
	inside.End, inside.Interrupted = at(15), true
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"f": {Source: "gpu", Instances: []domain.InstanceUsage{early, inside}}}}
	got := oneRow(t, compute(t, []Entry{row}, fr, 10, 20, 0))
	if got.Interruptions != 1 {
		t.Errorf("interruptions since 10:00 = %d, want 1 (the one at 15:00, not the one at 05:00)", got.Interruptions)
	}
}

// Metrics that cover only part of what ran are said, with the share they
// cover: here 7 of 10 hours.
func TestPartialMetricsAreSaid(t *testing.T) {
	row := fleet("f", 1, 0, 0, 0.5, StateActive)
	in := running("i-1", 0, 10, 1)
	in.Busy = in.Busy[:7]
	fr := &fakeReporter{reports: map[string]domain.UsageReport{"f": {Source: "gpu", Instances: []domain.InstanceUsage{in}}}}
	got := oneRow(t, compute(t, []Entry{row}, fr, -48, 10, 0))
	if !strings.Contains(got.Note, "metrics cover 70% of the running GPU-hours") {
		t.Errorf("note %q, want it to say the metrics cover 70%%", got.Note)
	}
	in.Busy = running("i-1", 0, 10, 1).Busy[:10]
	fr.reports["f"] = domain.UsageReport{Source: "gpu", Instances: []domain.InstanceUsage{in}}
	if got := oneRow(t, compute(t, []Entry{row}, fr, -48, 10, 0)); strings.Contains(got.Note, "metrics cover") {
		t.Errorf("metrics covering all: note %q", got.Note)
	}
}
