package domain

import (
	"fmt"
	"sort"
	"strings"
)

// CatalogEntry is one instance type or VM size of the embedded GPU catalog.
type CatalogEntry struct {
	Cloud        Cloud
	InstanceType string
	GPU          GPUSpec
	VCPUs        int
	MemoryGiB    float64 // host memory
}

// catalog is the ground truth for GPU specs, which the clouds' APIs get wrong in places.
var catalog = func() map[string]CatalogEntry {
	m := map[string]CatalogEntry{}
	add := func(c Cloud, model string, mem float64, rows ...any) {
		for i := 0; i+3 < len(rows); i += 4 {
			n, gpuMem := toF(rows[i+1]), mem
			if n < 1 {
				gpuMem = mem * n
			}
			e := CatalogEntry{Cloud: c, InstanceType: rows[i].(string),
				GPU:   GPUSpec{Model: model, Count: n, MemoryGiB: gpuMem},
				VCPUs: rows[i+2].(int), MemoryGiB: toF(rows[i+3])}
			m[strings.ToLower(e.InstanceType)] = e
		}
	}
	add(CloudAWS, "H200", 141, "p5e.48xlarge", 8, 192, 2048, "p5en.48xlarge", 8, 192, 2048)
	add(CloudAWS, "H100", 80, "p5.48xlarge", 8, 192, 2048, "p5.4xlarge", 1, 16, 256)
	add(CloudAWS, "A100", 40, "p4d.24xlarge", 8, 96, 1152)
	add(CloudAWS, "A100", 80, "p4de.24xlarge", 8, 96, 1152)
	add(CloudAWS, "L40S", 48,
		"g6e.xlarge", 1, 4, 32, "g6e.2xlarge", 1, 8, 64, "g6e.4xlarge", 1, 16, 128, "g6e.8xlarge", 1, 32, 256,
		"g6e.16xlarge", 1, 64, 512, "g6e.12xlarge", 4, 48, 384, "g6e.24xlarge", 4, 96, 768, "g6e.48xlarge", 8, 192, 1536)
	add(CloudAWS, "L4", 24,
		"g6.xlarge", 1, 4, 16, "g6.2xlarge", 1, 8, 32, "g6.4xlarge", 1, 16, 64, "g6.8xlarge", 1, 32, 128,
		"g6.16xlarge", 1, 64, 256, "g6.12xlarge", 4, 48, 192, "g6.24xlarge", 4, 96, 384, "g6.48xlarge", 8, 192, 768,
		"gr6.4xlarge", 1, 16, 128, "gr6.8xlarge", 1, 32, 256)
	add(CloudAWS, "A10G", 24,
		"g5.xlarge", 1, 4, 16, "g5.2xlarge", 1, 8, 32, "g5.4xlarge", 1, 16, 64, "g5.8xlarge", 1, 32, 128,
		"g5.16xlarge", 1, 64, 256, "g5.12xlarge", 4, 48, 192, "g5.24xlarge", 4, 96, 384, "g5.48xlarge", 8, 192, 768)
	add(CloudAWS, "T4", 16,
		"g4dn.xlarge", 1, 4, 16, "g4dn.2xlarge", 1, 8, 32, "g4dn.4xlarge", 1, 16, 64, "g4dn.8xlarge", 1, 32, 128,
		"g4dn.16xlarge", 1, 64, 256, "g4dn.12xlarge", 4, 48, 192, "g4dn.metal", 8, 96, 384)
	add(CloudAWS, "V100", 16, "p3.2xlarge", 1, 8, 61, "p3.8xlarge", 4, 32, 244, "p3.16xlarge", 8, 64, 488)
	add(CloudAWS, "V100", 32, "p3dn.24xlarge", 8, 96, 768)
	add(CloudAzure, "H200", 141, "Standard_ND96isr_H200_v5", 8, 96, 1850)
	add(CloudAzure, "H100", 80, "Standard_ND96isr_H100_v5", 8, 96, 1900)
	add(CloudAzure, "H100", 94, "Standard_NC40ads_H100_v5", 1, 40, 320, "Standard_NC80adis_H100_v5", 2, 80, 640)
	add(CloudAzure, "A100", 80,
		"Standard_NC24ads_A100_v4", 1, 24, 220, "Standard_NC48ads_A100_v4", 2, 48, 440, "Standard_NC96ads_A100_v4", 4, 96, 880,
		"Standard_ND96amsr_A100_v4", 8, 96, 1900)
	add(CloudAzure, "A100", 40, "Standard_ND96asr_v4", 8, 96, 900)
	add(CloudAzure, "A10", 24,
		"Standard_NV6ads_A10_v5", 1.0/6, 6, 55, "Standard_NV12ads_A10_v5", 1.0/3, 12, 110, "Standard_NV18ads_A10_v5", 0.5, 18, 220,
		"Standard_NV36ads_A10_v5", 1, 36, 440, "Standard_NV36adms_A10_v5", 1, 36, 880, "Standard_NV72ads_A10_v5", 2, 72, 880)
	add(CloudAzure, "T4", 16,
		"Standard_NC4as_T4_v3", 1, 4, 28, "Standard_NC8as_T4_v3", 1, 8, 56, "Standard_NC16as_T4_v3", 1, 16, 110,
		"Standard_NC64as_T4_v3", 4, 64, 440)
	add(CloudAzure, "V100", 16, "Standard_NC6s_v3", 1, 6, 112, "Standard_NC12s_v3", 2, 12, 224, "Standard_NC24s_v3", 4, 24, 448)
	add(CloudAzure, "V100", 32, "Standard_ND40rs_v2", 8, 40, 672)
	// Google Cloud: memory in GiB as machineTypes reports memoryMb / 1024.
	add(CloudGCP, "H200", 141, "a3-ultragpu-8g", 8, 224, 2952)
	add(CloudGCP, "H100", 80, "a3-highgpu-1g", 1, 26, 234, "a3-highgpu-2g", 2, 52, 468, "a3-highgpu-4g", 4, 104, 936,
		"a3-highgpu-8g", 8, 208, 1872, "a3-megagpu-8g", 8, 208, 1872)
	add(CloudGCP, "A100", 40, "a2-highgpu-1g", 1, 12, 85, "a2-highgpu-2g", 2, 24, 170, "a2-highgpu-4g", 4, 48, 340,
		"a2-highgpu-8g", 8, 96, 680, "a2-megagpu-16g", 16, 96, 1360)
	add(CloudGCP, "A100", 80, "a2-ultragpu-1g", 1, 12, 170, "a2-ultragpu-2g", 2, 24, 340, "a2-ultragpu-4g", 4, 48, 680,
		"a2-ultragpu-8g", 8, 96, 1360)
	add(CloudGCP, "L4", 24, "g2-standard-4", 1, 4, 16, "g2-standard-8", 1, 8, 32, "g2-standard-12", 1, 12, 48,
		"g2-standard-16", 1, 16, 64, "g2-standard-24", 2, 24, 96, "g2-standard-32", 1, 32, 128, "g2-standard-48", 4, 48, 192,
		"g2-standard-96", 8, 96, 384)
	// N1 machines with attached cards: "machine+NxGPU" (gcp.ParseType).
	add(CloudGCP, "T4", 16, "n1-standard-4+1xt4", 1, 4, 15, "n1-standard-8+1xt4", 1, 8, 30, "n1-standard-16+2xt4", 2, 16, 60,
		"n1-standard-32+4xt4", 4, 32, 120)
	add(CloudGCP, "V100", 16, "n1-standard-8+1xv100", 1, 8, 30, "n1-standard-16+2xv100", 2, 16, 60,
		"n1-standard-32+4xv100", 4, 32, 120, "n1-standard-64+8xv100", 8, 64, 240)
	return m
}()

func toF(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	panic("catalog: bad number")
}

// LookupGPU returns the catalog's entry for an instance type or VM size, in any case.
func LookupGPU(instanceType string) (CatalogEntry, bool) {
	e, ok := catalog[strings.ToLower(instanceType)]
	return e, ok
}

// CatalogEntries returns every entry of a cloud, sorted by instance type.
func CatalogEntries(c Cloud) []CatalogEntry {
	var out []CatalogEntry
	for _, e := range catalog {
		if e.Cloud == c {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceType < out[j].InstanceType })
	return out
}

// GPUModels lists the canonical GPU model names, newest first.
var GPUModels = []string{"H200", "H100", "A100", "L40S", "L4", "A10G", "A10", "T4", "V100"}

// NormalizeGPUModel maps a cloud's GPU name ("NVIDIA H100 80GB HBM3", "Tesla T4") to GPUModels.
func NormalizeGPUModel(name string) (string, bool) {
	u := strings.ToUpper(name)
	// Longest names first so "A10G" is not read as "A10", "L40S" not "L4".
	for _, m := range []string{"H200", "H100", "A100", "L40S", "A10G", "V100", "L4", "A10", "T4"} {
		if strings.Contains(u, m) {
			return m, true
		}
	}
	return "", false
}

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
