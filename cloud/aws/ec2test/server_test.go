package ec2test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, srvURL string, form url.Values, region string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srvURL, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if region != "" {
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260610/"+region+"/ec2/aws4_request, SignedHeaders=host, Signature=x")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServerErrors(t *testing.T) {
	now := time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC)
	s := New(Generate(1, []string{"us-east-1"}, now.Add(-time.Hour), now, 10*time.Minute)...)
	srv := s.Start()
	defer srv.Close()
	v := func(kv ...string) url.Values {
		f := url.Values{"Version": {"2016-11-15"}}
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	for name, tc := range map[string]struct {
		form   url.Values
		region string
		status int
		code   string
	}{
		"unsigned":       {v("Action", "DescribeRegions"), "", 400, "AuthFailure"},
		"unknown action": {v("Action", "LaunchRockets"), "us-east-1", 400, "InvalidAction"},
		"bad token":      {v("Action", "DescribeSpotPriceHistory", "NextToken", "zzz"), "us-east-1", 400, "InvalidNextToken"},
		"bad max":        {v("Action", "DescribeSpotPriceHistory", "MaxResults", "5000"), "us-east-1", 400, "InvalidParameterValue"},
		"unknown region": {v("Action", "DescribeInstanceTypes"), "mars-north-1", 401, "AuthFailure"},
		"dry run":        {v("Action", "DescribeSpotPriceHistory", "DryRun", "true"), "us-east-1", 412, "DryRunOperation"},
		"block hours":    {v("Action", "DescribeCapacityBlockOfferings", "CapacityDurationHours", "30", "InstanceCount", "1"), "us-east-1", 400, "InvalidParameterValue"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := post(t, srv.URL, tc.form, tc.region)
			if status != tc.status || !strings.Contains(body, "<Code>"+tc.code+"</Code>") || !strings.Contains(body, "<Response><Errors><Error>") {
				t.Errorf("%d %s, want %d %s", status, body, tc.status, tc.code)
			}
		})
	}
	status, body := post(t, srv.URL, v("Action", "DescribeRegions"), "us-east-1")
	if status != 200 || !strings.Contains(body, `<DescribeRegionsResponse xmlns="`+Namespace+`">`) || !strings.Contains(body, "<regionName>us-east-1</regionName>") {
		t.Errorf("DescribeRegions: %d %s", status, body)
	}
	if n := s.Count("", ""); n != 8 {
		t.Errorf("%d calls recorded, want 8", n)
	}
}

func FuzzSignedRegion(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20260610/us-east-1/ec2/aws4_request, SignedHeaders=host")
	f.Add("Credential=")
	f.Add("")
	f.Fuzz(func(t *testing.T, h string) {
		r := signedRegion(http.Header{"Authorization": {h}})
		if strings.ContainsAny(r, "/, ") {
			t.Fatalf("region %q from %q", r, h)
		}
	})
}
