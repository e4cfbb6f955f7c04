package domain

import (
	"math"
	"testing"
)

// TestPartialGPUMemoryIsItsShare: Azure's fractional A10 sizes have a
// share of one A10 and that share of its memory (Azure's NVadsA10 v5
// table: 1/6 GPU with 4 GiB, 1/3 with 8, 1/2 with 12); a row saying 0.1667
// GPUs with 24 GiB promised six times the memory the VM has. Whole GPUs
// keep the memory of one GPU.
func TestPartialGPUMemoryIsItsShare(t *testing.T) {
	for size, want := range map[string]GPUSpec{
		"Standard_NV6ads_A10_v5":  {Model: "A10", Count: 1.0 / 6, MemoryGiB: 4},
		"Standard_NV12ads_A10_v5": {Model: "A10", Count: 1.0 / 3, MemoryGiB: 8},
		"Standard_NV18ads_A10_v5": {Model: "A10", Count: 0.5, MemoryGiB: 12},
		"Standard_NV36ads_A10_v5": {Model: "A10", Count: 1, MemoryGiB: 24},
		"Standard_NV72ads_A10_v5": {Model: "A10", Count: 2, MemoryGiB: 24},
		"p5.48xlarge":             {Model: "H100", Count: 8, MemoryGiB: 80},
	} {
		e, ok := LookupGPU(size)
		if !ok {
			t.Fatalf("%s is not in the catalog", size)
		}
		g := e.GPU
		if g.Model != want.Model || math.Abs(g.Count-want.Count) > 1e-9 || math.Abs(g.MemoryGiB-want.MemoryGiB) > 1e-9 {
			t.Errorf("%s = %+v, want %+v", size, g, want)
		}
	}
}
