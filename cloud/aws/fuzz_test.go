package aws

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

// FuzzParsePriceListProduct: a Price List product document (a PriceList
// member of GetProducts) gives a positive hourly on-demand price or none,
// never a price beside an error.
func FuzzParsePriceListProduct(f *testing.F) {
	f.Add([]byte(`{"product":{"attributes":{"instanceType":"p5.48xlarge"}},"terms":{"OnDemand":{"A.B":{"priceDimensions":{"A.B.C":{"unit":"Hrs","pricePerUnit":{"USD":"98.3200000000"}}}}}}}`))
	f.Add([]byte(`{"product":{"attributes":{}},"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"unit":"Hrs","pricePerUnit":{"USD":"0.0000000000"}}}}}}}`))
	f.Add([]byte(`{"product":{"attributes":{}},"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"unit":"Hrs","pricePerUnit":{"USD":"-1"}}}}}}}`))
	f.Add([]byte(`{"product":{"attributes":{}},"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"unit":"Hrs","pricePerUnit":{"USD":"NaN"}}}}}}}`))
	f.Add([]byte(`{"product":{}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, _, v, err := parsePriceListProduct(doc)
		if err != nil && v != nil {
			t.Fatalf("price %v with error %v", *v, err)
		}
		if v != nil && !(*v > 0) {
			t.Fatalf("price %v: want a positive number or nil", *v)
		}
	})
}

func TestParsePriceListProduct(t *testing.T) {
	for name, tc := range map[string]struct {
		doc     string
		want    float64 // 0: nil
		wantErr bool
	}{
		"hourly":        {doc: `{"product":{"attributes":{"a":"b"}},"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"unit":"Hrs","pricePerUnit":{"USD":"98.3200000000"}}}}}}}`, want: 98.32},
		"zero is none":  {doc: `{"product":{"attributes":{"a":"b"}},"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"unit":"Hrs","pricePerUnit":{"USD":"0.0000000000"}}}}}}}`},
		"no on-demand":  {doc: `{"product":{"attributes":{"a":"b"}},"terms":{"Reserved":{}}}`},
		"not hourly":    {doc: `{"product":{"attributes":{"a":"b"}},"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"unit":"Quantity","pricePerUnit":{"USD":"5"}}}}}}}`},
		"bad number":    {doc: `{"product":{"attributes":{"a":"b"}},"terms":{"OnDemand":{"x":{"priceDimensions":{"y":{"unit":"Hrs","pricePerUnit":{"USD":"cheap"}}}}}}}`, wantErr: true},
		"no attributes": {doc: `{"terms":{}}`, wantErr: true},
		"not json":      {doc: `<xml/>`, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, v, err := parsePriceListProduct([]byte(tc.doc))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			switch {
			case tc.want == 0 && v != nil:
				t.Errorf("price %v, want none", *v)
			case tc.want != 0 && (v == nil || *v != tc.want):
				t.Errorf("price %v, want %v", v, tc.want)
			}
		})
	}
}

func FuzzValidateOfferingQuery(f *testing.F) {
	f.Add("H100", 1, 0, int64(48), int64(0), int64(0))
	f.Add("a100", 0, 12, int64(504), int64(3600), int64(86400))
	f.Add("", -1, -1, int64(-5), int64(-1), int64(1<<40))
	f.Fuzz(func(t *testing.T, gpu string, instances, gpus int, hours, afterS, beforeS int64) {
		q := domain.OfferingQuery{GPU: gpu, Instances: instances, GPUs: gpus, Duration: time.Duration(hours) * time.Hour}
		if afterS != 0 {
			q.StartAfter = testNow.Add(time.Duration(afterS) * time.Second)
		}
		if beforeS != 0 {
			q.StartBefore = testNow.Add(time.Duration(beforeS) * time.Second)
		}
		got, err := ValidateOfferingQuery(q, testNow)
		if err != nil {
			return
		}
		h := int(got.Duration / time.Hour)
		if !blockTerms.ValidHours(h) || got.Instances > blockTerms.MaxInstances || (got.Instances <= 0 && got.GPUs <= 0) {
			t.Fatalf("accepted %+v", got)
		}
		if got.StartAfter.Before(testNow) || got.StartBefore.After(testNow.Add(blockTerms.MaxLead)) || !got.StartBefore.After(got.StartAfter) {
			t.Fatalf("start range %v … %v accepted", got.StartAfter, got.StartBefore)
		}
	})
}

func FuzzAWSRegions(f *testing.F) {
	for _, s := range []string{"us-east-1", "eastus", "us-gov-west-1", "eu-central-2", "", "us-east-", "US-EAST-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := awsRegions([]string{s})
		if len(out) == 1 && out[0] != s {
			t.Fatalf("changed %q to %q", s, out[0])
		}
	})
}

// FuzzSpotHistoryAnswer feeds arbitrary answers to DescribeSpotPriceHistory
// through the real SDK deserializer and the provider: whatever AWS (or a
// proxy) sends, the fetch must neither panic nor report a price that is
// not a non-negative number.
func FuzzSpotHistoryAnswer(f *testing.F) {
	f.Add(`<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><spotPriceHistorySet><item><instanceType>p5.48xlarge</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>12.5</spotPrice><timestamp>2026-06-10T11:00:00.000Z</timestamp><availabilityZone>us-east-1a</availabilityZone></item></spotPriceHistorySet></DescribeSpotPriceHistoryResponse>`)
	f.Add(`<DescribeSpotPriceHistoryResponse><spotPriceHistorySet><item><spotPrice>-1</spotPrice></item></spotPriceHistorySet><nextToken></nextToken></DescribeSpotPriceHistoryResponse>`)
	f.Add(`<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>slow down</Message></Error></Errors></Response>`)
	f.Add(`<a><b>`)
	f.Add(`<DescribeSpotPriceHistoryResponse><spotPriceHistorySet><item><instanceType>p5.48xlarge</instanceType><spotPrice>NaN</spotPrice><timestamp>2026-06-10T11:00:00Z</timestamp><availabilityZone>us-east-1a</availabilityZone></item></spotPriceHistorySet></DescribeSpotPriceHistoryResponse>`)
	fx := newFixture(f, "us-east-1")
	p := fx.provider(f, func(o *Options) { o.MaxAttempts = 1 })
	// Warm the instance types so each run asks only for history.
	if err := p.Fetch(context.Background(), backfill(time.Minute), newCollector().sink); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fx.fake.ClearFaults()
		fx.fake.AddFault(ec2test.Fault{Action: "DescribeSpotPriceHistory", Body: body, Raw: true, Times: 1})
		c := newCollector()
		req := backfill(time.Hour)
		req.Query.Regions = []string{"us-east-1"}
		_ = p.Fetch(context.Background(), req, c.sink)
		for _, ev := range c.events {
			for _, pt := range ev.Points {
				if !(pt.USDHour >= 0) || math.IsInf(pt.USDHour, 0) || pt.Pool.Zone == "" || pt.Pool.InstanceType == "" {
					t.Fatalf("bad point %+v from %q", pt, body)
				}
			}
		}
	})
}
