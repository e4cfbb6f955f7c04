package domain

import (
	"fmt"
	"strings"
)

// CanonicalGPU returns the catalog's name of a GPU model typed in any case
// ("h100" → "H100"). It matches whole names only: "a1000" is no A100 and
// "L40" no L4. Every place a person types a GPU model reads it here.
func CanonicalGPU(s string) (string, bool) {
	s = strings.TrimSpace(s)
	for _, m := range GPUModels {
		if strings.EqualFold(s, m) {
			return m, true
		}
	}
	return "", false
}

// InstanceTypeForm says what InstanceTypeName accepts, for messages.
const InstanceTypeForm = "a GPU instance type or VM size of the catalog, in any case, such as p5.48xlarge, g5.xlarge, " +
	"a3-highgpu-8g or Standard_ND96isr_H100_v5 (the Standard_ prefix may be left out)"

// azurePrefix starts every Azure VM size; people often leave it out.
const azurePrefix = "Standard_"

// InstanceTypeName reads an instance type or VM size as a person types
// it and returns the catalog's spelling, the one the clouds answer with
// and every view shows: "G5.XLARGE" → "g5.xlarge", "nc4as_t4_v3" →
// "Standard_NC4as_T4_v3". A type the catalog does not have is refused,
// naming the accepted form.
func InstanceTypeName(s string) (string, error) {
	t := strings.TrimSpace(s)
	if e, ok := LookupGPU(t); ok && t != "" {
		return e.InstanceType, nil
	}
	if e, ok := LookupGPU(azurePrefix + t); ok && t != "" {
		return e.InstanceType, nil
	}
	return "", fmt.Errorf("%q is not a GPU instance type gpumarket knows; want %s", s, InstanceTypeForm)
}
