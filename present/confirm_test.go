package present

import (
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// TestJobSummaryLimit: the confirmation names the limit the job fails at:
// --max-usd when given, else the whole hold.
func TestJobSummaryLimit(t *testing.T) {
	p := job.Proposal{Result: planner.Result{P95CostUSD: 900}, HoldUSD: 1200}
	for _, tc := range []struct {
		maxUSD float64
		want   string
	}{{0, "limit      $1200.00:"}, {4000, "limit      $4000.00:"}} {
		req := job.Request{Strategy: planner.StrategySafetyNet, MaxUSD: tc.maxUSD, Job: planner.Job{GPUs: 8, Models: []string{"H100"}, Hours: 4}}
		if got := JobSummary(req, p, ledger.Budget{}, false); !strings.Contains(got, tc.want) {
			t.Errorf("--max-usd %v: summary lacks %q:\n%s", tc.maxUSD, tc.want, got)
		}
	}
}
