package job

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"

	"github.com/gpumarket/gpumarket/ledger"
)

// Runs of a review's on-time chance: at least minRuns, more while the
// count is unsure (sampling error over 3 points, at most 256 runs) and the
// pass's budget of extraRuns a job lasts, so a review stays bounded.
const (
	minRuns   = 32
	maxRuns   = 256
	extraRuns = 32
)

// enough ends a count at minRuns when all runs agree (a 90 % chance gives
// 32 of 32 once in 30), else once sure or out of budget.
func (d *Driver) enough(on, n int) bool {
	if n < minRuns {
		return false
	}
	if n >= maxRuns || on == 0 || on == n || d.oddsLeft <= 0 {
		return true
	}
	p := float64(on) / float64(n)
	if p*(1-p)/float64(n) <= 0.03*0.03 {
		return true
	}
	d.oddsLeft--
	return false
}

// oddsMargin is how far below the plan's on-time share the chance falls
// before the driver says so: about three sampling errors.
const oddsMargin = 10.0

// odds recomputes the job's on-time chance from where it stands, on the
// market now, and alerts once when it falls below the plan's.
func (r *jobRun) odds(up []bool) {
	if r.d.opt.Risk != nil {
		for i := range r.lj.Lanes {
			if rk, ok := r.d.opt.Risk(r.lj.Lanes[i].Pool, r.lj.Lanes[i].Instances); ok {
				r.lj.Lanes[i].Risk = rk
			}
		}
	}
	h := fnv.New64a()
	h.Write([]byte(r.j.ID))
	o := r.lj.Odds(r.p.LiveState, up, h.Sum64(), r.d.enough)
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
