package cmd

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/cloud/aws/smtest"
)

// TestTrainingPlansOnAWS: against the SageMaker fake (reached through
// AWS_ENDPOINT_URL_SAGEMAKER), offerings lists a plan with its segments,
// book buys it through the ledger (a training-plan row, state scheduled),
// and a ResourceLimitExceeded leaves a failed row and nothing bought.
func TestTrainingPlansOnAWS(t *testing.T) {
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(48*time.Hour + 11*time.Hour + 30*time.Minute)
	seg := func(zone string, from, to float64) smtest.Segment {
		return smtest.Segment{Zone: zone, Start: day.Add(time.Duration(from) * time.Hour), End: day.Add(time.Duration(to) * time.Hour)}
	}
	fake := smtest.New(
		smtest.Offering{ID: "tpo-a", InstanceType: "ml.p5.48xlarge", Count: 2, Target: "training-job", UpfrontFee: "3100.00",
			Segments: []smtest.Segment{seg("us-east-1a", 0, 24), seg("us-east-1b", 48, 72)}},
		smtest.Offering{ID: "tpo-b", InstanceType: "ml.p5.48xlarge", Count: 2, Target: "training-job", UpfrontFee: "3300.00",
			Segments: []smtest.Segment{seg("us-east-1a", 24, 72)}},
	)
	defer fake.Close()
	now := time.Now().UTC().Truncate(time.Minute)
	ec2 := httptest.NewServer(ec2test.New(ec2test.Generate(1, []string{"us-east-1"}, now.Add(-24*time.Hour), now, time.Hour)...))
	defer ec2.Close()
	s := newSession(t, "budget: {max_booking_usd: 1000000, max_daily_usd: 5000000}\n")
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1",
		"AWS_ENDPOINT_URL_SAGEMAKER": fake.URL, "AWS_ENDPOINT_URL": ec2.URL, "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": t.TempDir() + "/none", "AWS_SHARED_CREDENTIALS_FILE": t.TempDir() + "/none"} {
		t.Setenv(k, v)
	}
	search := func() []map[string]any {
		t.Helper()
		code, out, errOut := s.run("offerings", "--provider", "aws", "--region", "us-east-1", "--gpu", "H100", "--count", "2", "--duration", "48h",
			"--kind", "training-plan", "-o", "json")
		if code != 0 {
			t.Fatalf("offerings: exit %d: %s", code, errOut)
		}
		rows, _ := jsonRows(t, out)
		return rows
	}
	rows := search()
	if len(rows) != 2 || rows[0]["id"] != "tpo-a" || rows[0]["kind"] != "training-plan" || len(rows[0]["segments"].([]any)) != 2 {
		t.Fatalf("offerings %v", rows)
	}
	code, _, errOut := s.run("book", "tpo-a", "--yes")
	if code != 0 || !strings.Contains(errOut, "no dry run:") || !strings.Contains(errOut, "segment 2 of 2") {
		t.Fatalf("book: exit %d: %s", code, errOut)
	}
	led, _ := s.ledger()
	if len(led) != 1 || led[0]["kind"] != "training-plan" || led[0]["state"] != "scheduled" || led[0]["committed_usd"] != 3100.0 ||
		!strings.HasPrefix(led[0]["provider_ref"].(string), "arn:aws:sagemaker:us-east-1:") {
		t.Fatalf("ledger %v", led)
	}

	fake.RefuseCreate(true)
	code, _, errOut = s.run("book", "tpo-b", "--yes")
	if code == 0 || !strings.Contains(errOut, "ResourceLimitExceeded") {
		t.Fatalf("refused create: exit %d: %s", code, errOut)
	}
	led, _ = s.ledger()
	failed := 0
	for _, r := range led {
		if r["state"] == "failed" {
			failed++
		}
	}
	if len(led) != 2 || failed != 1 || len(fake.Plans()) != 1 {
		t.Errorf("after a refusal: ledger %v, %d plans; want one failed row and the one plan", led, len(fake.Plans()))
	}
}
