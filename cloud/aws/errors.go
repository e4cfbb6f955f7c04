package aws

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"

	"github.com/gpumarket/gpumarket/domain"
)

// apiCode returns err's AWS error code ("DryRunOperation"), or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// countRefused reports a block search refused for its InstanceCount: said, not skipped as unsold.
func countRefused(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidParameterValue" && strings.Contains(ae.ErrorMessage(), "InstanceCount")
}

var credentialCodes = map[string]bool{
	"AuthFailure": true, "ExpiredToken": true, "ExpiredTokenException": true, "RequestExpired": true,
	"InvalidClientTokenId": true, "UnrecognizedClientException": true, "SignatureDoesNotMatch": true,
	"InvalidAccessKeyId": true,
}

// explain turns credential failures into one error wrapping ErrNoCredentials.
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

// ErrInvalidSpec matches a request refused before any call to AWS; it certainly
// bought nothing, so it matches domain.ErrDeclined too.
var ErrInvalidSpec = errors.New("aws: invalid request")

type specError struct{ msg string }

func (e specError) Error() string { return e.msg }
func (e specError) Is(target error) bool {
	return target == ErrInvalidSpec || target == domain.ErrDeclined
}

func specErrorf(format string, a ...any) error { return specError{fmt.Sprintf(format, a...)} }

// limitError is a count beyond what the API takes: the user's input, so it also
// matches domain.ErrInvalidQuery.
type limitError struct{ msg string }

func (e limitError) Error() string { return e.msg }
func (e limitError) Is(target error) bool {
	return target == ErrInvalidSpec || target == domain.ErrDeclined || target == domain.ErrInvalidQuery
}

func limitErrorf(format string, a ...any) error { return limitError{fmt.Sprintf(format, a...)} }
