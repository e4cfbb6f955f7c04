package ec2test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC)

func form(kv ...string) url.Values {
	f := url.Values{"Version": {"2016-11-15"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Add(kv[i], kv[i+1])
	}
	return f
}

type historyAnswer struct {
	Items []struct {
		InstanceType       string  `xml:"instanceType"`
		ProductDescription string  `xml:"productDescription"`
		SpotPrice          string  `xml:"spotPrice"`
		Timestamp          string  `xml:"timestamp"`
		AvailabilityZone   string  `xml:"availabilityZone"`
		AvailabilityZoneID *string `xml:"availabilityZoneId"`
	} `xml:"spotPriceHistorySet>item"`
	NextToken *string `xml:"nextToken"`
}

func history(t *testing.T, srvURL, region string, f url.Values) historyAnswer {
	t.Helper()
	status, body := post(t, srvURL, f, region)
	if status != 200 {
		t.Fatalf("DescribeSpotPriceHistory %v: %d %s", f, status, body)
	}
	var a historyAnswer
	if err := xml.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer is not XML: %v", err)
	}
	return a
}

// Paging as the API Reference documents it: every item exactly once,
// newest first across pages, the last page with an empty nextToken, and
// the price in force at StartTime with its own, older timestamp.
func TestSpotPriceHistoryPaging(t *testing.T) {
	s := New(Generate(1, []string{"us-east-1"}, testNow.Add(-6*time.Hour), testNow, 20*time.Minute)...)
	srv := s.Start()
	defer srv.Close()
	start := testNow.Add(-3 * time.Hour)
	base := []string{"Action", "DescribeSpotPriceHistory", "StartTime", start.Format(time.RFC3339), "EndTime", testNow.Format(time.RFC3339),
		"InstanceType.1", "p5.48xlarge", "InstanceType.2", "g6.xlarge", "ProductDescription.1", "Linux/UNIX", "MaxResults", "7"}
	seen := map[string]bool{}
	var last time.Time
	tok, pages, older := "", 0, 0
	for {
		kv := base
		if tok != "" {
			kv = append(append([]string{}, base...), "NextToken", tok)
		}
		a := history(t, srv.URL, "us-east-1", form(kv...))
		pages++
		if len(a.Items) > 7 {
			t.Fatalf("page of %d items for MaxResults 7", len(a.Items))
		}
		for _, it := range a.Items {
			at, err := time.Parse(time.RFC3339, it.Timestamp)
			if err != nil {
				t.Fatalf("timestamp %q", it.Timestamp)
			}
			if !last.IsZero() && at.After(last) {
				t.Errorf("item of %s after one of %s: not newest first", at, last)
			}
			last = at
			if !at.After(start) {
				older++
			}
			k := it.InstanceType + it.AvailabilityZone + it.Timestamp
			if seen[k] {
				t.Errorf("item %s twice", k)
			}
			seen[k] = true
			if it.AvailabilityZoneID == nil || !strings.HasPrefix(*it.AvailabilityZoneID, "use1-az") {
				t.Errorf("item without its zone id: %+v", it)
			}
		}
		if a.NextToken == nil {
			t.Fatal("no nextToken element")
		}
		if tok = *a.NextToken; tok == "" {
			break
		}
	}
	// 2 types × 3 zones: 9 changes each in (start, now], plus the one in
	// force at start.
	if want := 2 * 3 * 10; len(seen) != want || older != 6 {
		t.Errorf("%d items (%d at or before StartTime), want %d (6)", len(seen), older, want)
	}
	if pages != 9 {
		t.Errorf("%d pages of 7 for 60 items", pages)
	}
}

func TestSpotPriceHistoryFiltersAndOmittedFields(t *testing.T) {
	regions := Generate(1, []string{"us-east-1"}, testNow.Add(-time.Hour), testNow, 20*time.Minute)
	regions[0].OmitZoneIDs = true
	s := New(regions...)
	srv := s.Start()
	defer srv.Close()
	a := history(t, srv.URL, "us-east-1", form("Action", "DescribeSpotPriceHistory", "Filter.1.Name", "instance-type", "Filter.1.Value.1", "g6*",
		"Filter.2.Name", "availability-zone", "Filter.2.Value.1", "us-east-1?"))
	if len(a.Items) == 0 {
		t.Fatal("the wildcard filters selected nothing")
	}
	for _, it := range a.Items {
		if !strings.HasPrefix(it.InstanceType, "g6") {
			t.Errorf("%s passed the instance-type filter g6*", it.InstanceType)
		}
		if it.AvailabilityZoneID != nil {
			t.Errorf("availabilityZoneId %q in a region that omits it", *it.AvailabilityZoneID)
		}
	}
	a = history(t, srv.URL, "us-east-1", form("Action", "DescribeSpotPriceHistory", "AvailabilityZoneId", "use1-az2"))
	for _, it := range a.Items {
		if it.AvailabilityZone != "us-east-1b" {
			t.Errorf("AvailabilityZoneId use1-az2 answered %s", it.AvailabilityZone)
		}
	}
	if len(a.Items) == 0 {
		t.Error("AvailabilityZoneId selected nothing")
	}
	a = history(t, srv.URL, "us-east-1", form("Action", "DescribeSpotPriceHistory", "ProductDescription.1", "Windows"))
	if len(a.Items) != 0 || a.NextToken == nil || *a.NextToken != "" {
		t.Errorf("Windows: %d items, token %v; want none and an empty token", len(a.Items), a.NextToken)
	}
	for name, f := range map[string]url.Values{
		"both zone forms": form("Action", "DescribeSpotPriceHistory", "AvailabilityZone", "us-east-1a", "AvailabilityZoneId", "use1-az1"),
		"MaxResults 4":    form("Action", "DescribeSpotPriceHistory", "MaxResults", "4"),
		"MaxResults 1001": form("Action", "DescribeSpotPriceHistory", "MaxResults", "1001"),
	} {
		if status, body := post(t, srv.URL, f, "us-east-1"); status != 400 || !strings.Contains(body, "InvalidParameterValue") {
			t.Errorf("%s: %d %s, want 400 InvalidParameterValue", name, status, body)
		}
	}
}

func TestInstanceTypesPagingAndFilters(t *testing.T) {
	s := New(Generate(1, []string{"us-east-1"}, testNow.Add(-time.Hour), testNow, time.Hour)...)
	srv := s.Start()
	defer srv.Close()
	type answer struct {
		Types     []string `xml:"instanceTypeSet>item>instanceType"`
		GPUs      []string `xml:"instanceTypeSet>item>gpuInfo>gpus>item>name"`
		NextToken string   `xml:"nextToken"`
	}
	var all []string
	tok := ""
	for pages := 0; ; pages++ {
		f := form("Action", "DescribeInstanceTypes", "MaxResults", "5")
		if tok != "" {
			f.Set("NextToken", tok)
		}
		status, body := post(t, srv.URL, f, "us-east-1")
		var a answer
		if status != 200 || xml.Unmarshal([]byte(body), &a) != nil {
			t.Fatalf("%d %s", status, body)
		}
		all = append(all, a.Types...)
		if tok = a.NextToken; tok == "" {
			if pages != 1 {
				t.Errorf("%d pages of 5 for 9 types", pages+1)
			}
			break
		}
	}
	if len(all) != len(standardTypes) {
		t.Errorf("%d types over the pages, want %d", len(all), len(standardTypes))
	}
	status, body := post(t, srv.URL, form("Action", "DescribeInstanceTypes", "Filter.1.Name", "instance-type", "Filter.1.Value.1", "p*", "Filter.1.Value.2", "g*"), "us-east-1")
	var a answer
	if status != 200 || xml.Unmarshal([]byte(body), &a) != nil {
		t.Fatalf("%d %s", status, body)
	}
	if len(a.Types) != 6 || len(a.GPUs) != 6 {
		t.Errorf("p* and g*: types %v with %d GPU entries, want the 6 GPU types", a.Types, len(a.GPUs))
	}
	status, body = post(t, srv.URL, form("Action", "DescribeInstanceTypes", "InstanceType.1", "p9.mega"), "us-east-1")
	if status != 400 || !strings.Contains(body, "InvalidInstanceType") {
		t.Errorf("unknown type: %d %s", status, body)
	}
}

func getProducts(t *testing.T, srvURL string, in map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, srvURL, bytes.NewReader(b))
	req.Header.Set("X-Amz-Target", "AWSPriceListService.GetProducts")
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260610/us-east-1/pricing/aws4_request, SignedHeaders=host, Signature=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestPriceListFiltersAndPaging(t *testing.T) {
	s := New(Generate(1, []string{"us-east-1", "us-west-2", "eu-west-1"}, testNow.Add(-time.Hour), testNow, time.Hour)...)
	srv := s.Start()
	defer srv.Close()
	term := func(typ, field, value string) map[string]string {
		return map[string]string{"Type": typ, "Field": field, "Value": value}
	}
	// The GPU family of two regions, on demand: 6 types × 2 regions, in
	// pages of 5 with an opaque token.
	filters := []map[string]string{
		term("TERM_MATCH", "instanceFamily", "GPU instance"), term("ANY_OF", "regionCode", "us-east-1, eu-west-1"),
		term("TERM_MATCH", "marketoption", "OnDemand"), term("NONE_OF", "instanceType", "g4dn.xlarge"),
	}
	seen := map[string]bool{}
	tok := ""
	for pages := 1; ; pages++ {
		in := map[string]any{"ServiceCode": "AmazonEC2", "Filters": filters, "MaxResults": 5}
		if tok != "" {
			in["NextToken"] = tok
		}
		status, out := getProducts(t, srv.URL, in)
		if status != 200 {
			t.Fatalf("%d %v", status, out)
		}
		list, _ := out["PriceList"].([]any)
		if len(list) > 5 {
			t.Fatalf("page of %d for MaxResults 5", len(list))
		}
		for _, doc := range list {
			var p struct {
				Product struct {
					Attributes map[string]string `json:"attributes"`
				} `json:"product"`
			}
			if err := json.Unmarshal([]byte(doc.(string)), &p); err != nil {
				t.Fatalf("PriceList member is not a JSON document: %v", err)
			}
			a := p.Product.Attributes
			if a["instanceFamily"] != "GPU instance" || a["regionCode"] == "us-west-2" || a["instanceType"] == "g4dn.xlarge" || a["marketoption"] != "OnDemand" {
				t.Errorf("product %v passed the filters", a)
			}
			seen[a["regionCode"]+" "+a["instanceType"]] = true
		}
		next, _ := out["NextToken"].(string)
		if next == "" {
			if pages != 2 {
				t.Errorf("%d pages for 10 products at 5 a page", pages)
			}
			break
		}
		tok = next
	}
	if len(seen) != 10 {
		t.Errorf("%d products, want 5 GPU types × 2 regions", len(seen))
	}
	for name, in := range map[string]map[string]any{
		"bad type":    {"ServiceCode": "AmazonEC2", "Filters": []map[string]string{term("LIKE", "instanceType", "p5*")}},
		"MaxResults":  {"ServiceCode": "AmazonEC2", "MaxResults": 101},
		"bad token":   {"ServiceCode": "AmazonEC2", "NextToken": "nope"},
		"long values": {"ServiceCode": "AmazonEC2", "Filters": []map[string]string{term("ANY_OF", "instanceType", strings.Repeat("p5.48xlarge,", 100))}},
	} {
		if status, out := getProducts(t, srv.URL, in); status != 400 {
			t.Errorf("%s: %d %v, want 400", name, status, out)
		}
	}
}

func TestHangAndLatency(t *testing.T) {
	s := New(Generate(1, []string{"us-east-1", "us-west-2"}, testNow.Add(-time.Hour), testNow, time.Hour)...)
	s.AddFault(Fault{Region: "us-west-2", Hang: true})
	srv := s.Start()
	defer srv.Close()
	ask := func(region string, within time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(form("Action", "DescribeRegions").Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260610/"+region+"/ec2/aws4_request, SignedHeaders=host, Signature=x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil
	}
	if err := ask("us-west-2", 200*time.Millisecond); err == nil {
		t.Error("the hanging region answered")
	}
	if err := ask("us-east-1", 10*time.Second); err != nil {
		t.Errorf("us-east-1: %v", err)
	}
	s.mu.Lock()
	s.Latency = time.Hour
	s.mu.Unlock()
	if err := ask("us-east-1", 200*time.Millisecond); err == nil {
		t.Error("an answer within 200ms with an hour of latency")
	}
}

// The fake's buckets are AWS's documented ones: 100 Describe calls at once
// pass, the 101st is refused, and another region or action has its own.
func TestDocumentedRateLimits(t *testing.T) {
	for action, want := range map[string]RateLimit{
		"DescribeSpotPriceHistory": {100, 20}, "GetSpotPlacementScores": {100, 20}, "DescribeInstanceTypes": {100, 20},
		"DescribeCapacityBlockOfferings": {10, 0.15}, "PurchaseCapacityBlock": {10, 0.15}, "CreateFleet": {50, 5},
		"pricing:GetProducts": {10, 5},
	} {
		if got := DocumentedRateLimit(action); got != want {
			t.Errorf("%s: %+v, want %+v", action, got, want)
		}
	}
	s := New()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < 100; i++ {
		if !s.take("DescribeSpotPriceHistory", "us-east-1") {
			t.Fatalf("call %d refused within the bucket of 100", i+1)
		}
	}
	if s.take("DescribeSpotPriceHistory", "us-east-1") {
		t.Error("the 101st call at once passed")
	}
	if !s.take("DescribeSpotPriceHistory", "us-west-2") || !s.take("DescribeInstanceTypes", "us-east-1") {
		t.Error("another region's or action's bucket was drained too")
	}
}

func TestRateLimitedAnswer(t *testing.T) {
	s := New(Generate(1, []string{"us-east-1"}, testNow.Add(-time.Hour), testNow, time.Hour)...)
	s.EnforceRateLimits = true
	srv := s.Start()
	defer srv.Close()
	throttled := 0
	for i := 0; i < 12; i++ {
		status, body := post(t, srv.URL, form("Action", "DescribeCapacityBlockOfferings", "CapacityDurationHours", "24", "InstanceCount", "1"), "us-east-1")
		if status == 503 && strings.Contains(body, "<Code>RequestLimitExceeded</Code>") {
			throttled++
		}
	}
	// 10 tokens, refilled at 0.15 a second: the 11th and 12th are refused.
	if throttled != 2 {
		t.Errorf("%d of 12 quick DescribeCapacityBlockOfferings throttled, want 2", throttled)
	}
}

func TestWildcard(t *testing.T) {
	for _, tc := range []struct {
		p, v string
		ok   bool
	}{
		{"c5*", "c5.2xlarge", true}, {"c5*", "c6i.large", false}, {"*", "", true}, {"us-east-1?", "us-east-1a", true},
		{"us-east-1?", "us-east-1", false}, {"*.48xlarge", "p5.48xlarge", true}, {"p*x*", "p5.48xlarge", true},
		{"Linux/UNIX", "Linux/UNIX", true}, {"g*", "p4d.24xlarge", false}, {"a*b*c", "aXbYbZc", true}, {"a*b*c", "aXbYbZ", false},
	} {
		if got := wildcard(tc.p, tc.v); got != tc.ok {
			t.Errorf("wildcard(%q, %q) = %v", tc.p, tc.v, got)
		}
	}
}
