package sim

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

func fleetSpec() domain.FleetSpec {
	return domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g5.xlarge", "g6.xlarge"}, TargetCapacity: 4, OnDemandBase: 1, ClientToken: "intent-1"}
}

func TestFleetValidation(t *testing.T) {
	m := newAt(1, wed)
	for _, tc := range []struct {
		name   string
		change func(s *domain.FleetSpec)
		err    string
	}{
		{"unknown region", func(s *domain.FleetSpec) { s.Region = "mars-1" }, "the simulated market has us-east-1"},
		{"no types", func(s *domain.FleetSpec) { s.InstanceTypes = nil }, "at least one instance type"},
		{"type not sold", func(s *domain.FleetSpec) { s.InstanceTypes = []string{"p5e.48xlarge"} }, "not sold in us-east-1"},
		{"unknown zone", func(s *domain.FleetSpec) { s.Zones = []string{"us-east-1e"} }, "has zones us-east-1a"},
		{"zero target", func(s *domain.FleetSpec) { s.TargetCapacity, s.OnDemandBase = 0, 0 }, "target capacity 0"},
		{"base over target", func(s *domain.FleetSpec) { s.OnDemandBase = 5 }, "on-demand base 5"},
		{"negative base", func(s *domain.FleetSpec) { s.OnDemandBase = -1 }, "on-demand base -1"},
		{"bad strategy", func(s *domain.FleetSpec) { s.Strategy = "cheapest" }, "price-capacity-optimized, capacity-optimized, lowest-price, diversified"},
		{"zero max price", func(s *domain.FleetSpec) { s.MaxPriceUSD = domain.Float(0) }, "max price"},
		{"other provider", func(s *domain.FleetSpec) { s.Provider = "aws" }, "provider \"aws\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fleetSpec()
			tc.change(&s)
			for _, dry := range []bool{true, false} {
				s.DryRun = dry
				if _, err := m.LaunchFleet(ctx, s); err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("dry run %v: %v, want an error saying %q", dry, err, tc.err)
				}
			}
		})
	}
	if len(m.fleets) != 0 {
		t.Errorf("refused launches left %d fleets", len(m.fleets))
	}
}

func TestFleetIdempotentAndDryRun(t *testing.T) {
	m := newAt(1, wed)
	s := fleetSpec()
	s.DryRun = true
	dry, err := m.LaunchFleet(ctx, s)
	if err != nil || !dry.DryRun || dry.ID != "" || !strings.Contains(dry.Message, "would have succeeded") || len(m.fleets) != 0 {
		t.Fatalf("dry run: %+v, %v, %d fleets", dry, err, len(m.fleets))
	}
	s.DryRun = false
	f, err := m.LaunchFleet(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^fleet-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(f.ID) {
		t.Errorf("fleet id %q, want fleet- and a UUID", f.ID)
	}
	if f.State != "active" || f.Instances != 4 || f.Target != 4 || f.EstimatedUSDh <= 0 {
		t.Errorf("fleet %+v", f)
	}
	again, err := m.LaunchFleet(ctx, s)
	if err != nil || again.ID != f.ID || len(m.fleets) != 1 {
		t.Errorf("same client token: %+v, %v, %d fleets; want fleet %s again", again, err, len(m.fleets), f.ID)
	}
	if other, _ := newAt(1, wed).LaunchFleet(ctx, s); other.ID != f.ID {
		t.Errorf("same token and seed in a fresh market gave %s, want %s", other.ID, f.ID)
	}
	changed := s
	changed.TargetCapacity = 5
	if _, err := m.LaunchFleet(ctx, changed); err == nil || !strings.Contains(err.Error(), "IdempotentParameterMismatch") {
		t.Errorf("same token, other request: %v", err)
	}
	s.ClientToken = ""
	a, _ := m.LaunchFleet(ctx, s)
	b, _ := m.LaunchFleet(ctx, s)
	if a.ID == b.ID || a.ID == f.ID {
		t.Errorf("launches without a token got ids %s and %s", a.ID, b.ID)
	}

	got, err := m.DescribeFleet(ctx, "us-east-1", f.ID)
	if err != nil || got.ID != f.ID || got.Instances != 4 {
		t.Errorf("describe: %+v, %v", got, err)
	}
	if _, err := m.DescribeFleet(ctx, "us-west-2", f.ID); err == nil {
		t.Error("describe in another region found the fleet")
	}
	if err := m.DeleteFleet(ctx, "us-east-1", f.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.DescribeFleet(ctx, "us-east-1", f.ID); got.State != "deleted" || got.Instances != 0 || got.EstimatedUSDh != 0 {
		t.Errorf("after delete: %+v", got)
	}
	if err := m.DeleteFleet(ctx, "us-east-1", "fleet-nope"); err == nil {
		t.Error("deleting an unknown fleet: no error")
	}
}

// TestFleetMaxPrice: spot instances go to no pool over the max price;
// with none under it, only the on-demand base runs and the answer says why
// the rest did not launch (an instant fleet does not try again).
func TestFleetMaxPrice(t *testing.T) {
	m := newAt(1, wed)
	types := []string{"g4dn.xlarge", "g5.xlarge", "g6.xlarge", "g6e.xlarge"}
	fl, err := m.LaunchFleet(ctx, domain.FleetSpec{Region: "us-east-1", InstanceTypes: types, TargetCapacity: 3, OnDemandBase: 1, MaxPriceUSD: domain.Float(0.001), ClientToken: "cheapskate"})
	if err != nil || fl.Instances != 1 || fl.State != "active" || !strings.Contains(fl.Message, "2 spot instances not launched: no pool is under the max price") {
		t.Errorf("max price under every pool: %+v, %v; want 1 on-demand running and 2 not launched", fl, err)
	}
}

// The simulated market honours a fleet's schedule in memory
// with its clock — scheduled, then running, then ended at its end whoever
// deletes it — so the flow works with no account; and it finds a fleet by
// its client token, so a launch whose answer was lost is settled.
func TestFleetHonoursItsScheduleInMemory(t *testing.T) {
	now := wed
	m := New(Options{Seed: 1, Now: func() time.Time { return now }})
	s := fleetSpec()
	// On-demand only: the schedule, not the pools' capacity, decides what
	// runs (TestFleetScheduledIsPlacedAtItsStart has spot).
	s.OnDemandBase = s.TargetCapacity
	s.Start, s.End = wed.Add(time.Hour), wed.Add(4*time.Hour)
	f, err := m.LaunchFleet(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at        time.Time
		state     string
		instances int
	}{
		{wed, "scheduled", 0},
		{s.Start.Add(-time.Second), "scheduled", 0},
		{s.Start, "active", 4},
		{s.End.Add(-time.Second), "active", 4},
		{s.End, "ended", 0},
		{s.End.Add(24 * time.Hour), "ended", 0},
	} {
		now = step.at
		d, err := m.DescribeFleet(ctx, "us-east-1", f.ID)
		if err != nil || d.State != step.state || d.Instances != step.instances || (d.EstimatedUSDh > 0) != (step.instances > 0) {
			t.Errorf("at %s: %+v, %v; want %s with %d instances, billing only while they run", step.at.Sub(s.Start), d, err, step.state, step.instances)
		}
		found, err := m.FindFleet(ctx, "us-east-1", s.ClientToken)
		if err != nil || found == nil || found.ID != f.ID || found.State != step.state {
			t.Errorf("at %s: FindFleet %+v, %v", step.at.Sub(s.Start), found, err)
		}
	}
	if found, err := m.FindFleet(ctx, "us-east-1", "no-such-token"); found != nil || err != nil {
		t.Errorf("FindFleet of a token never launched: %+v, %v", found, err)
	}
	late := fleetSpec()
	late.ClientToken, late.End = "intent-2", now.Add(-time.Minute)
	if _, err := m.LaunchFleet(ctx, late); err == nil || !strings.Contains(err.Error(), "has passed") {
		t.Errorf("a launch past its end: %v", err)
	}
}
