package job_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/job"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// createFleets are the fake's CreateFleet calls that launched, in order.
func createFleets(f *ec2test.Server) []ec2test.Call {
	var out []ec2test.Call
	for _, c := range f.Calls() {
		if c.Action == "CreateFleet" && c.Params.Get("DryRun") != "true" {
			out = append(out, c)
		}
	}
	return out
}

// TestJobOnTheEC2Fake carries a job out against the local EC2 with the
// real SDK: 10 h of work due in 11 h on two zones with an on-demand
// safety net. An interruption notice of its spot fleet leads, within one
// review and before the instance stops, to a launch in the other pool; the second run leaves no slack, so the
// safety net launches on-demand at the moment the policy named; at the
// end every fleet of the job is deleted.
func TestJobOnTheEC2Fake(t *testing.T) {
	clk := &clock{t: t0}
	data := ec2test.Generate(1, []string{"us-east-1", "us-west-2"}, t0.Add(-48*time.Hour), t0, 40*time.Minute)
	fake := ec2test.New(data...)
	fake.Now = clk.Now
	srv := fake.Start()
	defer srv.Close()
	ctx := context.Background()
	p, err := aws.New(ctx, aws.Options{
		Config: &awssdk.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
			BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client()},
		Now: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxAttempts: 2, MaxBackoff: time.Millisecond,
		DataDir: t.TempDir(), LaunchTemplate: "lt-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := ledger.New(st, []domain.Provider{p}, ledger.Options{Now: clk.Now, Timeout: 10 * time.Second, Actor: "oncall"})

	lj := planner.LiveJob{Policy: planner.StrategySafetyNet, Start: t0, Deadline: t0.Add(11 * time.Hour), Work: 10, D: 0.2, Checkpoint: 0.5, AnyAvail: 0.9,
		OnDemand: &planner.LiveLane{Pool: "aws/us-east-1/p5.48xlarge", Provider: "aws", Region: "us-east-1", InstanceType: "p5.48xlarge", Instances: 2, USDHour: 196.64, Speed: 1, Score: 196.64},
		Lanes: []planner.LiveLane{
			{Pool: "aws/us-east-1/us-east-1a/p5.48xlarge", Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge", Instances: 2, USDHour: 60, Speed: 1, Score: 62},
			{Pool: "aws/us-west-2/us-west-2b/p5.48xlarge", Provider: "aws", Region: "us-west-2", Zone: "us-west-2b", InstanceType: "p5.48xlarge", Instances: 2, USDHour: 63, Speed: 1, Score: 65},
		}}
	req := job.Request{Job: planner.Job{GPUs: 16, Models: []string{"H100"}, Hours: 10, Start: t0, Deadline: lj.Deadline, Checkpointable: true,
		Checkpoint: 30 * time.Minute, Changeover: 12 * time.Minute}, Strategy: planner.StrategySafetyNet}
	j, err := job.Start(ctx, svc, req, job.Proposal{Live: lj, HoldUSD: 2500, Result: planner.Result{ExpectedCostUSD: 700, P95CostUSD: 2500, OnTimePct: 100}})
	if err != nil {
		t.Fatal(err)
	}
	d := job.New(svc, []domain.Provider{p}, job.Options{Now: clk.Now, Every: time.Minute, Template: func(string) string { return "lt-1" }})
	review := func() job.Pass {
		t.Helper()
		pass, err := d.Review(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range pass.Errs {
			t.Fatal(e)
		}
		return pass
	}
	review()
	cf := createFleets(fake)
	if len(cf) != 1 || cf[0].Params.Get("LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone") != "us-east-1a" ||
		cf[0].Params.Get("ClientToken") != j.ID+"-1-L0" || cf[0].Params.Get("TargetCapacitySpecification.OnDemandTargetCapacity") != "0" {
		t.Fatalf("first launch: %d calls, %v", len(cf), cf)
	}

	// Two hours in, EC2 gives one of its two instances its two-minute
	// notice: the instance still runs, only its spot request says so.
	for clk.Now().Before(t0.Add(2 * time.Hour)) {
		pass := review()
		clk.Set(pass.Next)
	}
	fleets := fake.Fleets()
	first := fleets[0].ID
	if fake.Notice(first, 1) != 1 {
		t.Fatal("no instance given a notice")
	}
	review()
	cf = createFleets(fake)
	if len(cf) != 2 || cf[1].Region != "us-west-2" || cf[1].Params.Get("LaunchTemplateConfigs.1.Overrides.1.AvailabilityZone") != "us-west-2b" {
		t.Fatalf("after the notice, one review at once: %d launches, last %+v", len(cf), cf[len(cf)-1])
	}
	if moves, _ := st.JobMoves(ctx, j.ID); !strings.Contains(moves[len(moves)-2].Reason, "1 of 2 instances run and are not being taken back") {
		t.Errorf("the move's reason: %+v", moves[len(moves)-2])
	}
	if fl := fake.Fleets()[0]; !fl.Terminated {
		t.Errorf("the interrupted fleet %s was not deleted: %+v", first, fl)
	}
	// The policy's moment for the safety net: the review it named on
	// spot (when an interruption would no longer leave time to finish on
	// on-demand).
	cur, _ := st.GetJob(ctx, j.ID)
	var prog struct {
		Review time.Time `json:"review"`
		Cur    int       `json:"cur"`
		Saved  float64   `json:"saved"`
	}
	if err := json.Unmarshal(cur.Progress, &prog); err != nil || prog.Cur != 1 || prog.Review.IsZero() {
		t.Fatalf("progress %s: %v", cur.Progress, err)
	}
	// That moment leaves on-demand the work not yet saved, a changeover
	// and the driver's reaction.
	need := time.Duration((lj.Work - prog.Saved + lj.D) * float64(time.Hour))
	if left := lj.Deadline.Sub(prog.Review); left < need+job.ReactionFloor-time.Second {
		t.Errorf("the safety net is named %s before the deadline; it needs %s and the reaction %s", left, need, job.ReactionFloor)
	}
	var odAt time.Time
	for clk.Now().Before(t0.Add(12 * time.Hour)) {
		pass := review()
		if cf := createFleets(fake); odAt.IsZero() && len(cf) > 2 {
			odAt = clk.Now()
			if cf[2].Params.Get("TargetCapacitySpecification.OnDemandTargetCapacity") != "2" || cf[2].Region != "us-east-1" {
				t.Errorf("third launch is not the on-demand safety net: %v", cf[2].Params)
			}
		}
		cur, _ = st.GetJob(ctx, j.ID)
		if !ledger.JobActive(cur.State) {
			break
		}
		clk.Set(pass.Next)
	}
	if odAt.IsZero() || math.Abs(odAt.Sub(prog.Review).Seconds()) > 1 {
		t.Errorf("on-demand launched at %s; the policy named %s", odAt, prog.Review)
	}
	if cur.State != ledger.JobDone || cur.FinishedAt.After(lj.Deadline) {
		t.Errorf("job %s, finished %s (deadline %s): %s", cur.State, cur.FinishedAt, lj.Deadline, cur.Reason)
	}
	for _, fl := range fake.Fleets() {
		if !strings.HasPrefix(fl.State, "deleted") || !fl.Terminated {
			t.Errorf("fleet %s left %s", fl.ID, fl.State)
		}
	}
	if n := len(createFleets(fake)); n != 3 {
		t.Errorf("%d launches, want spot, spot elsewhere, on-demand", n)
	}
}
