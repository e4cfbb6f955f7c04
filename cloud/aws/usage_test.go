package aws

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/gpumarket/gpumarket/cloud/aws/cwtest"
	"github.com/gpumarket/gpumarket/domain"
)

// usageFixture is the local EC2 endpoint (ec2test) and the local
// CloudWatch endpoint (cwtest) behind one address, as AWS_ENDPOINT_URL
// would put them: the SDK's EC2 client posts Query forms to /, its
// CloudWatch client RPC v2 CBOR to /service/…. DescribeInstances asked
// by capacity reservation id (which ec2test does not keep) is answered
// from blockInstances.
type usageFixture struct {
	*fixture
	cw             *cwtest.Server
	srv            *httptest.Server
	blockInstances string // the instancesSet items of DescribeInstances by capacity-reservation-id
	blockAsked     int
}

func newUsageFixture(t *testing.T) *usageFixture {
	t.Helper()
	f := &usageFixture{fixture: newFixture(t, "us-east-1"), cw: cwtest.New()}
	f.cw.Now = func() time.Time { return testNow }
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/service/") {
			f.cw.ServeHTTP(w, r)
			return
		}
		if err := r.ParseForm(); err == nil && r.PostForm.Get("Action") == "DescribeInstances" && r.PostForm.Get("Filter.1.Name") == "capacity-reservation-id" {
			f.blockAsked++
			f.describeBlockInstances(w, r.PostForm)
			return
		}
		// ec2test reads the form again: give it the body back.
		r.Body = nopBody(r.PostForm.Encode())
		f.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// describeBlockInstances answers DescribeInstances with the shape of the
// EC2 API reference's example (reservationSet/instancesSet items, the
// instance's state, reason and stateReason).
func (f *usageFixture) describeBlockInstances(w http.ResponseWriter, form url.Values) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>8f7724cf-496f-496e-8fe3-example</requestId>
  <reservationSet><item><reservationId>r-1234567890abcdef0</reservationId><ownerId>123456789012</ownerId>
    <instancesSet>%s</instancesSet></item></reservationSet>
</DescribeInstancesResponse>`, f.blockInstances)
}

type body struct{ *strings.Reader }

func (body) Close() error { return nil }

func nopBody(s string) body { return body{strings.NewReader(s)} }

func (f *usageFixture) provider(t *testing.T) *Provider {
	t.Helper()
	return f.fixture.provider(t, func(o *Options) {
		o.LaunchTemplate = "lt-1"
		o.Config = &awssdk.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
			BaseEndpoint: awssdk.String(f.srv.URL), HTTPClient: f.srv.Client()}
	})
}

// launch launches an instant fleet of n g6.xlarge and returns its id and
// instance ids (from a first Usage call, before any metric exists).
func (f *usageFixture) launch(t *testing.T, p *Provider, n int) (string, []string) {
	t.Helper()
	spec := domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, Zones: []string{"us-east-1a"}, TargetCapacity: n, ClientToken: "U1"}
	// Launched six hours before the tests' now.
	clock := &testClock{t: testNow.Add(-6 * time.Hour)}
	f.fake.Now = clock.Now
	fl, err := p.LaunchFleet(context.Background(), spec)
	clock.Set(testNow)
	if err != nil || fl.ID == "" {
		t.Fatalf("launch: %+v %v", fl, err)
	}
	rep, err := p.Usage(context.Background(), fleetQuery(fl.ID, n))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range rep.Instances {
		ids = append(ids, in.ID)
	}
	if len(ids) != n {
		t.Fatalf("usage found %d instances of the fleet, want %d: %+v", len(ids), n, rep)
	}
	return fl.ID, ids
}

func fleetQuery(id string, n int) domain.UsageQuery {
	return domain.UsageQuery{Ref: "U1", Kind: domain.KindFleet, ProviderRef: id, Region: "us-east-1", InstanceType: "g6.xlarge",
		InstanceCount: n, Start: testNow.Add(-8 * time.Hour), From: testNow.Add(-12 * time.Hour), To: testNow}
}

// hourlyPoints are one datapoint a minute over the last h hours at value v.
func hourlyPoints(h int, v float64) []cwtest.Point {
	var out []cwtest.Point
	for t := testNow.Add(-time.Duration(h) * time.Hour); t.Before(testNow); t = t.Add(time.Minute) {
		out = append(out, cwtest.Point{At: t, Value: v})
	}
	return out
}

func TestUsageFleetGPUMetrics(t *testing.T) {
	f := newUsageFixture(t)
	p := f.provider(t)
	id, ids := f.launch(t, p, 2)
	// The agent's NVIDIA collector with append_dimensions adding
	// InstanceId: one series per GPU.
	f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"InstanceId": ids[0], "index": "0", "name": "NVIDIA L4", "arch": "Ada"}, hourlyPoints(3, 80)...)
	f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"InstanceId": ids[1], "index": "0", "name": "NVIDIA L4", "arch": "Ada"}, hourlyPoints(3, 20)...)
	f.cw.Add("AWS/EC2", "CPUUtilization", map[string]string{"InstanceId": ids[0]}, hourlyPoints(3, 5)...)
	rep, err := p.Usage(context.Background(), fleetQuery(id, 2))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Source != SourceGPU || rep.Note != "" {
		t.Fatalf("source %q note %q, want the GPU metric", rep.Source, rep.Note)
	}
	want := map[string]float64{ids[0]: 0.8, ids[1]: 0.2}
	for _, in := range rep.Instances {
		if len(in.Busy) == 0 {
			t.Fatalf("%s: no samples", in.ID)
		}
		for _, s := range in.Busy {
			if s.Share != want[in.ID] || s.Period != time.Hour {
				t.Errorf("%s sample %+v, want share %v an hour", in.ID, s, want[in.ID])
			}
		}
		for i := 1; i < len(in.Busy); i++ {
			if !in.Busy[i].At.After(in.Busy[i-1].At) {
				t.Errorf("%s samples out of order", in.ID)
			}
		}
		if in.Zone != "us-east-1a" || in.InstanceType != "g6.xlarge" || !in.Spot || in.Start.IsZero() {
			t.Errorf("instance %+v", in)
		}
	}
	calls := f.cw.Calls()
	last := calls[len(calls)-1]
	if len(last) != 6 || last[0].ProtocolHeader != "rpc-v2-cbor" || last[0].Content != "application/cbor" || last[0].ScanBy != "TimestampAscending" {
		t.Fatalf("GetMetricData sent %+v", last)
	}
	if !strings.Contains(last[0].Expression, `SEARCH('{CWAgent} MetricName="nvidia_smi_utilization_gpu" InstanceId="`+ids[0]+`"'`) ||
		last[2].Namespace != "AWS/EC2" || last[2].Dimensions["InstanceId"] != ids[0] || last[2].Stat != "Average" {
		t.Errorf("queries %+v", last[:3])
	}
}

func TestUsageFallsBackToCPUAndSaysSo(t *testing.T) {
	f := newUsageFixture(t)
	p := f.provider(t)
	id, ids := f.launch(t, p, 2)
	for _, i := range ids {
		f.cw.Add("AWS/EC2", "CPUUtilization", map[string]string{"InstanceId": i}, hourlyPoints(2, 50)...)
	}
	rep, err := p.Usage(context.Background(), fleetQuery(id, 2))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Source != SourceCPU || !strings.Contains(rep.Source, "CPU as a stand-in") {
		t.Fatalf("source %q", rep.Source)
	}
	for _, in := range rep.Instances {
		if len(in.Busy) != 2 || in.Busy[0].Share != 0.5 {
			t.Errorf("%s busy %+v", in.ID, in.Busy)
		}
	}
}

func TestUsageMetricsFailingOrEmpty(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(f *usageFixture, ids []string)
		source  string
		note    string
		samples bool
	}{
		{"no datapoints at all: no metrics, instances still known", func(*usageFixture, []string) {}, "", "", false},
		{"access denied: no metrics, and why", func(f *usageFixture, ids []string) { f.cw.FailWith("AccessDenied") }, "", "CloudWatch: ", false},
		{"throttled then answered: retried", func(f *usageFixture, ids []string) {
			f.cw.Throttle(2)
			f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"InstanceId": ids[0], "index": "0"}, hourlyPoints(2, 90)...)
		}, SourceGPU, "", true},
		{"the agent's namespace forbidden: CPU, and the note", func(f *usageFixture, ids []string) {
			f.cw.Deny("CWAgent")
			f.cw.Add("AWS/EC2", "CPUUtilization", map[string]string{"InstanceId": ids[0]}, hourlyPoints(2, 10)...)
		}, SourceCPU, "Forbidden", true},
		{"paged answers: every page read", func(f *usageFixture, ids []string) {
			f.cw.PageSize = 3
			f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"InstanceId": ids[0], "index": "0"}, hourlyPoints(5, 70)...)
		}, SourceGPU, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newUsageFixture(t)
			p := f.provider(t)
			id, ids := f.launch(t, p, 1)
			c.prepare(f, ids)
			rep, err := p.Usage(context.Background(), fleetQuery(id, 1))
			if err != nil {
				t.Fatalf("a metrics failure failed the report: %v", err)
			}
			if len(rep.Instances) != 1 {
				t.Fatalf("instances %+v", rep.Instances)
			}
			if rep.Source != c.source || (c.note != "" && !strings.Contains(rep.Note, c.note)) || (c.note == "" && rep.Note != "") {
				t.Errorf("source %q note %q, want %q and a note with %q", rep.Source, rep.Note, c.source, c.note)
			}
			if got := len(rep.Instances[0].Busy) > 0; got != c.samples {
				t.Errorf("samples %v, want %v", rep.Instances[0].Busy, c.samples)
			}
		})
	}
	// Paging: five hours at one datapoint per result per page of three.
	f := newUsageFixture(t)
	p := f.provider(t)
	id, ids := f.launch(t, p, 1)
	f.cw.PageSize = 3
	f.cw.Add("CWAgent", "nvidia_smi_utilization_gpu", map[string]string{"InstanceId": ids[0], "index": "0"}, hourlyPoints(5, 70)...)
	before := len(f.cw.Calls())
	rep, _ := p.Usage(context.Background(), fleetQuery(id, 1))
	if n := len(rep.Instances[0].Busy); n != 5 {
		t.Errorf("%d samples over pages, want 5", n)
	}
	if calls := f.cw.Calls()[before:]; len(calls) < 2 || !calls[len(calls)-1][0].HadNextToken {
		t.Errorf("%d calls: the NextToken was not followed", len(calls))
	}
}

func TestUsageBlockInstancesAndInterruptions(t *testing.T) {
	f := newUsageFixture(t)
	p := f.provider(t)
	f.blockInstances = `
<item><instanceId>i-0aaaaaaaaaaaaaaa1</instanceId><instanceType>p5.48xlarge</instanceType>
  <placement><availabilityZone>us-east-1a</availabilityZone></placement>
  <instanceState><code>16</code><name>running</name></instanceState>
  <launchTime>2026-06-10T02:00:00.000Z</launchTime><capacityReservationId>cr-0123456789abcdef0</capacityReservationId></item>
<item><instanceId>i-0aaaaaaaaaaaaaaa2</instanceId><instanceType>p5.48xlarge</instanceType>
  <placement><availabilityZone>us-east-1a</availabilityZone></placement>
  <instanceState><code>48</code><name>terminated</name></instanceState>
  <reason>Service initiated (2026-06-10 06:30:00 GMT)</reason>
  <stateReason><code>Server.SpotInstanceTermination</code><message>Server.SpotInstanceTermination: Spot instance termination</message></stateReason>
  <launchTime>2026-06-10T03:00:00.000Z</launchTime><instanceLifecycle>spot</instanceLifecycle></item>
<item><instanceId>i-0aaaaaaaaaaaaaaa3</instanceId><instanceType>p5.48xlarge</instanceType>
  <instanceState><code>48</code><name>terminated</name></instanceState>
  <launchTime>2026-06-10T04:00:00.000Z</launchTime></item>
<item><instanceId>i-0aaaaaaaaaaaaaaa4</instanceId><instanceType>p5.48xlarge</instanceType>
  <instanceState><code>48</code><name>terminated</name></instanceState>
  <reason>User initiated (2026-06-01 06:30:00 GMT)</reason>
  <launchTime>2026-06-01T03:00:00.000Z</launchTime></item>`
	// The third ended at a time EC2 no longer says: its last CPU
	// datapoint (09:xx) ends it.
	var pts []cwtest.Point
	for at := testNow.Add(-8 * time.Hour); at.Before(testNow.Add(-2 * time.Hour)); at = at.Add(time.Minute) {
		pts = append(pts, cwtest.Point{At: at, Value: 40})
	}
	f.cw.Add("AWS/EC2", "CPUUtilization", map[string]string{"InstanceId": "i-0aaaaaaaaaaaaaaa3"}, pts...)
	q := domain.UsageQuery{Ref: "B1", Kind: domain.KindBlock, ProviderRef: "cr-0123456789abcdef0", Region: "us-east-1",
		InstanceType: "p5.48xlarge", InstanceCount: 4, Start: testNow.Add(-12 * time.Hour), End: testNow.Add(12 * time.Hour),
		From: testNow.Add(-24 * time.Hour), To: testNow}
	rep, err := p.Usage(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if f.blockAsked == 0 {
		t.Fatal("DescribeInstances was not asked by capacity-reservation-id")
	}
	if len(rep.Instances) != 3 {
		t.Fatalf("instances %+v: want the three that ran in the span (not the one that ended on June 1)", rep.Instances)
	}
	byID := map[string]domain.InstanceUsage{}
	for _, in := range rep.Instances {
		byID[in.ID] = in
	}
	if in := byID["i-0aaaaaaaaaaaaaaa1"]; !in.End.IsZero() || in.Interrupted || in.Spot {
		t.Errorf("running instance %+v", in)
	}
	if in := byID["i-0aaaaaaaaaaaaaaa2"]; !in.Interrupted || !in.End.Equal(time.Date(2026, 6, 10, 6, 30, 0, 0, time.UTC)) || !in.Spot {
		t.Errorf("interrupted instance %+v", in)
	}
	if in := byID["i-0aaaaaaaaaaaaaaa3"]; in.Interrupted || !in.End.Equal(testNow.Add(-2*time.Hour)) {
		t.Errorf("instance ended at an unsaid time: end %s, want its last datapoint's period end %s", in.End, testNow.Add(-2*time.Hour))
	}
	if rep.Source != SourceCPU {
		t.Errorf("source %q", rep.Source)
	}
}

func TestUsageRefusesARowWithoutAnID(t *testing.T) {
	f := newUsageFixture(t)
	p := f.provider(t)
	if _, err := p.Usage(context.Background(), domain.UsageQuery{Ref: "x", Region: "us-east-1"}); err == nil {
		t.Error("a row without an AWS id was answered")
	}
}
