package cwtest

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"
)

var t0 = time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC)

func client(t *testing.T, s *Server) *cloudwatch.Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return cloudwatch.NewFromConfig(awssdk.Config{Region: "us-east-1", BaseEndpoint: awssdk.String(srv.URL), HTTPClient: srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""), RetryMaxAttempts: 1})
}

func cpuQuery(id, instance string) cwtypes.MetricDataQuery {
	return cwtypes.MetricDataQuery{Id: awssdk.String(id), MetricStat: &cwtypes.MetricStat{Period: awssdk.Int32(3600), Stat: awssdk.String("Average"),
		Metric: &cwtypes.Metric{Namespace: awssdk.String("AWS/EC2"), MetricName: awssdk.String("CPUUtilization"),
			Dimensions: []cwtypes.Dimension{{Name: awssdk.String("InstanceId"), Value: awssdk.String(instance)}}}}}
}

// TestTheRealClientReadsTheFake: the SDK's own client decodes the fake's
// CBOR; results come newest first by default (ScanBy
// TimestampDescending), hourly averages of the raw points, with the
// documented example's members; a metric without datapoints is an empty,
// Complete result.
func TestTheRealClientReadsTheFake(t *testing.T) {
	s := New()
	s.Add("AWS/EC2", "CPUUtilization", map[string]string{"InstanceId": "i-1"},
		Point{t0.Add(10 * time.Minute), 10}, Point{t0.Add(20 * time.Minute), 30}, Point{t0.Add(70 * time.Minute), 50})
	out, err := client(t, s).GetMetricData(context.Background(), &cloudwatch.GetMetricDataInput{
		StartTime: awssdk.Time(t0), EndTime: awssdk.Time(t0.Add(3 * time.Hour)),
		MetricDataQueries: []cwtypes.MetricDataQuery{cpuQuery("a", "i-1"), cpuQuery("b", "i-2")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.MetricDataResults) != 2 {
		t.Fatalf("results %+v", out.MetricDataResults)
	}
	a := out.MetricDataResults[0]
	if awssdk.ToString(a.Id) != "a" || awssdk.ToString(a.Label) != "CPUUtilization" || a.StatusCode != cwtypes.StatusCodeComplete ||
		len(a.Timestamps) != 2 || !a.Timestamps[0].Equal(t0.Add(time.Hour)) || a.Values[0] != 50 || a.Values[1] != 20 {
		t.Errorf("result a %+v %v %v", a, a.Timestamps, a.Values)
	}
	if b := out.MetricDataResults[1]; len(b.Values) != 0 || b.StatusCode != cwtypes.StatusCodeComplete {
		t.Errorf("result b %+v", b)
	}
}

func TestErrorsAsTheSDKSeesThem(t *testing.T) {
	s := New()
	s.FailWith("AccessDenied")
	_, err := client(t, s).GetMetricData(context.Background(), &cloudwatch.GetMetricDataInput{
		StartTime: awssdk.Time(t0), EndTime: awssdk.Time(t0.Add(time.Hour)), MetricDataQueries: []cwtypes.MetricDataQuery{cpuQuery("a", "i-1")}})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDenied" {
		t.Errorf("error %v, want the API error AccessDenied", err)
	}
	s.FailWith("")
	// A bad request is refused as CloudWatch refuses it.
	_, err = client(t, s).GetMetricData(context.Background(), &cloudwatch.GetMetricDataInput{
		StartTime: awssdk.Time(t0), EndTime: awssdk.Time(t0), MetricDataQueries: []cwtypes.MetricDataQuery{cpuQuery("a", "i-1")}})
	if !errors.As(err, &api) || api.ErrorCode() != "InvalidParameterValue" {
		t.Errorf("start = end: %v", err)
	}
	s.Throttle(1)
	_, err = client(t, s).GetMetricData(context.Background(), &cloudwatch.GetMetricDataInput{
		StartTime: awssdk.Time(t0), EndTime: awssdk.Time(t0.Add(time.Hour)), MetricDataQueries: []cwtypes.MetricDataQuery{cpuQuery("a", "i-1")}})
	if !errors.As(err, &api) || api.ErrorCode() != "Throttling" {
		t.Errorf("throttled: %v", err)
	}
}
