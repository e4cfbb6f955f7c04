package domain

import (
	"strings"
	"testing"
)

func TestCanonicalGPU(t *testing.T) {
	for in, want := range map[string]string{"h100": "H100", " A100 ": "A100", "l40s": "L40S", "L4": "L4", "a10g": "A10G"} {
		if got, ok := CanonicalGPU(in); !ok || got != want {
			t.Errorf("CanonicalGPU(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	// Whole names only: a typo is no model, a longer name no shorter one.
	for _, in := range []string{"a1000", "L40", "H10", "NVIDIA H100", "h100,h200", ""} {
		if got, ok := CanonicalGPU(in); ok {
			t.Errorf("CanonicalGPU(%q) = %q; want it refused", in, got)
		}
	}
}

func TestInstanceTypeName(t *testing.T) {
	for in, want := range map[string]string{
		"G5.XLARGE": "g5.xlarge", "p5.48xlarge": "p5.48xlarge", " P4D.24XLARGE ": "p4d.24xlarge",
		"NC4as_T4_v3": "Standard_NC4as_T4_v3", "Standard_NC4as_T4_v3": "Standard_NC4as_T4_v3",
		"standard_nc4as_t4_v3": "Standard_NC4as_T4_v3", "nd96isr_h100_v5": "Standard_ND96isr_H100_v5",
		"A3-HIGHGPU-8G": "a3-highgpu-8g",
	} {
		if got, err := InstanceTypeName(in); err != nil || got != want {
			t.Errorf("InstanceTypeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "g5", "g5.xlargee", "Standard_", "p5.48xlarge,g5.xlarge", "m5.large", "Standard_Standard_NC4as_T4_v3"} {
		if got, err := InstanceTypeName(in); err == nil || !strings.Contains(err.Error(), "Standard_ prefix may be left out") {
			t.Errorf("InstanceTypeName(%q) = %q, %v; want a refusal naming the accepted form", in, got, err)
		}
	}
}

// Whatever is typed, a name read is the catalog's own (read again, it is
// itself) and a GPU model read is a whole catalog model.
func FuzzInstanceTypeName(f *testing.F) {
	for _, s := range []string{"G5.XLARGE", "NC4as_T4_v3", "standard_nd96isr_h100_v5", "a1000", "", "Standard_", "p5.48xlarge\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, err := InstanceTypeName(s); err == nil {
			e, ok := LookupGPU(got)
			if !ok || e.InstanceType != got {
				t.Fatalf("InstanceTypeName(%q) = %q, not a catalog spelling", s, got)
			}
			if again, err := InstanceTypeName(got); err != nil || again != got {
				t.Fatalf("InstanceTypeName(%q) = %q, %v; want itself", got, again, err)
			}
			if !strings.EqualFold(strings.TrimSpace(s), got) && !strings.EqualFold(azurePrefix+strings.TrimSpace(s), got) {
				t.Fatalf("InstanceTypeName(%q) = %q: not the same name", s, got)
			}
		}
		if m, ok := CanonicalGPU(s); ok && !strings.EqualFold(strings.TrimSpace(s), m) {
			t.Fatalf("CanonicalGPU(%q) = %q: not the whole name", s, m)
		}
	})
}
