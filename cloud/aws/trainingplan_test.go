package aws

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/cloud/aws/smtest"
	"github.com/gpumarket/gpumarket/domain"
)

var planDay = time.Date(2026, 6, 12, 11, 30, 0, 0, time.UTC) // two days after testNow

func planFake() *smtest.Server {
	h := func(d float64) time.Time { return planDay.Add(time.Duration(d * float64(time.Hour))) }
	return smtest.New(
		smtest.Offering{ID: "tpo-one", InstanceType: "ml.p5.48xlarge", Count: 2, Target: "training-job", UpfrontFee: "3000.00",
			Segments: []smtest.Segment{{Zone: "us-east-1a", Start: h(0), End: h(48)}}},
		smtest.Offering{ID: "tpo-two", InstanceType: "ml.p5.48xlarge", Count: 2, Target: "hyperpod-cluster", UpfrontFee: "2800.00",
			Segments: []smtest.Segment{{Zone: "us-east-1b", Start: h(48), End: h(72)}, {Zone: "us-east-1a", Start: h(0), End: h(24)}}},
		smtest.Offering{ID: "tpo-four", InstanceType: "ml.p5.48xlarge", Count: 4, Target: "training-job", UpfrontFee: "6000.00",
			Segments: []smtest.Segment{{Zone: "us-east-1a", Start: h(0), End: h(48)}}},
		smtest.Offering{ID: "tpo-long", InstanceType: "ml.p5.48xlarge", Count: 2, Target: "training-job", UpfrontFee: "4000.00",
			Segments: []smtest.Segment{{Zone: "us-east-1a", Start: h(0), End: h(72)}}},
	)
}

func planProvider(t *testing.T, fake *smtest.Server) *Provider {
	t.Helper()
	t.Cleanup(fake.Close)
	p, err := New(context.Background(), Options{
		Config: &awssdk.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
			BaseEndpoint: awssdk.String(fake.URL), HTTPClient: fake.Client()},
		Regions: []string{"us-east-1"}, Now: func() time.Time { return testNow },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxAttempts: 4, MaxBackoff: time.Millisecond, DataDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var planQuery = domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 48 * time.Hour, Kinds: []string{domain.KindTrainingPlan}}

// TestFindTrainingPlanOfferings: a search of 2 H100 instances for 48 h
// asks SageMaker per instance type and target resource, reads an offering
// of several segments in order, leaves out other counts and lengths, ranks
// cheapest per GPU-hour, rides out throttling, and takes an empty list.
func TestFindTrainingPlanOfferings(t *testing.T) {
	fake := planFake()
	p := planProvider(t, fake)
	fake.Throttle("SearchTrainingPlanOfferings", 2)
	offs, err := p.FindOfferings(context.Background(), planQuery)
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2 || offs[0].ID != "tpo-two" || offs[1].ID != "tpo-one" {
		t.Fatalf("offerings %+v, want tpo-two then tpo-one (other counts and lengths left out)", offs)
	}
	two := offs[0]
	if two.Kind != domain.KindTrainingPlan || two.TargetResource != "hyperpod-cluster" || two.InstanceType != "p5.48xlarge" || two.GPU.Model != "H100" ||
		len(two.Segments) != 2 || !two.Segments[0].Start.Equal(planDay) || two.Segments[1].Zone != "us-east-1b" || two.HeldHours() != 48 ||
		!two.End.Equal(planDay.Add(72*time.Hour)) || two.UpfrontUSD != 2800 || two.Zone != "us-east-1a" {
		t.Errorf("two-segment offering %+v", two)
	}
	var sawType, sawEmpty bool
	for _, s := range fake.Searches() {
		if s["InstanceType"] == "ml.p5.48xlarge" && s["InstanceCount"] == float64(2) && s["DurationHours"] == float64(48) && len(s["TargetResources"].([]any)) == 1 {
			sawType = true
		}
		sawEmpty = sawEmpty || s["InstanceType"] != "ml.p5.48xlarge"
	}
	if !sawType || !sawEmpty {
		t.Errorf("searches %v: want ml.p5.48xlarge × 2 for 48 h per target, and another H100 type answered with an empty list", fake.Searches())
	}
	if n := fake.Calls("SearchTrainingPlanOfferings"); n != len(fake.Searches())+2 {
		t.Errorf("%d calls for %d searches: the two throttled ones were not retried", n, len(fake.Searches()))
	}
	flex := planQuery
	flex.FlexDuration = 24 * time.Hour
	offs, _ = p.FindOfferings(context.Background(), flex)
	if len(offs) != 3 || offs[2].ID != "tpo-long" || !offs[2].FlexLength {
		t.Errorf("with --flex-duration 24h: %+v, want the 72 h plan last, marked", offs)
	}
	fake.Throttle("SearchTrainingPlanOfferings", 100)
	if _, err := p.FindOfferings(context.Background(), planQuery); err == nil || !strings.Contains(err.Error(), "ThrottlingException") {
		t.Errorf("throttled throughout: %v, want the region's ThrottlingException", err)
	}
}

// TestTrainingPlanTermsRefusedUpFront: counts and lengths SageMaker does
// not sell are refused before any call, naming what it sells.
func TestTrainingPlanTermsRefusedUpFront(t *testing.T) {
	fake := planFake()
	p := planProvider(t, fake)
	for _, c := range []struct {
		mod  func(*domain.OfferingQuery)
		want string
	}{
		{func(q *domain.OfferingQuery) { q.Instances = 3 }, "1, 2, 4, 8, 16, 32 or 64"},
		{func(q *domain.OfferingQuery) { q.Instances = 128 }, "1, 2, 4, 8, 16, 32 or 64"},
		{func(q *domain.OfferingQuery) { q.Duration = 36 * time.Hour }, "whole days, 1 to 182"},
		{func(q *domain.OfferingQuery) { q.Duration = 183 * 24 * time.Hour }, "whole days, 1 to 182"},
	} {
		q := planQuery
		c.mod(&q)
		if _, err := p.FindOfferings(context.Background(), q); !errors.Is(err, domain.ErrInvalidQuery) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a refusal naming %q", q, err, c.want)
		}
	}
	if n := fake.Calls("SearchTrainingPlanOfferings"); n != 0 {
		t.Errorf("%d searches sent for refused terms", n)
	}
}

func findPlan(t *testing.T, p *Provider, id string) domain.Offering {
	t.Helper()
	offs, err := p.FindOfferings(context.Background(), planQuery)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.ID == id {
			return o
		}
	}
	t.Fatalf("no offering %s in %+v", id, offs)
	return domain.Offering{}
}

// TestBookTrainingPlan: a dry run sends nothing; a purchase is
// CreateTrainingPlan named after the ledger row and tagged; the plan is
// read in every state SageMaker gives it; a second Book of the same
// intent answers the plan, not a second one; usage is the in-use count.
func TestBookTrainingPlan(t *testing.T) {
	fake := planFake()
	p := planProvider(t, fake)
	o := findPlan(t, p, "tpo-two")
	req := domain.BookRequest{Offering: o, Ref: "01JREF0000000000000000000A", Actor: "ana", After: testNow}

	dry, err := p.Book(context.Background(), domain.BookRequest{Offering: o, DryRun: true})
	if err != nil || !dry.DryRun || !strings.Contains(dry.Message, "no dry run") || fake.Calls("CreateTrainingPlan") != 0 {
		t.Fatalf("dry run: %+v, %v; %d creates", dry, err, fake.Calls("CreateTrainingPlan"))
	}
	b, err := p.Book(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	name := "gpumarket-01jref0000000000000000000a"
	if !strings.HasSuffix(b.ProviderRef, ":training-plan/"+name) || b.State != "scheduled" || !strings.Contains(b.Message, "Pending") || b.CostUSD != 2800 {
		t.Errorf("booking %+v", b)
	}
	plans := fake.Plans()
	if len(plans) != 1 || plans[0].Tags[domain.TagRef] != req.Ref || plans[0].Tags[domain.TagOffering] != "tpo-two" || plans[0].Tags[TagCost] != "2800.00" {
		t.Fatalf("plans %+v", plans)
	}
	again, err := p.Book(context.Background(), req)
	if err != nil || again.ProviderRef != b.ProviderRef || fake.Calls("CreateTrainingPlan") != 1 {
		t.Errorf("the same intent again: %+v, %v; %d creates, want the plan answered and 1 create", again, err, fake.Calls("CreateTrainingPlan"))
	}
	// Others' plans fill pages before ours (ListTrainingPlans pages by 2).
	for _, n := range []string{"a1", "a2", "a3", "a4"} {
		fake.AddPlan(smtest.Plan{Name: n, ARN: "arn:aws:sagemaker:us-east-1:123456789012:training-plan/" + n, Region: "us-east-1", Status: "Active",
			Offering: smtest.Offering{InstanceType: "ml.p5.48xlarge", Count: 2, Target: "training-job", UpfrontFee: "1",
				Segments: []smtest.Segment{{Zone: "us-east-1a", Start: planDay, End: planDay.Add(24 * time.Hour)}}}})
	}
	for status, want := range map[string]string{"Pending": "scheduled", "Scheduled": "scheduled", "Active": "active", "Expired": "ended", "Failed": "failed", "Paused": "scheduled"} {
		fake.SetPlan(name, status, 0)
		got, err := p.FindBooking(context.Background(), req)
		if err != nil || got == nil || got.State != want || got.ProviderRef != b.ProviderRef || got.InstanceCount != 2 || got.InstanceType != "p5.48xlarge" || got.Zone != "us-east-1a" {
			t.Errorf("status %s: %+v, %v; want state %s", status, got, err, want)
		}
		if status == "Paused" && !strings.Contains(got.Message, "does not know") {
			t.Errorf("an unknown status is not said: %q", got.Message)
		}
	}
	if n := fake.Calls("ListTrainingPlans"); n < 3*6 {
		t.Errorf("%d ListTrainingPlans calls for 6 look-ups of 5 plans by 2: not paged to the end", n)
	}

	fake.SetPlan(name, "Active", 3)
	now := planDay.Add(2 * time.Hour)
	p.opt.Now = func() time.Time { return now }
	rep, err := p.Usage(context.Background(), domain.UsageQuery{Kind: domain.KindTrainingPlan, ProviderRef: b.ProviderRef, Region: "us-east-1",
		InstanceCount: 2, Start: o.Start, End: o.End, From: o.Start, To: now})
	if err != nil || len(rep.Instances) != 3 || !strings.Contains(rep.Source, "in-use") || rep.Instances[0].Zone != "us-east-1a" {
		t.Errorf("usage %+v, %v: want the 3 in use in the running segment", rep, err)
	}
	now = planDay.Add(30 * time.Hour) // between the segments
	if rep, _ := p.Usage(context.Background(), domain.UsageQuery{Kind: domain.KindTrainingPlan, ProviderRef: b.ProviderRef, Region: "us-east-1"}); len(rep.Instances) != 0 {
		t.Errorf("usage between segments: %d instances, want none", len(rep.Instances))
	}
}

// TestTrainingPlanLostAnswerAndRefusal: a CreateTrainingPlan whose answer
// is lost is not a refusal and is found by its name; ResourceLimitExceeded
// is a definite no that buys nothing; a throttled create is not retried.
func TestTrainingPlanLostAnswerAndRefusal(t *testing.T) {
	fake := planFake()
	p := planProvider(t, fake)
	o := findPlan(t, p, "tpo-one")

	fake.RefuseCreate(true)
	_, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "row1", After: testNow})
	if err == nil || !Descriptor.IsDeclined(err) || !strings.Contains(err.Error(), "ResourceLimitExceeded") || len(fake.Plans()) != 0 {
		t.Fatalf("refused create: %v (declined %v), %d plans", err, Descriptor.IsDeclined(err), len(fake.Plans()))
	}
	fake.RefuseCreate(false)

	fake.Throttle("CreateTrainingPlan", 1)
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "row2", After: testNow}); err == nil || fake.Calls("CreateTrainingPlan") != 2 {
		t.Fatalf("throttled create: %v, %d calls; want the error and no retry", err, fake.Calls("CreateTrainingPlan"))
	}

	fake.LoseCreate(true)
	req := domain.BookRequest{Offering: o, Ref: "row3", After: testNow}
	_, err = p.Book(context.Background(), req)
	if err == nil || Descriptor.IsDeclined(err) {
		t.Fatalf("lost answer: %v, declined %v; want an error that is not a refusal", err, Descriptor.IsDeclined(err))
	}
	got, err := p.FindBooking(context.Background(), req)
	if err != nil || got == nil || !strings.HasSuffix(got.ProviderRef, "/gpumarket-row3") || got.CostUSD != 3000 {
		t.Fatalf("lost answer settled: %+v, %v", got, err)
	}
	// An intent without a ledger id finds a plan of the offering's dates
	// and count tagged with the offering and no ledger id, never one that
	// another row bought.
	if got, _ := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, After: testNow}); got != nil {
		t.Errorf("row3's plan taken for an intent without a ledger id: %+v", got)
	}
	if got, _ := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, Ref: "row9", After: testNow}); got != nil {
		t.Errorf("another row's plan taken for row9's: %+v", got)
	}
	// A look-alike of the same dates and count bought from another offering is not this one's.
	fake.AddPlan(smtest.Plan{Name: "other", ARN: "arn:aws:sagemaker:us-east-1:123456789012:training-plan/other", Region: "us-east-1",
		Status: "Scheduled", Tags: map[string]string{domain.TagOffering: "tpo-two"},
		Offering: smtest.Offering{InstanceType: "ml.p5.48xlarge", Count: 2, Target: "training-job", UpfrontFee: "3000.00",
			Segments: []smtest.Segment{{Zone: "us-east-1a", Start: planDay, End: planDay.Add(48 * time.Hour)}}}})
	if got, _ := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, After: testNow}); got != nil {
		t.Errorf("another offering's plan taken: %+v", got)
	}
	fake.AddPlan(smtest.Plan{Name: "legacy", ARN: "arn:aws:sagemaker:us-east-1:123456789012:training-plan/legacy", Region: "us-east-1",
		Status: "Scheduled", Tags: map[string]string{domain.TagOffering: "tpo-one"},
		Offering: smtest.Offering{InstanceType: "ml.p5.48xlarge", Count: 2, Target: "training-job", UpfrontFee: "3000.00",
			Segments: []smtest.Segment{{Zone: "us-east-1a", Start: planDay, End: planDay.Add(48 * time.Hour)}}}})
	got, err = p.FindBooking(context.Background(), domain.BookRequest{Offering: o, After: testNow})
	if err != nil || got == nil || !strings.HasSuffix(got.ProviderRef, "/legacy") || fake.Calls("ListTags") == 0 {
		t.Errorf("found by tag: %+v, %v", got, err)
	}
	if _, err := p.RefreshOffering(context.Background(), o); !errors.Is(err, domain.ErrOfferingGone) {
		t.Errorf("a bought offering refreshed: %v, want ErrOfferingGone", err)
	}
}

// TestTrainingPlansReachTheEndpointOfTheEnvironment: with no config given,
// AWS_ENDPOINT_URL_SAGEMAKER points the SageMaker client at the fake.
func TestTrainingPlansReachTheEndpointOfTheEnvironment(t *testing.T) {
	fake := planFake()
	defer fake.Close()
	for k, v := range map[string]string{"AWS_ENDPOINT_URL_SAGEMAKER": fake.URL, "AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null", "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": ""} {
		t.Setenv(k, v)
	}
	p, err := New(context.Background(), Options{Regions: []string{"us-east-1"}, Now: func() time.Time { return testNow }, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	offs, err := p.FindOfferings(context.Background(), planQuery)
	if err != nil || len(offs) != 2 || fake.Calls("SearchTrainingPlanOfferings") == 0 {
		t.Fatalf("%d offerings, %v, %d searches at the fake", len(offs), err, fake.Calls("SearchTrainingPlanOfferings"))
	}
}

// TestTrainingPlansBesideBlocks: a search of every kind asks for blocks
// and plans alike; terms only plans sell (15 days) get plans alone, and
// terms neither sells are refused naming what each sells.
func TestTrainingPlansBesideBlocks(t *testing.T) {
	fake := planFake()
	p := planProvider(t, fake)
	q := planQuery
	q.Kinds = nil
	q.Duration = 15 * 24 * time.Hour
	if _, err := p.FindOfferings(context.Background(), q); err != nil || fake.Calls("SearchTrainingPlanOfferings") == 0 {
		t.Errorf("15 days: %v, %d plan searches; want the plans searched, blocks (days to 14, then weeks) left out", err, fake.Calls("SearchTrainingPlanOfferings"))
	}
	q.Duration = 36 * time.Hour
	_, err := p.FindOfferings(context.Background(), q)
	if !errors.Is(err, domain.ErrInvalidQuery) || !strings.Contains(err.Error(), "whole days, 1 to 182") || !strings.Contains(err.Error(), "7-day steps") {
		t.Errorf("36 h: %v, want a refusal naming what blocks and plans sell", err)
	}
}
