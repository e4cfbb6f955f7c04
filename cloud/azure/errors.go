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

// declinedError is a definitive refusal: the action was not done. It
// reads as its cause and matches domain.ErrDeclined, so the ledger
// records "failed" instead of reconciling.
type declinedError struct{ err error }

func (e declinedError) Error() string   { return e.err.Error() }
func (e declinedError) Unwrap() []error { return []error{e.err, domain.ErrDeclined} }

// refuse makes a declinedError for a request refused before any call that
// spends: nothing was made.
func refuse(format string, args ...any) error {
	return declinedError{fmt.Errorf(format, args...)}
}

// settle classifies an ARM call's error for the ledger. Only an answer
// that says the request was refused is a definite "no": a 4xx other than
// 408 (the server gave up waiting; the work may be under way) and 429
// (throttled before or after the work), or a long-running operation that
// ended Failed or Canceled. A 5xx, a timeout or a lost connection leaves
// the outcome unknown, and the ledger looks it up instead of buying again.
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

// shortError tells an ARM call's error in one line ("404
// ResourceNotFound: The Resource … was not found."), for a message or a
// usage note: azcore's own text spans a dozen lines (the URL, a rule, the
// whole body). The error it shortens stays behind Unwrap.
type shortError struct{ err error }

func (e shortError) Error() string { return armCause(e.err) }
func (e shortError) Unwrap() error { return e.err }

// short wraps err as a shortError (nil stays nil).
func short(err error) error {
	if err == nil {
		return nil
	}
	return shortError{err}
}

// armCause is the status, code and message of an ARM error answer
// ({"error": {"code", "message"}}), or the first line of another error.
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
