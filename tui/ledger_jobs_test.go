package tui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/ledger"
)

// A job's line gives its on-time chance as its last review computed it,
// within 80 columns, beside the plan's; an ended job's chance is not shown.
func TestJobLineSaysTheOnTimeChance(t *testing.T) {
	v := &ledgerView{c: &common{styles: newStyles(true, true), now: nowFn}, w: 80, h: 24}
	j := ledger.Job{ID: "01JOBONTIME00000000000000", State: ledger.JobRunning, Strategy: "spot-multi-pool",
		Terms: ledger.JobTerms{Hours: 48}, Plan: ledger.JobPlan{ExpectedUSD: 2360.95, OnTimePct: 100}, WorkDone: 12.25, SpentUSD: 512.4,
		Progress: json.RawMessage(`{"cur":0,"on_time":0.625}`)}
	v.jobs = []jobLine{{job: j, rows: []string{"r1", "r2"}}}
	var b strings.Builder
	v.viewJobs(&b, nowFn())
	if want := "· 12.2 h of 48 · on time 62% (plan 100%)"; !strings.Contains(b.String(), want) {
		t.Errorf("job line %q lacks %q", b.String(), want)
	}
	v.jobs[0].job.State = ledger.JobDone
	b.Reset()
	v.viewJobs(&b, nowFn())
	if strings.Contains(b.String(), "on time") {
		t.Errorf("a done job shows a chance: %q", b.String())
	}
}
