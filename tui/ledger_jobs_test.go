package tui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/ledger"
)

// A job's line gives its on-time chance as its last review computed it,
// within 80 columns, beside the plan's; an ended job's chance is not shown.
func TestJobLineSaysTheOnTimeChance(t *testing.T) {
	v := &ledgerView{base: base{c: &common{styles: newStyles(true, true), now: nowFn}, w: 80, h: 24}}
	j := ledger.Job{ID: "01JOBONTIME00000000000000", State: ledger.JobRunning, Strategy: "spot-multi-pool",
		Terms: ledger.JobTerms{Hours: 48}, Plan: ledger.JobPlan{ExpectedUSD: 2360.95, OnTimePct: 100}, WorkDone: 12.25, SpentUSD: 512.4,
		Progress: json.RawMessage(`{"cur":0,"on_time":0.625}`)}
	// Two fleets of the job, $100/h for 2 h and $50/h for 1 h by now: the
	// line says their cost so far, not the figure the last review saved.
	now := nowFn()
	rows := []ledger.Entry{
		{ID: "r1", Kind: ledger.KindFleet, State: ledger.StateActive, ProviderRef: "f1", USDHour: 100, Start: now.Add(-2 * time.Hour)},
		{ID: "r2", Kind: ledger.KindFleet, State: ledger.StateDeleted, ProviderRef: "f2", USDHour: 50, Start: now.Add(-4 * time.Hour), End: now.Add(-3 * time.Hour)},
	}
	v.jobs = []jobLine{{job: j, rows: rows}}
	var b strings.Builder
	v.viewJobs(&b, now)
	if want := "· 12.2 h of 48 · on time 62% (plan 100%)"; !strings.Contains(b.String(), want) {
		t.Errorf("job line %q lacks %q", b.String(), want)
	}
	v.w = 160
	b.Reset()
	v.viewJobs(&b, now)
	if want := "(plan 100%) · $250.00 of plan $2360.95"; !strings.Contains(b.String(), want) {
		t.Errorf("job line %q lacks %q", b.String(), want)
	}
	v.w = 80
	if v.jobOf("r2") != short(j.ID) || v.jobOf("r3") != "" {
		t.Errorf("rows' job: r2 %q, r3 %q", v.jobOf("r2"), v.jobOf("r3"))
	}
	v.jobs[0].job.State = ledger.JobDone
	b.Reset()
	v.viewJobs(&b, nowFn())
	if strings.Contains(b.String(), "on time") {
		t.Errorf("a done job shows a chance: %q", b.String())
	}
}

// d asks what the row holds: a fleet gpumarket has yet to launch is
// cancelled, one scheduled at the cloud (it has a provider's id) is deleted
// there, a deleted one has nothing to delete.
func TestDeleteAsksWhatTheRowHolds(t *testing.T) {
	v := &ledgerView{base: base{c: &common{styles: newStyles(true, true), now: nowFn}, w: 80, h: 24}}
	row := ledger.Entry{ID: "01FLEETSCHEDULED000000000", Kind: ledger.KindFleet, State: ledger.StateScheduled,
		InstanceCount: 2, InstanceType: "p5.48xlarge", Region: "us-east-1", Provider: "sim", Start: nowFn().Add(time.Hour)}
	for _, c := range []struct {
		state, ref, title, verb string
	}{
		{ledger.StateScheduled, "", "Cancel the scheduled fleet …000000?", "cancel it"},
		{ledger.StateScheduled, "fleet-7", "Delete fleet fleet-7?", "delete it"},
		{ledger.StateActive, "fleet-7", "Delete fleet fleet-7?", "delete it"},
		{ledger.StateDeleted, "fleet-7", "", ""},
	} {
		r := row
		r.State, r.ProviderRef = c.state, c.ref
		v.rows, v.cur = []ledger.Entry{r}, 0
		a, cmd := v.deleteFleet()
		switch {
		case c.title == "" && (a != nil || cmd == nil):
			t.Errorf("%s %q: offered %+v, want a notice", c.state, c.ref, a)
		case c.title != "" && (a == nil || a.title != c.title || a.verb != c.verb || a.send == nil):
			t.Errorf("%s %q: got %+v, want %q to %s", c.state, c.ref, a, c.title, c.verb)
		}
	}
}
