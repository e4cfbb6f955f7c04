package planner

import (
	"math"
	"testing"
)

// Spot that comes up when the slack is less than a changeover is not
// taken: were it lost at once, the changeover back to on-demand would
// make the job late. 10 h of work due at 20 h, a 0.5 h changeover, every
// pool expected up (no reserve): idle while spot is down, spot comes up
// at 9.2 h with 0.3 h of slack, so the planner takes on-demand then and
// finishes at 19.7 h having paid on-demand only.
func TestPlannerSkipsSpotWithLessSlackThanAChangeover(t *testing.T) {
	sp := spec{work: 10, deadline: 20, d: 0.5, horizon: 40}
	lanes := []lane{{usdHour: 1, speed: 1, score: 1, tl: fixed(true, 9.2, 9.8)}}
	r := &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3, speed: 1}}
	o := r.exec(planner{anyAvail: 1, cooldown: cooldown})
	if !o.done || math.Abs(o.finish-19.7) > 1e-9 || math.Abs(o.cost-3*10.5) > 1e-9 {
		t.Errorf("%+v; want on-demand from 9.2 h, done at 19.7 h for $31.50", o)
	}
}

// From on-demand the planner goes back to spot only once the slack, less
// two changeovers (there and, if spot is lost, back), covers its reserve.
// Spot never seen (availability 0.5): on-demand from the start with 9.5 h
// of slack. The reserve is the smaller of Uniform Progress's line,
// 9.5·(20−t)/20, and the expected wait, the work left. Spot comes up at
// 1.5 h, when 9.5 − 2·0.5 = 8.5 is below the reserve (8.79); the planner
// looks again every quarter hour and leaves at 2 h (reserve 8.5).
func TestPlannerBackToSpotKeepsTwoChangeovers(t *testing.T) {
	sp := spec{work: 10, deadline: 20, d: 0.5, horizon: 40}
	lanes := []lane{{usdHour: 1, speed: 1, score: 1, tl: fixed(true, 1.5)}}
	r := &run{sp: &sp, lanes: lanes, od: &lane{usdHour: 3, speed: 1}}
	o := r.exec(planner{anyAvail: 0.5, cooldown: cooldown})
	if !o.done || o.finish > 20 || math.Abs(o.odHours-2) > 1e-9 {
		t.Errorf("%+v; want on-demand for 2 h, then spot", o)
	}
}
