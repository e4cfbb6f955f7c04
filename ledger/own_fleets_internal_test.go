package ledger

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/planner"
)

// TestPlanLearnsFromKeptFleetUsage: the usage the ledger keeps for the
// user's spot fleets becomes, per pool, the instance-hours run and the
// instances taken back, which the next plan's risk of that pool is
// blended with and named by.
func TestPlanLearnsFromKeptFleetUsage(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(h float64) time.Time { return now.Add(time.Duration(h * float64(time.Hour))) }
	rows := []Entry{
		{ID: "f1", Kind: domain.KindFleet, Provider: "aws", Region: "us-east-1", InstanceType: "p5.48xlarge"},
		{ID: "b1", Kind: domain.KindBlock, Provider: "aws", Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p5.48xlarge"},
		{ID: "f2", Kind: domain.KindFleet, Provider: "aws", Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p5.48xlarge"},
	}
	kept := map[string]domain.UsageReport{
		"f1": {Instances: []domain.InstanceUsage{
			{ID: "i-1", Zone: "us-east-1b", Spot: true, Start: at(-30), End: at(-10), Interrupted: true},
			{ID: "i-2", Zone: "us-east-1b", Spot: true, Start: at(-12)},  // still runs
			{ID: "i-3", Zone: "us-east-1b", Start: at(-40), End: at(-1)}, // on-demand
			{ID: "i-4", Zone: "us-east-1a", Spot: true, Start: at(-5), End: at(-4), Interrupted: true},
			{ID: "i-5", Zone: "us-east-1b", Spot: true, Start: at(-24 * 200), End: at(-24 * 100), Interrupted: true}, // too old
		}},
		"b1": {Instances: []domain.InstanceUsage{{ID: "i-9", Spot: true, Start: at(-50), End: at(-1), Interrupted: true}}},
		"f2": {Instances: []domain.InstanceUsage{{ID: "i-6", Spot: true, Start: at(-6), End: at(-1), Interrupted: true}}},
	}
	load := func(id string) (domain.UsageReport, bool) { r, ok := kept[id]; return r, ok }
	own := planner.OwnFrom(fleetUsages(rows, load), now)
	b := domain.PoolKey{Provider: "aws", Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p5.48xlarge"}.String()
	a := domain.PoolKey{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge"}.String()
	if o := own[b]; math.Abs(o.Hours-37) > 1e-9 || o.Interruptions != 2 {
		t.Errorf("us-east-1b: %+v, want 37 h (20 + 12 + 5) and 2 interruptions", o)
	}
	if o := own[a]; math.Abs(o.Hours-1) > 1e-9 || o.Interruptions != 1 {
		t.Errorf("us-east-1a: %+v, want 1 h and 1 interruption", o)
	}
	if len(own) != 2 {
		t.Errorf("own %v: want the two spot pools only", own)
	}
	p := domain.Pool{Provider: "aws", Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1b", InstanceType: "p5.48xlarge",
		GPU: domain.GPUSpec{Model: "H100", Count: 8}}
	before := planner.PoolOf(p, 12, nil)
	after := planner.WithOwn([]planner.Pool{before}, own)[0]
	if !strings.HasPrefix(after.Risk.Source, "37 h of your own fleets") {
		t.Errorf("risk source %q: want it to name 37 h of your own fleets", after.Risk.Source)
	}
	want := (before.Risk.InterruptionsPerHour*24 + 2) / (24 + 37)
	if math.Abs(after.Risk.InterruptionsPerHour-want) > 1e-9 {
		t.Errorf("rate %.4f, want %.4f", after.Risk.InterruptionsPerHour, want)
	}
	// Unknown interruptions teach nothing.
	kept["f2"] = domain.UsageReport{InterruptionsUnknown: true, Instances: kept["f2"].Instances}
	if o := planner.OwnFrom(fleetUsages(rows, load), now)[b]; o.Hours != 32 || o.Interruptions != 1 {
		t.Errorf("with f2's interruptions unknown: %+v, want 32 h and 1", o)
	}
}
