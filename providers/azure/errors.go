package azure

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/gpumarket/gpumarket/providers"
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
// reads as its cause and matches providers.ErrDeclined, so the ledger
// records "failed" instead of reconciling.
type declinedError struct{ err error }

func (e declinedError) Error() string   { return e.err.Error() }
func (e declinedError) Unwrap() []error { return []error{e.err, providers.ErrDeclined} }

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
