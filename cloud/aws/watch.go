package aws

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// WatchFleet counts a fleet's instances that run now: DescribeInstances
// of the instances EC2 Fleet tagged with the fleet (aws:ec2:fleet-id, on
// every instance it launches), pending or running. An instant fleet's
// DescribeFleets keeps listing the instances it launched after EC2 took
// them back, so only the instances' own states say an interruption
// happened.
func (p *Provider) WatchFleet(ctx context.Context, region, id string) (int, error) {
	pg := ec2.NewDescribeInstancesPaginator(p.client(region), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: awssdk.String("tag:" + tagFleetID), Values: []string{id}},
			{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}},
		},
		MaxResults: awssdk.Int32(1000),
	})
	n := 0
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return 0, explain(fmt.Errorf("aws: instances of fleet %s in %s: %w", id, region, err))
		}
		for _, r := range out.Reservations {
			n += len(r.Instances)
		}
	}
	return n, nil
}
