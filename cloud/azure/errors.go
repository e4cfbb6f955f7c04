package azure

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/gpumarket/gpumarket/domain"
)

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func conflict(err error) bool { return statusOf(err) == http.StatusConflict }

func isNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// declinedError is a definite refusal: it matches domain.ErrDeclined, so the ledger records "failed".
type declinedError struct{ err error }

func (e declinedError) Error() string   { return e.err.Error() }
func (e declinedError) Unwrap() []error { return []error{e.err, domain.ErrDeclined} }

// refuse makes a declinedError for a request refused before any call that spends.
func refuse(format string, args ...any) error {
	return declinedError{fmt.Errorf(format, args...)}
}

// settle classifies an ARM error: a definite "no" is a 4xx but 408 and 429, or
// an operation ended Failed or Canceled. Anything else is unknown and looked up.
func settle(err error) error {
	s := statusOf(err)
	if err == nil || s == 0 {
		return err
	}
	if s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500 {
		return err
	}
	return declinedError{err}
}

// shortError tells an ARM error in one line ("404 ResourceNotFound: …") where
// azcore's spans a dozen; the error stays behind Unwrap.
type shortError struct{ err error }

func (e shortError) Error() string { return armCause(e.err) }
func (e shortError) Unwrap() error { return e.err }

func short(err error) error {
	if err == nil {
		return nil
	}
	return shortError{err}
}

// armCause is an ARM error's status, code and message, or another error's first line.
func armCause(err error) string {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return firstLine(err).Error()
	}
	s := strconv.Itoa(re.StatusCode)
	if re.ErrorCode != "" {
		s += " " + re.ErrorCode
	}
	if re.RawResponse != nil {
		if body, perr := runtime.Payload(re.RawResponse); perr == nil {
			var doc struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(body, &doc) == nil && doc.Error.Message != "" {
				s += ": " + firstLine(errors.New(doc.Error.Message)).Error()
			}
		}
	}
	return s
}
