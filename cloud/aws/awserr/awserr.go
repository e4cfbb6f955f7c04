// Package awserr says what an AWS API error means for money: whether a
// purchase or launch that failed with it was certainly not carried out.
// It needs only smithy-go, so the booking service's tests (and anything
// else that must not build the EC2 client) can use it.
package awserr

import (
	"errors"
	"strings"
)

// Declined reports whether err, returned by a call that spends money
// (PurchaseCapacityBlock, CreateFleet, DeleteFleets), is AWS's definite
// "no" rather than a lost answer.
//
// An API error with a code is an answer, unless the code is a server
// fault, after which the purchase may or may not have been made. An HTTP
// 5xx is a "no" only with a code that says the request was not carried
// out (throttled, no capacity): a load balancer or proxy that lost the
// answer says 502 or 504, often with no EC2 error document, which the SDK
// reads as the code "UnknownError". Calling that a refusal would free the
// offering for a second purchase of a block that may have been bought.
func Declined(err error) bool {
	var coded interface{ ErrorCode() string }
	if !errors.As(err, &coded) || coded.ErrorCode() == "" {
		return false
	}
	code := coded.ErrorCode()
	if NotCarriedOut(code) {
		return true
	}
	// A 5xx, or a 408 (the request timed out on its way): the answer of
	// a server, or of a proxy, that does not know what was done.
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && (status.HTTPStatusCode() >= 500 || status.HTTPStatusCode() == 408) {
		return false
	}
	for _, fault := range serverFaults {
		if strings.EqualFold(code, fault) {
			return false
		}
	}
	return true
}

// serverFaults are the codes AWS documents for errors on its side
// ("Server error codes" of the EC2 API reference): the request may have
// been carried out. The spellings other AWS services use for the same
// faults are included: a proxy or an SDK may report them.
var serverFaults = []string{"UnknownError", "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "RequestTimeout",
	"RequestTimeoutException", "InternalServerError", "InternalServiceError", "ServiceUnavailableException"}

// NotCarriedOut reports whether an API error code says the request was
// turned away before it was carried out, even when it comes with a 5xx
// status: throttling, and EC2's Insufficient…Capacity.
func NotCarriedOut(code string) bool {
	switch code {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequestsException":
		return true
	}
	return strings.HasPrefix(code, "Insufficient") && strings.HasSuffix(code, "Capacity")
}
