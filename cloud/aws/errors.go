package aws

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"

	"github.com/gpumarket/gpumarket/domain"
)

// apiCode returns the AWS error code of err ("RequestLimitExceeded",
// "DryRunOperation"), or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// countRefused reports whether AWS refused a block search for its
// instance count (InvalidParameterValue naming InstanceCount), which is
// not the type being unsold and must be said, not skipped.
func countRefused(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidParameterValue" && strings.Contains(ae.ErrorMessage(), "InstanceCount")
}

// credentialCodes are the answers AWS gives to missing, wrong or expired
// keys.
var credentialCodes = map[string]bool{
	"AuthFailure": true, "ExpiredToken": true, "ExpiredTokenException": true, "RequestExpired": true,
	"InvalidClientTokenId": true, "UnrecognizedClientException": true, "SignatureDoesNotMatch": true,
	"InvalidAccessKeyId": true,
}

// explain turns the SDK's credential failures into one clear error that
// wraps ErrNoCredentials; other errors pass through.
func explain(err error) error {
	if err == nil {
		return nil
	}
	var missing config.SharedConfigProfileNotExistError
	switch {
	case errors.As(err, &missing):
		return fmt.Errorf("%w: profile %q is not in the shared config; %s", ErrNoCredentials, missing.Profile, credentialHint)
	case strings.Contains(err.Error(), "failed to retrieve credentials"), strings.Contains(err.Error(), "failed to refresh cached credentials"):
		return fmt.Errorf("%w: %s (%v)", ErrNoCredentials, credentialHint, shortCause(err))
	case credentialCodes[apiCode(err)]:
		return fmt.Errorf("%w: AWS refused the credentials (%s): they may have expired; %s", ErrNoCredentials, apiCode(err), credentialHint)
	}
	return err
}

// shortCause keeps the innermost message of the SDK's long error chains.
func shortCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ErrInvalidSpec is matched (errors.Is) by the errors of a request refused
// before any call to AWS: a fleet without a launch template, an offering id
// that is not "cb-…". Such a request certainly bought nothing, so these
// errors match domain.ErrDeclined too and the ledger marks them failed.
var ErrInvalidSpec = errors.New("aws: invalid request")

type specError struct{ msg string }

func (e specError) Error() string { return e.msg }
func (e specError) Is(target error) bool {
	return target == ErrInvalidSpec || target == domain.ErrDeclined
}

func specErrorf(format string, a ...any) error { return specError{fmt.Sprintf(format, a...)} }

// limitError is a request refused before any call because a count is
// beyond what the AWS API takes (CreateFleet's TotalTargetCapacity is an
// int32, and EC2 Fleet's quota is 10,000 per fleet; a capacity block holds
// 64 instances): the user's input was wrong, so it matches
// domain.ErrInvalidQuery as well as ErrInvalidSpec and ErrDeclined.
type limitError struct{ msg string }

func (e limitError) Error() string { return e.msg }
func (e limitError) Is(target error) bool {
	return target == ErrInvalidSpec || target == domain.ErrDeclined || target == domain.ErrInvalidQuery
}

func limitErrorf(format string, a ...any) error { return limitError{fmt.Sprintf(format, a...)} }
