package job

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/gpumarket/gpumarket/ledger"
)

// enoughRuns ends a review's count of runs: at 32 when all agree (the
// usual case of a job on its course; a 90 % chance gives 32 of 32 once in
// 30), else once the sampling error is 3 points, at most 256 runs (3.1).
func enoughRuns(on, n int) bool {
	if n >= 256 || n >= 32 && (on == 0 || on == n) {
		return true
	}
	p := float64(on) / float64(max(n, 1))
	return n >= 64 && p*(1-p)/float64(n) <= 0.03*0.03
}

// oddsMargin is how far below the plan's on-time share the chance falls
// before the driver says so: about three sampling errors.
const oddsMargin = 10.0

// odds recomputes the job's on-time chance from where it stands, on the
// capacity seen now, and alerts once when it falls below the plan's.
func (r *jobRun) odds(up []bool) {
	h := fnv.New64a()
	h.Write([]byte(r.j.ID))
	o := r.lj.Odds(r.p.LiveState, up, h.Sum64(), enoughRuns)
	if math.IsNaN(o) {
		r.p.OnTime = nil
		return
	}
	r.p.OnTime = &o
	low := 100*o < r.j.Plan.OnTimePct-oddsMargin
	if low && !r.p.OddsLow && r.d.opt.Alert != nil {
		r.d.opt.Alert(r.j, fmt.Sprintf("%s/odds-%d", r.j.ID, r.j.Seq), fmt.Sprintf("job %s: on-time chance now %.0f %%, the plan said %.0f %% (%.1f h of %g done, deadline %s)",
			r.j.ID, 100*o, r.j.Plan.OnTimePct, r.p.Progress(), r.lj.Work, r.lj.Deadline.UTC().Format("Jan 2 15:04 UTC")))
	}
	r.p.OddsLow = low
}

// OnTimePct is the job's chance of finishing by its deadline as its last
// review computed it, in percent; ok is false before any did.
func OnTimePct(j ledger.Job) (pct float64, ok bool) {
	var p struct {
		OnTime *float64 `json:"on_time"`
	}
	if json.Unmarshal(j.Progress, &p) != nil || p.OnTime == nil {
		return 0, false
	}
	return 100 * *p.OnTime, true
}
