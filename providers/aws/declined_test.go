package aws

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpumarket/gpumarket/providers"
)

func TestRefusalsBeforeAnyCallAreDeclined(t *testing.T) {
	// The ledger records a declined action "failed" (nothing was bought)
	// and any other error "unknown" (reconciled, never retried).
	if !errors.Is(specErrorf("no launch template"), providers.ErrDeclined) {
		t.Error("an invalid spec is not declined")
	}
	if !errors.Is(fmt.Errorf("%w: expired", ErrNoCredentials), providers.ErrDeclined) {
		t.Error("a credential refusal is not declined")
	}
	if errors.Is(errors.New("connection reset"), ErrNoCredentials) {
		t.Error("a plain error matched ErrNoCredentials")
	}
}
