package cmd

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

// A fleet of types its region cannot launch is refused with the reason
// first, before any estimate or any question about a max price (not
// "cost unknown, pass a max price", and only then "not sold").
func TestFleetLaunchRefusesTypesTheRegionCannotLaunchFirst(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--region", "eastus", "--instance-types", "p5.48xlarge"},
			"--instance-types p5.48xlarge is an AWS instance type, but eastus is an Azure region (Azure H100 types: Standard_NC40ads_H100_v5"},
		{[]string{"--region", "us-east-1", "--instance-types", "p5.48xlarge,Standard_ND96isr_H100_v5"},
			"--instance-types Standard_ND96isr_H100_v5 is an Azure instance type, but us-east-1 is an AWS region"},
		{[]string{"--region", "us-east-1", "--instance-types", "p5e.48xlarge"},
			"--instance-types p5e.48xlarge: sim does not sell it in us-east-1 (it sells p5en.48xlarge there)"},
	} {
		args := append([]string{"fleet", "launch", "--target", "2", "--dry-run"}, c.args...)
		code, out, errOut := runCmd(t, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", c.args, code, errOut, c.want)
		}
		if strings.Contains(errOut, "Estimated cost") || strings.Contains(errOut, "max price") {
			t.Errorf("%v: estimated or asked for a max price before refusing: %q", c.args, errOut)
		}
	}
	// What the region sells passes.
	if code, out, errOut := runCmd(t, "fleet", "launch", "--target", "2", "--dry-run", "--region", "eastus", "--instance-types", "Standard_ND96isr_H100_v5"); code != 0 || !strings.Contains(out, "dry run") {
		t.Errorf("a type the region sells: exit %d: %s %s", code, out, errOut)
	}
}

// A cloud's provider launches its own cloud's types: an Azure size given
// to AWS is refused by the catalog, and a type AWS does not sell in the
// region by AWS's own list, before the estimate.
func TestFleetLaunchChecksTypesAgainstTheCloud(t *testing.T) {
	isolate(t)
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-26*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	table := withRow("aws", func(ctx context.Context, e *app.Settings) (domain.Provider, error) {
		return aws.New(ctx, aws.Options{Regions: e.Query.Regions, DataDir: t.TempDir(), Logger: e.Log, MaxAttempts: 2, MaxBackoff: time.Millisecond,
			Config: &awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client(),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	})
	code, _, errOut := runTable(t, table, "fleet", "launch", "--provider", "aws", "--region", "us-east-1", "--instance-types", "Standard_ND96isr_H100_v5", "--target", "2", "--dry-run")
	if code != 2 || !strings.Contains(errOut, "is an Azure instance type, but --provider aws launches AWS ones (AWS H100 types: p5.48xlarge, p5.4xlarge)") {
		t.Errorf("an Azure size on AWS: exit %d: %s", code, errOut)
	}
	sold := map[string]bool{}
	for _, it := range fake.Region("us-east-1").InstanceTypes {
		sold[it.Name] = true
	}
	var missing string
	for _, e := range domain.CatalogEntries(domain.CloudAWS) {
		if !sold[e.InstanceType] {
			missing = e.InstanceType
			break
		}
	}
	if missing == "" {
		t.Fatal("the fake sells every AWS type of the catalog: nothing to check")
	}
	code, _, errOut = runTable(t, table, "fleet", "launch", "--provider", "aws", "--region", "us-east-1", "--instance-types", missing, "--target", "2", "--dry-run")
	if code != 2 || !strings.Contains(errOut, "--instance-types "+missing+": aws does not sell it in us-east-1") || strings.Contains(errOut, "Estimated cost") {
		t.Errorf("a type AWS does not sell in the region: exit %d: %s", code, errOut)
	}
	if n := fake.Count("CreateFleet", ""); n != 0 {
		t.Errorf("%d CreateFleet calls for refused fleets", n)
	}
}
