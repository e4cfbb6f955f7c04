package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/gpumarket/gpumarket/cloud/aws/ec2test"
	"github.com/gpumarket/gpumarket/domain"
)

func TestRefusalsBeforeAnyCallAreDeclined(t *testing.T) {
	// The ledger records a declined action "failed" (nothing was bought)
	// and any other error "unknown" (reconciled, never retried).
	if !errors.Is(specErrorf("no launch template"), domain.ErrDeclined) {
		t.Error("an invalid spec is not declined")
	}
	if !errors.Is(fmt.Errorf("%w: expired", ErrNoCredentials), domain.ErrDeclined) {
		t.Error("a credential refusal is not declined")
	}
	if errors.Is(errors.New("connection reset"), ErrNoCredentials) {
		t.Error("a plain error matched ErrNoCredentials")
	}
}

// moneyAnswers are the answers a money call can get that are not a
// success, as the fake sends them through the real SDK, and whether each
// is AWS's definite "no". A server fault (EC2's "Server error codes":
// InternalError, InternalFailure, ServiceUnavailable, Unavailable,
// RequestTimeout) or a proxy's 5xx with no EC2 error document may come
// after the purchase was made: reading it as a "no" would free the
// offering for a second purchase of a block that may be bought.
var moneyAnswers = []struct {
	name     string
	fault    ec2test.Fault
	declined bool
}{
	{"throttled 503", ec2test.Fault{Status: 503, Code: "RequestLimitExceeded", Message: "Request limit exceeded."}, true},
	{"throttled 400", ec2test.Fault{Status: 400, Code: "Throttling", Message: "Rate exceeded"}, true},
	{"no capacity 500", ec2test.Fault{Status: 500, Code: "InsufficientInstanceCapacity", Message: "We currently do not have sufficient capacity"}, true},
	{"no capacity 400", ec2test.Fault{Status: 400, Code: "InsufficientCapacity", Message: "Insufficient capacity."}, true},
	{"bad parameter", ec2test.Fault{Status: 400, Code: "InvalidParameterValue", Message: "The capacity block offering is not available."}, true},
	{"unauthorized", ec2test.Fault{Status: 403, Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."}, true},
	{"InternalError 500", ec2test.Fault{Status: 500, Code: "InternalError", Message: "An internal error has occurred"}, false},
	{"InternalError 400", ec2test.Fault{Status: 400, Code: "InternalError", Message: "An internal error has occurred"}, false},
	{"InternalFailure 500", ec2test.Fault{Status: 500, Code: "InternalFailure", Message: "The request processing has failed"}, false},
	{"ServiceUnavailable 503", ec2test.Fault{Status: 503, Code: "ServiceUnavailable", Message: "The server is overloaded"}, false},
	{"Unavailable 503", ec2test.Fault{Status: 503, Code: "Unavailable", Message: "The server is overloaded"}, false},
	{"RequestTimeout 400", ec2test.Fault{Status: 400, Code: "RequestTimeout", Message: "The request timed out"}, false},
	{"RequestTimeout 408", ec2test.Fault{Status: 408, Code: "RequestTimeout", Message: "The request timed out"}, false},
	{"RequestTimeoutException 408", ec2test.Fault{Status: 408, Code: "RequestTimeoutException", Message: "The request timed out"}, false},
	{"other code with 500", ec2test.Fault{Status: 500, Code: "SomethingNew", Message: "?"}, false},
	{"proxy 502 html", ec2test.Fault{Status: 502, Raw: true, Body: "<html><body><h1>502 Bad Gateway</h1></body></html>"}, false},
	{"proxy 504 empty", ec2test.Fault{Status: 504, Raw: true}, false},
	{"proxy 503 text", ec2test.Fault{Status: 503, Raw: true, Body: "upstream connect error or disconnect/reset before headers"}, false},
	{"connection dropped", ec2test.Fault{Drop: true}, false},
}

func TestBookServerFaultsAreNeverADefiniteNo(t *testing.T) {
	for _, tc := range moneyAnswers {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "us-east-1")
			p := f.provider(t, nil)
			o := firstOffering(t, p)
			fault := tc.fault
			fault.Action = "PurchaseCapacityBlock"
			f.fake.AddFault(fault)
			_, err := p.Book(context.Background(), domain.BookRequest{Offering: o, After: testNow, Ref: "L1"})
			if err == nil {
				t.Fatal("Book succeeded against a failing endpoint")
			}
			if got := Descriptor.IsDeclined(err); got != tc.declined {
				t.Errorf("IsDeclined(%v) = %v, want %v", err, got, tc.declined)
			}
			if n := f.fake.Count("PurchaseCapacityBlock", ""); n != 1 {
				t.Errorf("%d purchase calls, want 1 (never retried)", n)
			}
		})
	}
}

func TestLaunchFleetServerFaultsAreNeverADefiniteNo(t *testing.T) {
	for _, tc := range moneyAnswers {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "us-east-1")
			p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1" })
			fault := tc.fault
			fault.Action = "CreateFleet"
			f.fake.AddFault(fault)
			_, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 2, ClientToken: "L2"})
			if err == nil {
				t.Fatal("LaunchFleet succeeded against a failing endpoint")
			}
			if got := Descriptor.IsDeclined(err); got != tc.declined {
				t.Errorf("IsDeclined(%v) = %v, want %v", err, got, tc.declined)
			}
			if len(f.fake.Fleets()) != 0 {
				t.Errorf("a fleet was made")
			}
		})
	}
}

func TestDeleteFleetServerFaultIsNotADefiniteNo(t *testing.T) {
	f := newFixture(t, "us-east-1")
	p := f.provider(t, func(o *Options) { o.LaunchTemplate = "lt-1" })
	fl, err := p.LaunchFleet(context.Background(), domain.FleetSpec{Region: "us-east-1", InstanceTypes: []string{"g6.xlarge"}, TargetCapacity: 1, ClientToken: "L3"})
	if err != nil {
		t.Fatal(err)
	}
	f.fake.AddFault(ec2test.Fault{Action: "DeleteFleets", Status: http.StatusInternalServerError, Code: "InternalFailure", Message: "x"})
	err = p.DeleteFleet(context.Background(), "us-east-1", fl.ID)
	if err == nil || Descriptor.IsDeclined(err) {
		t.Errorf("delete with InternalFailure: %v, declined %v; want an error that is not a definite no", err, Descriptor.IsDeclined(err))
	}
}
