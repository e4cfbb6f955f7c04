package aws

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
)

// TestLargeAnswersWithoutRetries reads 1,000-item history pages from a
// loopback endpoint with retries off: without plainBodyClient about one in
// ten fails with "use of closed network connection" (see plainBodyClient in provider.go).
func TestLargeAnswersWithoutRetries(t *testing.T) {
	window := 9 * 24 * time.Hour
	fake := ec2test.New(ec2test.Generate(7, []string{"us-east-1"}, testNow.Add(-window), testNow, 140*time.Second)...)
	srv := fake.Start()
	defer srv.Close()
	f := &fixture{fake: fake, srv: srv}
	p := f.provider(t, func(o *Options) { o.MaxAttempts = 1 })
	c := p.client("us-east-1")
	for i := 0; i < 60; i++ {
		out, err := c.DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{
			StartTime: awssdk.Time(testNow.Add(-window)), EndTime: awssdk.Time(testNow), MaxResults: awssdk.Int32(1000)})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(out.SpotPriceHistory) != 1000 {
			t.Fatalf("call %d: %d items", i, len(out.SpotPriceHistory))
		}
	}
}
