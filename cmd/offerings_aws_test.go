package cmd

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/present"
)

// awsOfferingsTable is the provider table with AWS at a local EC2
// endpoint over the regions, which answers capacity-block searches as
// AWS does (other lengths and starts beside the asked one).
func awsOfferingsTable(t *testing.T, regions ...string) (app.Table, *ec2test.Server) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Minute)
	fake := ec2test.New(ec2test.Generate(1, regions, now.Add(-26*time.Hour), now, time.Hour)...)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return withRow("aws", func(ctx context.Context, e *app.Settings) (domain.Provider, error) {
		return aws.New(ctx, aws.Options{Regions: e.Query.Regions, DataDir: t.TempDir(), Logger: e.Log, MaxAttempts: 2, MaxBackoff: time.Millisecond,
			Config: &awssdk.Config{Region: regions[0], BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client(),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	}), fake
}

// TestOfferingsWarnsOfEachAWSRegionThatFails: with
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

// contractRows decodes `-o json` and fails on any field beyond the
// contract's (the table's own columns never reach JSON).
func contractRows(t *testing.T, out string) []map[string]any {
	t.Helper()
	rows, _ := jsonRows(t, out)
	for _, r := range rows {
		if len(r) != len(offeringsFields) {
			t.Fatalf("row %v: want exactly the fields %v", r, offeringsFields)
		}
		for _, k := range offeringsFields {
			if _, ok := r[k]; !ok {
				t.Fatalf("row %v lacks %s", r, k)
			}
		}
		// A quotient is rounded as prices' per-GPU figures are (it was
		// printed with every digit of the float: 7.374010416666667).
		if v, ok := r["usd_gpu_hour"].(float64); !ok || math.Abs(v*1e6-math.Round(v*1e6)) > 1e-6 {
			t.Fatalf("usd_gpu_hour %v: want a number of at most 6 decimals", r["usd_gpu_hour"])
		}
	}
	return rows
}

// TestOfferingsFlexDuration: AWS answers a 24 h
// search with 19 h 17 min, 43 h 17 min and 6 h 35 min blocks too (its
// documented examples; the local EC2 endpoint does so). Without
// --flex-duration only the 24 h blocks are listed; with it, those within
// it of 24 h are listed after them, marked ~ in the table with a note:
// 19 h 17 min within 5 h, all three within 20 h.
func TestOfferingsFlexDuration(t *testing.T) {
	isolate(t)
	table, _ := awsOfferingsTable(t, "us-east-1")
	args := []string{"offerings", "--provider", "aws", "--region", "us-east-1", "--gpu", "H100", "--count", "1", "--duration", "1d"}
	hours := func(rows []map[string]any) []float64 {
		var out []float64
		for _, r := range rows {
			out = append(out, r["duration_hours"].(float64))
		}
		return out
	}

	code, out, errOut := runTable(t, table, append(args, "-o", "json")...)
	rows := contractRows(t, out)
	if code != 0 || len(rows) == 0 {
		t.Fatalf("exit %d, %d rows: %s", code, len(rows), errOut)
	}
	for _, h := range hours(rows) {
		if h != 24 {
			t.Fatalf("without --flex-duration: lengths %v, want 24 h only", hours(rows))
		}
	}

	for flexHours, others := range map[float64]int{5: 1, 20: 3} {
		code, out, errOut = runTable(t, table, append(args, "--flex-duration", fmt.Sprintf("%gh", flexHours), "-o", "json")...)
		flex := contractRows(t, out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		got := hours(flex)
		for i, h := range got {
			switch {
			case h == 24 && i >= len(rows):
				t.Errorf("flex %gh: lengths %v: the 24 h blocks are not first", flexHours, got)
			case math.Abs(h-24) > flexHours:
				t.Errorf("flex %gh: lengths %v: %g h is not within it of 24 h", flexHours, got, h)
			}
		}
		if len(got) != len(rows)+others {
			t.Errorf("flex %gh: lengths %v: want the %d blocks of 24 h, then %d of other lengths", flexHours, got, len(rows), others)
		}
	}

	code, out, errOut = runTable(t, table, append(args, "--flex-duration", "20h")...)
	for _, want := range []string{"LENGTH", " 24h ", " 19h17m~ ", " 43h17m~ ", " 6h35m~ "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("table (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	if !strings.Contains(errOut, "gpumarket: offerings: ~ marks a length other than --duration 1d, within --flex-duration 20h") {
		t.Errorf("no note of what ~ means: %s", errOut)
	}

	for _, bad := range []string{"1d", "2d", "0h", "x"} {
		code, out, errOut := runTable(t, table, append(args, "--flex-duration", bad)...)
		if lines := stderrLines(errOut); code != 2 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "gpumarket: --flex-duration") {
			t.Errorf("--flex-duration %s: exit %d, stderr %q; want exit 2 and one line naming the flag", bad, code, errOut)
		}
	}
}

// TestOfferingsTableSaysTheHourlyRate: an Azure
// reservation bills by the hour; UPFRONT_USD holds its total for the
// asked duration, and the table shows its hourly rate in a $/H column of
// its own, so an hourly bill is never read as an upfront fee. The
// simulated market sells Azure-style reservations for a 30 h search.
func TestOfferingsTableSaysTheHourlyRate(t *testing.T) {
	newSession(t, "")
	// A reservation starts when it is bought, at the minute, and which
	// pools sell one depends on that minute: the two searches compared
	// below see the same market only if its clock does not pass a minute
	// between them, so it is stopped at one moment.
	at := time.Now()
	frozen := withRow("sim", func(_ context.Context, e *app.Settings) (domain.Provider, error) {
		return sim.New(sim.Options{Seed: e.Config.Sim.Seed, Now: func() time.Time { return at }}), nil
	})
	code, out, errOut := runTable(t, frozen, "offerings", "--gpu", "A100", "--count", "1", "--duration", "30h", "-o", "json")
	rows := contractRows(t, out)
	if code != 0 || len(rows) == 0 {
		t.Fatalf("exit %d, %d rows: %s", code, len(rows), errOut)
	}
	code, table, errOut := runTable(t, frozen, "offerings", "--gpu", "A100", "--count", "1", "--duration", "30h")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(table), "\n")
	var header []string
	for i, l := range lines {
		if strings.HasPrefix(l, "ID ") {
			header, lines = strings.Fields(l), lines[i+1:]
			break
		}
	}
	col := func(name string) int {
		for i, h := range header {
			if h == name {
				return i
			}
		}
		t.Fatalf("no %s column in %v", name, header)
		return -1
	}
	up, rate, length := col("UPFRONT_USD"), col("$/H"), col("LENGTH")
	if len(lines) != len(rows) {
		t.Fatalf("%d table rows, %d JSON rows", len(lines), len(rows))
	}
	for i, l := range lines {
		f := strings.Fields(l)
		// START and END are two fields each (date, time and zone: three).
		shift := len(f) - len(header)
		var total, hourly float64
		if _, err := fmt.Sscan(f[up+shift], &total); err != nil {
			t.Fatalf("row %q: %v", l, err)
		}
		if _, err := fmt.Sscan(f[rate+shift], &hourly); err != nil {
			t.Fatalf("row %q: $/H %q is not a rate", l, f[rate+shift])
		}
		if f[length+shift] != "30h" || math.Abs(hourly*30-total) > 0.005*30+0.01 || total != rows[i]["upfront_usd"] {
			t.Errorf("row %q: length %s, $/H %v × 30 h vs UPFRONT_USD %v (JSON %v)", l, f[length+shift], hourly, total, rows[i]["upfront_usd"])
		}
	}
}

// book's confirmation of a block of another length says so.
func TestBookSaysALengthOtherThanAsked(t *testing.T) {
	start := time.Date(2026, 12, 2, 16, 13, 0, 0, time.UTC)
	o := domain.Offering{ID: "cb-43h", Provider: "aws", InstanceType: "p5.48xlarge", InstanceCount: 1, Start: start,
		End: start.Add(43*time.Hour + 17*time.Minute), UpfrontUSD: 2340.59, GPU: domain.GPUSpec{Model: "H100", Count: 8}}
	if s := present.OfferingSummary(o, false); strings.Contains(s, "not the --duration") {
		t.Fatalf("a block of the asked length said otherwise:\n%s", s)
	}
	o.FlexLength = true
	if s := present.OfferingSummary(o, false); !strings.Contains(s, "length     43.28") || !strings.Contains(s, "not the --duration searched for") {
		t.Fatalf("summary:\n%s", s)
	}
}
