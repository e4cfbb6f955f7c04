package planner

import (
	"math"
	"testing"
)

// TestKaplanMeier: lengths 1, 2, 3 (censored), 4 h. The survival falls to
// 3/4 at 1, 1/2 at 2 and 0 at 4: a censored 3 is no ending, so no
// quantile is 3.
func TestKaplanMeier(t *testing.T) {
	q, ok := kaplanMeier([]spell{{4, false}, {1, false}, {3, true}, {2, false}})
	if !ok || len(q) != gapSteps {
		t.Fatalf("%v %d", ok, len(q))
	}
	for _, c := range []struct {
		u    float64
		want float64
	}{{0.1, 1}, {0.24, 1}, {0.26, 2}, {0.49, 2}, {0.51, 4}, {0.99, 4}} {
		if got := q[int(c.u*gapSteps)]; got != c.want {
			t.Errorf("quantile %.2f: %v h, want %v", c.u, got, c.want)
		}
	}
	// Nothing ended in 5 h: lengths of about 5 h (an exponential).
	if q, ok := kaplanMeier([]spell{{5, true}}); !ok || math.Abs(q[gapSteps/2]-5*math.Ln2) > 0.01 {
		t.Errorf("a censored 5 h alone: median %v", q[gapSteps/2])
	}
	if _, ok := kaplanMeier(nil); ok {
		t.Error("a fit from nothing")
	}
	// All censored past the first ending: the tail goes on past the
	// longest length seen, an exponential with the mean per ending.
	q, _ = kaplanMeier([]spell{{1, false}, {10, true}})
	if q[gapSteps-1] <= 10 || q[gapSteps/4] != 1 {
		t.Errorf("tail %v, first quartile %v", q[gapSteps-1], q[gapSteps/4])
	}
}

// TestFittedDrawsMatchHistory: a pool whose runs are half 5 minutes and
// half 10 hours, gaps of an hour, over 30 days. Runs drawn from the fit
// end within 12 minutes about half the time (an exponential of the same
// mean: 4 %), and the pool is there about as often as in its history.
func TestFittedDrawsMatchHistory(t *testing.T) {
	var data []int
	for len(data) < 30*24*12 {
		data = append(data, 1)                                  // 5 min
		data = append(data, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // 1 h
		for range 120 {
			data = append(data, 1) // 10 h
		}
		data = append(data, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	tr := Trace{Name: "pool.json", GapSeconds: 300, Data: data}
	tl := tr.timeline(1)
	prior := scalePrior(DefaultPriors["V100"], middleBucket)
	r := FitRisk(tl, 0, tr.Hours(), prior, "pool.json")
	if r.Spells == nil || r.Source != "fitted on 725 h of pool.json" {
		t.Fatalf("%+v", r)
	}
	histAvail := 0.0
	for _, v := range data {
		histAvail += float64(v)
	}
	histAvail /= float64(len(data))
	if math.Abs(r.Availability-histAvail) > 0.03 {
		t.Errorf("fitted availability %.3f, history %.3f", r.Availability, histAvail)
	}
	g := newRenewal()
	g.setupSpells(r.Spells)
	var drawn timeline
	short, ended := 0, 0
	up, total := 0.0, 0.0
	for i := range 2000 {
		g.fill(&drawn, 1, uint64(i), 48)
		drawn.closeAt(48)
		runs, gaps := spellsOf(&drawn, 0, 48)
		for _, s := range runs {
			up += s.hours
			if !s.censored {
				ended++
				if s.hours <= 0.2 {
					short++
				}
			}
		}
		for _, s := range gaps {
			total += s.hours
		}
	}
	total += up
	if share := float64(short) / float64(ended); share < 0.4 || share > 0.6 {
		t.Errorf("%.2f of drawn runs end within 12 minutes; the history says 0.5", share)
	}
	if a := up / total; math.Abs(a-histAvail) > 0.05 {
		t.Errorf("drawn availability %.3f, history %.3f", a, histAvail)
	}
}
