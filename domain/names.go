package domain

import (
	"fmt"
	"strings"
)

// CanonicalGPU returns the catalog's name of a GPU model in any case, whole names only ("a1000" is no A100).
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

// InstanceTypeName returns the catalog's spelling of a typed instance type or
// VM size ("nc4as_t4_v3" → "Standard_NC4as_T4_v3"), refusing one it lacks.
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
