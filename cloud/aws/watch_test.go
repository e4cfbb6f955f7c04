package aws

import (
	"context"
	"errors"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
)

// An interruption notice shows only in the spot request: for its two
// minutes the instance still runs, and its request reads
// instance-terminated-no-capacity, not marked-for-termination. WatchFleet
// counts the instance as gone from the notice on.
func TestWatchFleetReadsTheInterruptionNotice(t *testing.T) {
	f := newFixture(t, "us-east-1")
	clk := &testClock{t: testNow}
	f.fake.Now = clk.Now
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1"; o.Now = clk.Now })
	ctx := context.Background()
	fl, err := p.LaunchFleet(ctx, fleetSpec())
	if err != nil {
		t.Fatal(err)
	}
	watch := func() int {
		t.Helper()
		n, err := p.WatchFleet(ctx, "us-east-1", fl.ID)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := watch(); n != 3 {
		t.Fatalf("before any notice: %d running, want 3", n)
	}
	if f.fake.Notice(fl.ID, 1) != 1 {
		t.Fatal("no notice given")
	}
	running := func() int {
		out, err := p.client("us-east-1").DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: awssdk.String("tag:" + tagFleetID), Values: []string{fl.ID}},
			{Name: awssdk.String("instance-state-name"), Values: []string{"running"}}}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range out.Reservations {
			n += len(r.Instances)
		}
		return n
	}
	if n := running(); n != 3 {
		t.Errorf("DescribeInstances during the notice: %d running, want all 3 (the notice does not show there)", n)
	}
	if n := watch(); n != 2 {
		t.Errorf("during the notice: WatchFleet %d, want 2", n)
	}
	codes, err := p.client("us-east-1").DescribeSpotInstanceRequests(ctx, &ec2.DescribeSpotInstanceRequestsInput{
		Filters: []ec2types.Filter{{Name: awssdk.String("status-code"), Values: []string{"instance-terminated-no-capacity"}}}})
	if err != nil || len(codes.SpotInstanceRequests) != 1 || codes.SpotInstanceRequests[0].State != ec2types.SpotInstanceStateClosed {
		t.Fatalf("requests under notice: %+v, %v", codes, err)
	}
	clk.Set(testNow.Add(ec2test.NoticeLead))
	if n := running(); n != 2 {
		t.Errorf("after the notice's two minutes: %d running, want 2", n)
	}
	if n := watch(); n != 2 {
		t.Errorf("after the notice: WatchFleet %d, want 2", n)
	}
	// Without the notices (say, no ec2:DescribeSpotInstanceRequests), the
	// count of running instances still stands, marked partial.
	f.fake.AddFault(ec2test.Fault{Action: "DescribeSpotInstanceRequests", Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."})
	n, err := p.WatchFleet(ctx, "us-east-1", fl.ID)
	var partial *PartialError
	if n != 2 || !errors.As(err, &partial) || !partial.Partial() {
		t.Errorf("notices unread: %d, %v; want 2 with a partial error", n, err)
	}
	if _, err := p.client("us-east-1").DescribeSpotInstanceRequests(ctx, &ec2.DescribeSpotInstanceRequestsInput{
		SpotInstanceRequestIds: []string{"sir-nosuchrequest"}}); err == nil {
		t.Error("an unknown request id was answered")
	}
}

// An on-demand fleet has no spot requests to read.
func TestWatchFleetOfOnDemandAsksNoSpotRequests(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1" })
	spec := fleetSpec()
	spec.OnDemandBase = spec.TargetCapacity
	fl, err := p.LaunchFleet(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.WatchFleet(context.Background(), "us-east-1", fl.ID); err != nil || n != spec.TargetCapacity {
		t.Errorf("WatchFleet: %d, %v", n, err)
	}
	if f.fake.Count("DescribeSpotInstanceRequests", "") != 0 {
		t.Error("asked for the spot requests of on-demand instances")
	}
}
