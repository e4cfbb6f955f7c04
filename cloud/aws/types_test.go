package aws

import (
	"context"
	"os"
	"testing"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

// TestGPUTypesFromPayload reads a DescribeInstanceTypes answer in AWS's
// shape (testdata; written from AWS's documented answers, as no capture
// of a live account is available here) through the real SDK.
func TestGPUTypesFromPayload(t *testing.T) {
	body, err := os.ReadFile("../../testdata/ec2/describe-instance-types-gpu.xml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, "us-east-1")
	f.fake.AddFault(ec2test.Fault{Action: "DescribeInstanceTypes", Body: string(body)})
	p := f.provider(t, nil)
	types, err := p.gpuTypes(context.Background(), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]domain.GPUSpec{}
	for _, typ := range types {
		got[typ.InstanceType] = typ.GPU
	}
	want := map[string]domain.GPUSpec{
		"p5.48xlarge": {Model: "H100", Count: 8, MemoryGiB: 80},
		// AWS says 45776 MiB (44.7 GiB); the catalog's 48 GB wins.
		"g6e.xlarge": {Model: "L40S", Count: 1, MemoryGiB: 48},
		// Not in the catalog: AWS's own figures, the T4g read as a T4.
		"g5g.xlarge": {Model: "T4", Count: 1, MemoryGiB: 16},
	}
	if len(got) != len(want) {
		t.Errorf("types %v, want %v (no Radeon, Inferentia or CPU-only types)", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
}

// DescribeInstanceTypes is asked for the GPU families only (the
// documented instance-type filter with wildcards), and paged: at 5 a page
// the fake's six GPU types take two.
func TestGPUTypesFilteredAndPaged(t *testing.T) {
	f := newFixture(t, "us-east-1")
	f.fake.MaxPage = 5
	p := f.provider(t, nil)
	types, err := p.gpuTypes(context.Background(), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != 6 {
		t.Errorf("%d GPU types, want the fake's 6", len(types))
	}
	var calls []ec2test.Call
	for _, c := range f.fake.Calls() {
		if c.Action == "DescribeInstanceTypes" {
			calls = append(calls, c)
		}
	}
	if len(calls) != 2 || calls[1].Params.Get("NextToken") == "" {
		t.Fatalf("%d DescribeInstanceTypes calls, want 2 pages", len(calls))
	}
	q := calls[0].Params
	if q.Get("Filter.1.Name") != "instance-type" || q.Get("Filter.1.Value.1") != "p*" || q.Get("Filter.1.Value.2") != "g*" {
		t.Errorf("filter %v, want instance-type p* and g*", q)
	}
}
