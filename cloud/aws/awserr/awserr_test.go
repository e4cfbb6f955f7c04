package awserr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// apiErr builds the error chain the SDK returns for an EC2 error answer:
// an operation error around a response error (with the HTTP status) around
// the API error (with the code).
func apiErr(status int, code string) error {
	return &smithy.OperationError{ServiceID: "EC2", OperationName: "PurchaseCapacityBlock", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      &smithy.GenericAPIError{Code: code, Message: "m"},
	}}
}

func TestDeclinedServerFaultsAreNeverANo(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   bool
	}{
		// EC2's server error codes: the purchase may have been made.
		{500, "InternalError", false},
		{400, "InternalError", false},
		{500, "InternalFailure", false},
		{400, "InternalFailure", false},
		{503, "ServiceUnavailable", false},
		{400, "ServiceUnavailable", false},
		{503, "Unavailable", false},
		{400, "RequestTimeout", false},
		{408, "RequestTimeoutException", false},
		{502, "UnknownError", false},
		{200, "UnknownError", false},
		{504, "", false},
		// Any other code with a 5xx: a server fault too.
		{500, "SomethingNew", false},
		// Throttling and no capacity: turned away before anything was done.
		{503, "RequestLimitExceeded", true},
		{400, "Throttling", true},
		{429, "TooManyRequestsException", true},
		{500, "InsufficientInstanceCapacity", true},
		{400, "InsufficientCapacity", true},
		{400, "InsufficientReservedInstanceCapacity", true},
		// A client error is an answer.
		{400, "InvalidParameterValue", true},
		{403, "UnauthorizedOperation", true},
	} {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.code), func(t *testing.T) {
			err := fmt.Errorf("aws: purchase: %w", apiErr(tc.status, tc.code))
			if got := Declined(err); got != tc.want {
				t.Errorf("Declined = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeclinedWithoutAnAnswer(t *testing.T) {
	for name, err := range map[string]error{
		"nil":                nil,
		"plain":              errors.New("connection reset by peer"),
		"deadline":           fmt.Errorf("call: %w", context.DeadlineExceeded),
		"deserialization":    &smithy.DeserializationError{Err: errors.New("unexpected EOF")},
		"canceled operation": &smithy.CanceledError{Err: context.Canceled},
	} {
		if Declined(err) {
			t.Errorf("%s: Declined = true for an error that carries no answer", name)
		}
	}
}
