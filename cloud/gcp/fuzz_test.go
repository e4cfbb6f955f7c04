package gcp

import (
	"strconv"
	"strings"
	"testing"

	billing "google.golang.org/api/cloudbilling/v1"
)

// Whatever a SKU's description says, reading it never panics, and what
// it reads is a family or GPU in gpumarket's form: lower-case words.
func FuzzReadSKU(f *testing.F) {
	for _, d := range []string{"Spot Preemptible A3Plus Instance Ram running in Tokyo", "Nvidia H100 80GB Mega GPU attached to Spot Preemptible VMs running in Tokyo",
		"N1 Predefined Instance Core running in Americas", "Preemptible Nvidia Tesla T4 GPU running in Americas", " running in ", "Nvidia  GPU running in x"} {
		f.Add(d, "Preemptible")
		f.Add(d, "OnDemand")
	}
	f.Fuzz(func(t *testing.T, desc, usage string) {
		k, _, ok := readSKU(&billing.Sku{Description: desc, Category: &billing.Category{ResourceFamily: "Compute", UsageType: usage}})
		if !ok {
			return
		}
		if k.name != strings.ToLower(k.name) || k.spot != (usage == "Preemptible") {
			t.Errorf("%q (%s): read %+v", desc, usage, k)
		}
	})
}

// A machine name as a user types it (--instance-types) is read or refused,
// never a panic; what is read names itself again.
func FuzzParseType(f *testing.F) {
	for _, s := range []string{"a3-highgpu-8g", "n1-standard-8+1xt4", "n1-standard-8+0xt4", "n1+x", "+", "n1-standard-64+8xv100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		base, n, accel, err := ParseType(s)
		if err != nil || n == 0 {
			return
		}
		for _, a := range accelerators {
			if a.name == accel {
				name := base + "+" + strconv.FormatInt(n, 10) + "x" + a.short
				if b2, n2, a2, err := ParseType(name); err != nil || b2 != base || n2 != n || a2 != accel || n < 1 {
					t.Errorf("%q read as %s %d %s, which names itself %q, read back as %s %d %s %v", s, base, n, accel, name, b2, n2, a2, err)
				}
				return
			}
		}
		t.Errorf("%q: accelerator %q not one gpumarket attaches", s, accel)
	})
}
