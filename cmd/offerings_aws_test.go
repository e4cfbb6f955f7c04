package cmd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/aws"
	"github.com/gpumarket/gpumarket/providers/aws/ec2test"
)

// awsOfferingsTable is the provider table with AWS at a local EC2
// endpoint over the regions, which answers capacity-block searches as
// AWS does (other lengths and starts beside the asked one).
func awsOfferingsTable(t *testing.T, regions ...string) (providerTable, *ec2test.Server) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, regions, now.Add(-26*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return withRow("aws", func(ctx context.Context, e *env) (providers.Provider, error) {
		return aws.New(ctx, aws.Options{Regions: e.query.Regions, DataDir: t.TempDir(), Logger: e.log, MaxAttempts: 2, MaxBackoff: time.Millisecond,
			Config: &awssdk.Config{Region: regions[0], BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client(),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	}), fake
}

// TestOfferingsWarnsOfEachAWSRegionThatFails (issue 15.1, offerings): with
// us-west-2 failing, `offerings` listed us-east-1's blocks and said
// nothing of us-west-2 (the provider dropped it silently). It lists them
// and says, in one line, that us-west-2 did not answer and why; exit 0.
func TestOfferingsWarnsOfEachAWSRegionThatFails(t *testing.T) {
	isolate(t)
	table, fake := awsOfferingsTable(t, "us-east-1", "us-west-2")
	fake.AddFault(ec2test.Fault{Action: "DescribeCapacityBlockOfferings", Region: "us-west-2", Status: http.StatusInternalServerError,
		Code: "InternalError", Message: "An internal error has occurred."})
	code, out, errOut := runTable(t, table, "offerings", "--provider", "aws", "--region", "us-east-1,us-west-2", "--gpu", "H100",
		"--count", "1", "--duration", "2d", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d, want 0 with us-east-1's offerings: %s", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) == 0 {
		t.Fatalf("no offerings: %s", errOut)
	}
	for _, r := range rows {
		if r["region"] != "us-east-1" {
			t.Errorf("row of %v", r["region"])
		}
	}
	w := warningLines(errOut, "offerings: aws us-west-2")
	if len(w) != 1 || !strings.Contains(w[0], "InternalError") {
		t.Fatalf("warnings for us-west-2 %q, want one naming its error; stderr:\n%s", w, errOut)
	}
	if strings.Contains(errOut, "level=") || len(stderrLines(errOut)) != 1 {
		t.Errorf("more than the one warning line on stderr:\n%s", errOut)
	}
}
