package cmd

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/ledger"
)

// jobFields are the JSON fields of `job show`, in order.
var jobFields = []string{"id", "state", "strategy", "gpus", "hours", "work_done_hours", "start", "deadline", "finished_at", "spent_usd",
	"plan_expected_usd", "plan_p95_usd", "plan_on_time_pct", "on_time_pct", "max_usd", "hold_usd", "reason", "outlook", "progress_source", "rows", "moves"}

func TestJobStartRefusesBadUsage(t *testing.T) {
	ok := []string{"job", "start", "--gpus", "16", "--gpu", "H100", "--hours", "48", "--deadline", "+72h", "--dry-run"}
	with := func(extra ...string) []string { return append(slices.Clone(ok), extra...) }
	cases := []struct {
		args []string
		want string
	}{
		{with("--strategy", "capacity-block"), "--strategy \"capacity-block\": want one of spot+od-planner"},
		{with("--max-usd", "-5"), "--max-usd -5"},
		{with("--max-usd", "NaN"), "--max-usd"},
		{with("--progress-file", "/a", "--progress-command", "b"), "--progress-file and --progress-command"},
		{with("--runs", "0"), "--runs"},
		{with("-o", "yaml"), "-o"},
		{[]string{"job", "start", "--gpus", "16", "--gpu", "H100", "--hours", "48"}, "needs a confirmation"},
		{[]string{"job", "start", "--gpu", "H100", "--hours", "48", "--dry-run"}, "--deadline is required"},
		{[]string{"job", "show", "NOSUCHJOB"}, "no job \"NOSUCHJOB\""},
		{[]string{"job", "cancel", " "}, "ID is empty"},
		{[]string{"job", "list", "-o", "xml"}, "-o"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, c.args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q: want exit 2 and one line naming %s", code, stdout, stderr, c.want)
			}
		})
	}
}

func TestJobStartRunShowCancel(t *testing.T) {
	isolate(t)
	start := []string{"job", "start", "--gpus", "16", "--gpu", "H100", "--hours", "48", "--deadline", "+72h", "--runs", "500", "-o", "json"}
	code, out, errOut := runIn(append(slices.Clone(start), "--dry-run")...)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	// Without --max-usd the job has no limit of its own: null, not 0.
	if dry, _ := jsonRows(t, out); len(dry) != 1 || dry[0]["state"] != "dry-run" || dry[0]["max_usd"] != nil || !(dry[0]["hold_usd"].(float64) > 0) {
		t.Errorf("dry run row %v: want state dry-run, max_usd null and a hold", dry)
	}
	for _, want := range []string{"Hold: $", "spot+od-planner: expected $", "on-demand", "While none runs, no move is made", "nothing was recorded"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the confirmation does not say %q:\n%s", want, errOut)
		}
	}
	if code, out, _ := runIn("job", "list", "-o", "json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("a dry run recorded a job: %s", out)
	}
	// A hold over budget.max_booking_usd (5,000 by default) is refused.
	if code, _, errOut := runIn(append(slices.Clone(start), "--yes", "--max-usd", "99999")...); code != 1 || !strings.Contains(errOut, "max_booking_usd") {
		t.Errorf("a hold over the cap: exit %d: %s", code, errOut)
	}
	code, out, errOut = runIn(append(slices.Clone(start), "--yes", "--max-usd", "4500")...)
	if code != 0 {
		t.Fatalf("start: exit %d: %s", code, errOut)
	}
	var started []map[string]any
	if err := json.Unmarshal([]byte(out), &started); err != nil || len(started) != 1 {
		t.Fatalf("start printed %q: %v", out, err)
	}
	id := started[0]["id"].(string)
	if started[0]["state"] != "scheduled" || started[0]["max_usd"] != 4500.0 || started[0]["hold_usd"] != 4500.0 {
		t.Errorf("started %v", started[0])
	}
	// Its start is the next minute: a review then launches its first fleet.
	time.Sleep(time.Until(time.Now().Truncate(time.Minute).Add(time.Minute + 100*time.Millisecond)))
	if code, _, errOut := runIn("job", "run", "--once"); code != 0 {
		t.Fatalf("run --once: exit %d: %s", code, errOut)
	}
	code, out, _ = runIn("job", "show", id[:8], "-o", "json")
	if code != 0 {
		t.Fatalf("show: exit %d", code)
	}
	keys := jsonKeys(t, []byte(strings.TrimSpace(out))[1:])
	if !slices.Equal(keys, jobFields) {
		t.Errorf("job show fields %v, want %v", keys, jobFields)
	}
	var shown []struct {
		State     string   `json:"state"`
		OnTimePct *float64 `json:"on_time_pct"`
		SpentUSD  float64  `json:"spent_usd"`
		Rows      []struct {
			Kind, State string
			SoFar       *float64 `json:"cost_so_far_usd"`
		} `json:"rows"`
		Moves []struct{ From, To, Reason string } `json:"moves"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil || len(shown) != 1 {
		t.Fatalf("show: %v %q", err, out)
	}
	if shown[0].State != "running" || len(shown[0].Rows) == 0 || len(shown[0].Moves) == 0 || shown[0].Rows[0].Kind != "fleet" {
		t.Errorf("after a review: %+v", shown[0])
	}
	// Spent is its rows' cost so far, as of the same moment.
	sum := 0.0
	for _, r := range shown[0].Rows {
		if r.SoFar != nil {
			sum += *r.SoFar
		}
	}
	if math.Abs(shown[0].SpentUSD-sum) > 0.01*float64(len(shown[0].Rows)) {
		t.Errorf("spent_usd %.4f, its rows' cost_so_far_usd sum to %.4f", shown[0].SpentUSD, sum)
	}
	// The safety net keeps the deadline: the review's chance is the plan's.
	if o := shown[0].OnTimePct; o == nil || *o != 100 {
		t.Errorf("on_time_pct after a review: %v, want 100", o)
	}
	if code, out, _ := runIn("job", "show", id); code != 0 || !strings.Contains(out, "on time    100% chance as of its last review (plan 100%)") {
		t.Errorf("job show (text): exit %d:\n%s", code, out)
	}
	if code, out, errOut := runIn("job", "cancel", id, "-o", "json"); code != 0 || !strings.Contains(out, `"state":"cancelled"`) {
		t.Errorf("cancel: exit %d %s %s", code, out, errOut)
	}
	if code, _, _ := runIn("job", "cancel", id); code != 1 {
		t.Errorf("cancelling a cancelled job: exit %d, want 1", code)
	}
}

// A job's spent is its rows' cost so far as of the moment shown, not the
// figure its driver saved at the last review (a stopped driver saves none).
func TestJobSpentIsItsRowsCostSoFar(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	j := ledger.Job{ID: "01JOBSPENT0000000000000000", State: ledger.JobRunning, SpentUSD: 1}
	rows := []ledger.Entry{
		{ID: "r1", Kind: ledger.KindFleet, State: ledger.StateActive, ProviderRef: "f1", USDHour: 100, Start: now.Add(-2 * time.Hour)},
		{ID: "r2", Kind: ledger.KindFleet, State: ledger.StateDeleted, ProviderRef: "f2", USDHour: 50, Start: now.Add(-4 * time.Hour), End: now.Add(-3 * time.Hour)},
	}
	if got := jobRowOf(j, rows, nil, now).SpentUSD; math.Abs(got-250) > 1e-9 {
		t.Errorf("spent %.4f, want the rows' 250.00", got)
	}
	if got := jobRowOf(j, nil, nil, now).SpentUSD; got != 1 {
		t.Errorf("rows not read: spent %.4f, want the saved 1.00", got)
	}
}
