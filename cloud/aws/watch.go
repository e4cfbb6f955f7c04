package aws

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// WatchFleet counts a fleet's instances that run now and are not being
// taken back: DescribeInstances of the instances EC2 Fleet tagged with the
// fleet (aws:ec2:fleet-id, on every instance it launches), pending or
// running, less the spot instances whose request says they are being
// interrupted. An instant fleet's DescribeFleets keeps listing the
// instances it launched after EC2 took them back, so only the instances'
// own states say an interruption happened.
func (p *Provider) WatchFleet(ctx context.Context, region, id string) (int, error) {
	c := p.client(region)
	pg := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: awssdk.String("tag:" + tagFleetID), Values: []string{id}},
			{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}},
		},
		MaxResults: awssdk.Int32(1000),
	})
	n := 0
	var spot []string
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return 0, explain(fmt.Errorf("aws: instances of fleet %s in %s: %w", id, region, err))
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				n++
				if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot && in.InstanceId != nil {
					spot = append(spot, *in.InstanceId)
				}
			}
		}
	}
	warned, err := interrupting(ctx, c, spot)
	if err != nil {
		return n, &PartialError{Err: explain(fmt.Errorf("aws: interruption notices of fleet %s in %s: %w", id, region, err))}
	}
	return n - warned, nil
}

// interrupting counts the instances whose spot request says EC2 is taking
// them back. The two-minute notice shows only there: "the status is
// immediately set to instance-terminated-no-capacity (it is not set to
// marked-for-termination). However, the instance remains in the running
// state for 2 minutes" (EC2 User Guide, Spot request status); a stop or
// hibernation shows marked-for-stop first.
func interrupting(ctx context.Context, c ec2.DescribeSpotInstanceRequestsAPIClient, ids []string) (int, error) {
	n := 0
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 200)] // a filter's values, at most 200
		ids = ids[len(chunk):]
		pg := ec2.NewDescribeSpotInstanceRequestsPaginator(c, &ec2.DescribeSpotInstanceRequestsInput{
			Filters:    []ec2types.Filter{{Name: awssdk.String("instance-id"), Values: chunk}},
			MaxResults: awssdk.Int32(1000),
		})
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				return 0, err
			}
			for _, r := range out.SpotInstanceRequests {
				if r.Status != nil && r.Status.Code != nil && takenBack(*r.Status.Code) {
					n++
				}
			}
		}
	}
	return n, nil
}

// takenBack reports whether a spot request's status code says its
// instance is being or was stopped or terminated: the marked-for-* codes
// and the instance-stopped-* and instance-terminated-* ones.
func takenBack(code string) bool {
	return strings.HasPrefix(code, "marked-for-") || strings.HasPrefix(code, "instance-stopped-") || strings.HasPrefix(code, "instance-terminated-")
}

// PartialError is a reading that stands without what Err kept from it:
// the instances were counted, their interruption notices not read.
type PartialError struct{ Err error }

func (e *PartialError) Error() string {
	return e.Err.Error() + " (counted the running instances without it)"
}
func (e *PartialError) Unwrap() error { return e.Err }

// Partial marks the count returned beside the error as good.
func (e *PartialError) Partial() bool { return true }
