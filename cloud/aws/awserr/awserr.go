// Package awserr says whether a failed paid AWS call was certainly not carried
// out. It needs only smithy-go, so tests need not build the EC2 client.
package awserr

import (
	"errors"
	"strings"
)

// Declined reports whether err, from a call that spends money, is AWS's definite
// "no" rather than a lost answer. A 5xx is one only with a code saying so: a
// proxy that lost the answer says 502/504 ("UnknownError"), and calling that a
// refusal could buy a block twice.
func Declined(err error) bool {
	var coded interface{ ErrorCode() string }
	if !errors.As(err, &coded) || coded.ErrorCode() == "" {
		return false
	}
	code := coded.ErrorCode()
	if NotCarriedOut(code) {
		return true
	}
	// A 5xx or 408: a server or proxy that does not know what was done.
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

// serverFaults are the codes of errors on AWS's side ("Server error codes", EC2
// API reference), in every service's spelling: the request may have been carried out.
var serverFaults = []string{"UnknownError", "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "RequestTimeout",
	"RequestTimeoutException", "InternalServerError", "InternalServiceError", "ServiceUnavailableException"}

// NotCarriedOut reports whether a code says the request was turned away even
// with a 5xx: throttling, Insufficient…Capacity.
func NotCarriedOut(code string) bool {
	switch code {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequestsException":
		return true
	}
	return strings.HasPrefix(code, "Insufficient") && strings.HasSuffix(code, "Capacity")
}
