package job_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// Each review stores the job's on-time chance from where it stands; a
// chance below the plan's alerts once.
func TestOddsAtEachReview(t *testing.T) {
	w := newFakeWorld(t)
	st, svc, _ := w.process(t)
	var alerts []string
	d := job.New(svc, []domain.Provider{w.fake}, job.Options{Now: w.clk.Now, Every: 10 * time.Minute, Lease: 30 * time.Minute,
		Alert: func(_ ledger.Job, key, text string) { alerts = append(alerts, key+": "+text) }})
	net := w.start(t, svc)
	spot := w.startLive(t, svc, tightSpot())
	ctx := context.Background()
	odds := func(id string) float64 {
		t.Helper()
		j, err := st.GetJob(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		pct, ok := job.OnTimePct(j)
		if !ok {
			t.Fatalf("job %s: no on-time chance stored (%s)", id, j.Progress)
		}
		return pct
	}
	var spotOdds []float64
	for i := range 3 {
		if _, err := d.Review(ctx); err != nil {
			t.Fatal(err)
		}
		if o := odds(net.ID); o != 100 {
			t.Errorf("review %d: the safety net's job on time %.1f %%, want 100", i, o)
		}
		spotOdds = append(spotOdds, odds(spot.ID))
		t.Logf("review %d: spot job on time %.1f %%", i, spotOdds[i])
		w.clk.Set(w.clk.Now().Add(2 * time.Hour))
	}
	if spotOdds[0] >= 90 || spotOdds[0] <= 0 {
		t.Errorf("spot alone on a tight deadline: on time %.1f %%, want well below the plan's 100", spotOdds[0])
	}
	if spotOdds[0] == spotOdds[1] && spotOdds[1] == spotOdds[2] {
		t.Errorf("the chance did not move in 4 h of the job: %v", spotOdds)
	}
	var oddsAlerts []string
	for _, a := range alerts {
		if strings.Contains(a, "/odds-") {
			oddsAlerts = append(oddsAlerts, a)
		}
	}
	if len(oddsAlerts) != 1 || !strings.HasPrefix(oddsAlerts[0], spot.ID+"/odds-") || !strings.Contains(oddsAlerts[0], "the plan said 100 %") {
		t.Errorf("want one alert of the spot job's chance: %q", oddsAlerts)
	}
	if slices.ContainsFunc(alerts, func(a string) bool { return strings.HasPrefix(a, net.ID+"/odds") }) {
		t.Errorf("the safety net's job alerted: %q", alerts)
	}
}

// tightSpot is spot alone, 20 h of work due in 26 h on pools up 80 % of
// the time: the plan's 100 % cannot hold, and the chance is unsure.
func tightSpot() planner.LiveJob {
	lj := planner.LiveJob{Policy: planner.StrategySpotMulti, Start: t0, Deadline: t0.Add(26 * time.Hour), Work: 20, D: 0.2, Checkpoint: 0.5}
	for _, z := range []string{"a", "b"} {
		lj.Lanes = append(lj.Lanes, planner.LiveLane{Pool: "aws/us-east-1/us-east-1" + z, Provider: "aws", Region: "us-east-1", Zone: "us-east-1" + z,
			InstanceType: "p5.48xlarge", Instances: 2, USDHour: 60, Speed: 1, Score: 62,
			Risk: planner.Risk{InterruptionsPerHour: 0.5, Availability: 0.8, GapMedianHours: 0.5}})
	}
	return lj
}

// The market's risk now, when the process reads one, replaces the plan's:
// a job priced on pools that never fail is unsure once they do.
func TestOddsReadTheMarketNow(t *testing.T) {
	w := newFakeWorld(t)
	st, svc, _ := w.process(t)
	calm := tightSpot()
	for i := range calm.Lanes {
		calm.Lanes[i].Risk = planner.Risk{}
	}
	j := w.startLive(t, svc, calm)
	ctx := context.Background()
	chance := func(risk func(string, int) (planner.Risk, bool)) float64 {
		t.Helper()
		d := job.New(svc, []domain.Provider{w.fake}, job.Options{Now: w.clk.Now, Every: 10 * time.Minute, Lease: 30 * time.Minute, Risk: risk})
		if _, err := d.Review(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ := st.GetJob(ctx, j.ID)
		pct, ok := job.OnTimePct(got)
		if !ok {
			t.Fatal("no chance stored")
		}
		return pct
	}
	if o := chance(nil); o != 100 {
		t.Errorf("on the plan's calm pools: %.1f %%, want 100", o)
	}
	var asked []string
	stormy := func(pool string, n int) (planner.Risk, bool) {
		asked = append(asked, fmt.Sprintf("%s×%d", pool, n))
		return tightSpot().Lanes[0].Risk, true
	}
	w.clk.Set(w.clk.Now().Add(31 * time.Minute)) // the first driver's lease lapses
	if o := chance(stormy); o >= 90 {
		t.Errorf("on pools that now fail: %.1f %%, want well below 100", o)
	}
	if len(asked) != 2 || asked[0] != "aws/us-east-1/us-east-1a×2" {
		t.Errorf("asked the market for %q, want each lane's pool and instances", asked)
	}
}
