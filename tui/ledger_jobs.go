package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
)

// jobLine is a job as the Ledger view lists it, with its rows.
type jobLine struct {
	job  ledger.Job
	rows []ledger.Entry
}

// shownJobs bounds the jobs the Ledger view lists over its rows.
const shownJobs = 3

// loadJobs reads the newest jobs and their rows' ids.
func loadJobs(ctx context.Context, st *ledger.Store) ([]jobLine, error) {
	js, err := st.ListJobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []jobLine
	for _, j := range js[:min(len(js), shownJobs)] {
		rows, err := st.JobRows(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, jobLine{job: j, rows: rows})
	}
	return out, nil
}

// viewJobs writes the jobs part over the rows: each job's progress, spent
// against its plan, and its rows; it returns the lines it used.
func (v *ledgerView) viewJobs(b *strings.Builder, now time.Time) int {
	if len(v.jobs) == 0 || v.h < 12 {
		return 0
	}
	st := &v.c.styles
	used := 0
	for _, l := range v.jobs {
		j := l.job
		odds := ""
		if pct, ok := job.OnTimePct(j); ok && ledger.JobActive(j.State) {
			odds = fmt.Sprintf(" · on time %.0f%% (plan %.0f%%)", pct, j.Plan.OnTimePct)
		}
		line := fmt.Sprintf("job %s %s %s · %.1f h of %g%s · $%.2f of plan $%.2f · %s", short(j.ID), j.State, j.Strategy,
			j.WorkDone, j.Terms.Hours, odds, ledger.JobSpent(l.rows, now), j.Plan.ExpectedUSD, plural(len(l.rows), "row"))
		if j.Reason != "" && !ledger.JobActive(j.State) {
			line += " · " + j.Reason
		} else if j.Outlook != "" {
			line += " · " + j.Outlook
		}
		b.WriteString("\n" + st.dim.Render(fit(line, v.w, false)))
		used++
	}
	return used
}

// jobOf is the short id of the listed job a row is a launch of, or "".
func (v *ledgerView) jobOf(rowID string) string {
	for _, l := range v.jobs {
		if slices.ContainsFunc(l.rows, func(r ledger.Entry) bool { return r.ID == rowID }) {
			return short(l.job.ID)
		}
	}
	return ""
}
