package aws

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

// testClock is a clock the fake and the provider share, moved by a test.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func fleetSpec() domain.FleetSpec {
	return domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6e.xlarge", "g6.xlarge"}, TargetCapacity: 3, ClientToken: "L9", Actor: "alice@host"}
}

// `fleet launch --target 4294967298` was sent as
// TotalTargetCapacity 2.
func TestFleetTargetBeyondTheAPILimitIsRefused(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1" })
	for _, target := range []int{4294967298, math.MaxInt32 + 1, MaxFleetTarget + 1} {
		spec := fleetSpec()
		spec.TargetCapacity = target
		_, err := p.LaunchFleet(context.Background(), spec)
		if err == nil || !strings.Contains(err.Error(), "10000") ||
			!errors.Is(err, domain.ErrInvalidQuery) || !errors.Is(err, domain.ErrDeclined) || !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("target %d: %v; want a refusal naming the limit, matching ErrInvalidQuery and ErrDeclined", target, err)
		}
		if _, err := p.ValidateFleet(spec); err == nil {
			t.Errorf("ValidateFleet accepted target %d", target)
		}
	}
	if n := f.fake.Count("CreateFleet", ""); n != 0 {
		t.Fatalf("%d CreateFleet calls for targets beyond the limit", n)
	}
	spec := fleetSpec()
	spec.TargetCapacity, spec.DryRun = MaxFleetTarget, true
	if _, err := p.LaunchFleet(context.Background(), spec); err != nil {
		t.Fatalf("dry run of %d instances: %v", MaxFleetTarget, err)
	}
	if c := f.fake.Calls(); len(c) == 0 || c[len(c)-1].Params.Get("TargetCapacitySpecification.TotalTargetCapacity") != "10000" {
		t.Errorf("the limit itself was not sent as asked")
	}
}

// A fleet that starts and ends at the cloud, even if gpumarket
// is not running then.
func TestScheduledFleetStartsAndEndsAtTheCloud(t *testing.T) {
	// The views that schedule a fleet (the Plan view) ask the descriptor
	// whether the provider does what this test shows.
	if !Descriptor.SchedulesFleets {
		t.Fatal("the AWS descriptor does not say it schedules fleets")
	}
	clock := &testClock{t: testNow}
	f := newFixture(t, "us-east-1")
	f.fake.Now = clock.Now
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1"; o.Now = clock.Now })
	start := testNow.Add(2 * time.Hour)
	end := start.Add(3 * time.Hour)
	spec := fleetSpec()
	// Asked to the nanosecond: the fleet must not end later than asked.
	spec.Start, spec.End = start, end.Add(900*time.Millisecond)

	dry := spec
	dry.DryRun = true
	if fl, err := p.LaunchFleet(context.Background(), dry); err != nil || !fl.DryRun || !strings.Contains(fl.Message, "terminates") {
		t.Fatalf("dry run: %+v, %v", fl, err)
	}
	fl, err := p.LaunchFleet(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if fl.State != "scheduled" || fl.Instances != 0 || fl.ID == "" {
		t.Errorf("launched: %+v; want a scheduled fleet with nothing running yet", fl)
	}
	var sent []ec2test.Call
	for _, c := range f.fake.Calls() {
		if c.Action == "CreateFleet" {
			sent = append(sent, c)
		}
	}
	if len(sent) != 2 || sent[0].Params.Get("DryRun") != "true" || sent[1].Params.Get("DryRun") == "true" {
		t.Fatalf("%d CreateFleet calls, want the dry run then one launch", len(sent))
	}
	for _, c := range sent {
		q := c.Params
		from, err1 := time.Parse(time.RFC3339, q.Get("ValidFrom"))
		until, err2 := time.Parse(time.RFC3339, q.Get("ValidUntil"))
		if err1 != nil || err2 != nil || !from.Equal(start) || !until.Equal(end) {
			t.Errorf("ValidFrom %q ValidUntil %q, want %s and %s", q.Get("ValidFrom"), q.Get("ValidUntil"), start, end)
		}
		if until.After(spec.End) {
			t.Errorf("ValidUntil %s is later than the asked end %s", until, spec.End)
		}
		if q.Get("Type") != "request" || q.Get("TerminateInstancesWithExpiration") != "true" {
			t.Errorf("Type %q TerminateInstancesWithExpiration %q, want request and true", q.Get("Type"), q.Get("TerminateInstancesWithExpiration"))
		}
		if q.Get("TagSpecification.1.ResourceType") != "fleet" || q.Get("TagSpecification.2.ResourceType") != "" {
			t.Errorf("tag specifications for %q and %q; a request fleet tags only itself", q.Get("TagSpecification.1.ResourceType"), q.Get("TagSpecification.2.ResourceType"))
		}
	}
	rec := f.fake.Fleets()[0]
	if !rec.TerminateAtEnd || !rec.ValidUntil.Equal(end) || rec.Tags[domain.TagRef] != "L9" || rec.Tags[domain.TagActor] != "alice@host" {
		t.Errorf("fleet at the fake: %+v", rec)
	}
	for _, step := range []struct {
		at        time.Time
		state     string
		instances int
	}{
		{testNow, "scheduled", 0},
		{start.Add(-time.Second), "scheduled", 0},
		{start.Add(time.Hour), "active", 3},
		{end.Add(-time.Second), "active", 3},
		{end, "ended", 0},
		{end.Add(time.Hour), "ended", 0},
	} {
		clock.Set(step.at)
		d, err := p.DescribeFleet(context.Background(), "us-east-1", fl.ID)
		if err != nil || d.State != step.state || d.Instances != step.instances {
			t.Errorf("at %s: %+v, %v; want %s with %d instances", step.at.Sub(start), d, err, step.state, step.instances)
		}
		found, err := p.FindFleet(context.Background(), "us-east-1", "L9")
		if err != nil || found == nil || found.ID != fl.ID || found.State != step.state {
			t.Errorf("at %s: FindFleet %+v, %v", step.at.Sub(start), found, err)
		}
	}
}

func TestScheduledFleetWithOnlyAnEndStartsNow(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1" })
	spec := fleetSpec()
	spec.End = testNow.Add(90 * time.Minute)
	fl, err := p.LaunchFleet(context.Background(), spec)
	if err != nil || fl.State != "active" {
		t.Fatalf("launch: %+v, %v", fl, err)
	}
	c := f.fake.Calls()[len(f.fake.Calls())-1]
	if c.Params.Get("Type") != "request" || c.Params.Get("ValidFrom") != "" || c.Params.Get("ValidUntil") == "" {
		t.Errorf("sent Type %q ValidFrom %q ValidUntil %q", c.Params.Get("Type"), c.Params.Get("ValidFrom"), c.Params.Get("ValidUntil"))
	}
	if d, err := p.DescribeFleet(context.Background(), "us-east-1", fl.ID); err != nil || d.State != "active" || d.Instances != 3 {
		t.Errorf("describe: %+v, %v", d, err)
	}
}

func TestScheduledFleetBadScheduleRefused(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1" })
	for name, mod := range map[string]func(*domain.FleetSpec){
		"end before start": func(s *domain.FleetSpec) { s.Start, s.End = testNow.Add(2*time.Hour), testNow.Add(time.Hour) },
		"end in the past":  func(s *domain.FleetSpec) { s.End = testNow.Add(-time.Hour) },
		"end at the start": func(s *domain.FleetSpec) { s.Start, s.End = testNow.Add(time.Hour), testNow.Add(time.Hour) },
	} {
		spec := fleetSpec()
		mod(&spec)
		if _, err := p.LaunchFleet(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "end") || !errors.Is(err, domain.ErrDeclined) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := f.fake.Count("CreateFleet", ""); n != 0 {
		t.Errorf("%d CreateFleet calls for bad schedules", n)
	}
}

// An instant fleet is listed by DescribeFleets only by id (API reference):
// the one whose answer was lost is found through its tagged instances.
func TestInstantFleetIsTaggedAndFoundByItsToken(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.AddFault(ec2test.Fault{Action: "CreateFleet", Drop: true, AfterApply: true, Times: 1})
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1"; o.MaxAttempts = 1 })
	if _, err := p.LaunchFleet(context.Background(), fleetSpec()); err == nil {
		t.Fatal("a launch whose answer was lost succeeded")
	}
	recs := f.fake.Fleets()
	if len(recs) != 1 || recs[0].Type != "instant" {
		t.Fatalf("fleets at the fake: %+v", recs)
	}
	want := domain.Tags("L9", "alice@host", "")
	for _, tags := range []map[string]string{recs[0].Tags, recs[0].InstanceTags} {
		for k, v := range want {
			if tags[k] != v {
				t.Errorf("tag %s = %q, want %q (fleet tags %v, instance tags %v)", k, tags[k], v, recs[0].Tags, recs[0].InstanceTags)
			}
		}
	}
	found, err := p.FindFleet(context.Background(), "us-east-1", "L9")
	if err != nil || found == nil || found.ID != recs[0].ID || found.Instances != 3 || found.State != "active" {
		t.Fatalf("FindFleet: %+v, %v; want %s", found, err, recs[0].ID)
	}
	if f.fake.Count("DescribeInstances", "") == 0 {
		t.Error("found without looking at the instances: DescribeFleets listed an instant fleet it does not list")
	}
	if none, err := p.FindFleet(context.Background(), "us-east-1", "never-sent"); err != nil || none != nil {
		t.Errorf("FindFleet of an unknown token: %+v, %v", none, err)
	}
}

// No fleet state reads as the ledger's "unknown" (a lost answer) or
// "pending" (a call in flight).
func TestFleetStatesMeanWhatTheySay(t *testing.T) {
	from, until := testNow.Add(time.Hour), testNow.Add(2*time.Hour)
	want := map[ec2types.FleetStateCode][3]string{ // before, within, after the schedule
		"submitted":           {"scheduled", "active", "ended"},
		"active":              {"scheduled", "active", "ended"},
		"modifying":           {"scheduled", "active", "ended"},
		"deleted":             {"deleted", "deleted", "ended"},
		"deleted_running":     {"deleted", "deleted", "ended"},
		"deleted_terminating": {"deleted", "deleted", "ended"},
		"failed":              {"failed", "failed", "failed"},
	}
	for _, s := range ec2types.FleetStateCode("").Values() {
		w, ok := want[s]
		if !ok {
			t.Errorf("fleet state %q of the API has no ledger state decided in this test", s)
			continue
		}
		for i, at := range []time.Time{testNow, from.Add(time.Minute), until} {
			fd := ec2types.FleetData{FleetState: s, ValidFrom: &from, ValidUntil: &until}
			if got, _ := fleetState(fd, at); got != w[i] {
				t.Errorf("%s at %s: %s, want %s", s, at.Sub(from), got, w[i])
			}
		}
		if got, _ := fleetState(ec2types.FleetData{FleetState: s}, testNow); got == "unknown" || got == "pending" || got == "scheduled" || got == "ended" {
			t.Errorf("%s without a schedule: %s", s, got)
		}
	}
	// A fleet deleted with its instances left running says so, ended or not.
	for _, at := range []time.Time{testNow, until} {
		if _, note := fleetState(ec2types.FleetData{FleetState: "deleted_running", ValidUntil: &until}, at); !strings.Contains(note, "left running") {
			t.Errorf("deleted_running at %s: note %q, want its instances left running", at.Sub(from), note)
		}
	}
	if got, note := fleetState(ec2types.FleetData{FleetState: "hibernating"}, testNow); got != "active" || !strings.Contains(note, "hibernating") {
		t.Errorf("an unknown fleet state: %s (%q), want active with the state named", got, note)
	}
}
