package gcptest

import (
	billing "google.golang.org/api/cloudbilling/v1"
	"google.golang.org/api/compute/v1"
)

// Zone is what one zone sells: machine types, accelerator types, and the
// VMs of each type Spot and calendar mode can deliver.
type Zone struct {
	Name         string
	MachineTypes []string
	Accelerators []string
	// SpotCapacity caps the Spot VMs of a type in the zone (default 16).
	SpotCapacity map[string]int
	// CalendarCapacity is the VMs of a type calendar mode can deliver in
	// any window (default 0: none).
	CalendarCapacity map[string]int
}

// machineTypes are Compute Engine's figures for the types the fake sells:
// guestCpus, memoryMb and the bundled accelerators.
var machineTypes = map[string]*compute.MachineType{
	"a3-highgpu-8g":  mt("a3-highgpu-8g", 208, 1916928, "nvidia-h100-80gb", 8),
	"a3-megagpu-8g":  mt("a3-megagpu-8g", 208, 1916928, "nvidia-h100-mega-80gb", 8),
	"a2-highgpu-1g":  mt("a2-highgpu-1g", 12, 87040, "nvidia-tesla-a100", 1),
	"a2-highgpu-8g":  mt("a2-highgpu-8g", 96, 696320, "nvidia-tesla-a100", 8),
	"g2-standard-4":  mt("g2-standard-4", 4, 16384, "nvidia-l4", 1),
	"g2-standard-8":  mt("g2-standard-8", 8, 32768, "nvidia-l4", 1),
	"n1-standard-4":  mt("n1-standard-4", 4, 15360, "", 0),
	"n1-standard-8":  mt("n1-standard-8", 8, 30720, "", 0),
	"n2-standard-8":  mt("n2-standard-8", 8, 32768, "", 0),
	"e2-standard-4":  mt("e2-standard-4", 4, 16384, "", 0),
	"a2-ultragpu-8g": mt("a2-ultragpu-8g", 96, 1392640, "nvidia-a100-80gb", 8),
}

func mt(name string, cpus, memMB int64, accel string, n int64) *compute.MachineType {
	m := &compute.MachineType{Kind: "compute#machineType", Name: name, GuestCpus: cpus, MemoryMb: memMB, Description: name}
	if n > 0 {
		m.Accelerators = []*compute.MachineTypeAccelerators{{GuestAcceleratorType: accel, GuestAcceleratorCount: n}}
	}
	return m
}

// DefaultZones are the fake's zones: Iowa with every family, Tokyo with
// A3 Mega and A2 (whose SKUs say "Tokyo" and "Japan").
func DefaultZones() []Zone {
	return []Zone{
		{Name: "us-central1-a", MachineTypes: []string{"a3-highgpu-8g", "a2-highgpu-1g", "a2-highgpu-8g", "g2-standard-4", "g2-standard-8", "n1-standard-8", "n2-standard-8", "e2-standard-4"},
			Accelerators:     []string{"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-h100-80gb", "nvidia-tesla-a100", "nvidia-l4"},
			CalendarCapacity: map[string]int{"a3-highgpu-8g": 4}},
		{Name: "us-central1-b", MachineTypes: []string{"a2-highgpu-1g", "g2-standard-4", "n1-standard-4"},
			Accelerators: []string{"nvidia-tesla-t4"}},
		{Name: "us-central1-c", MachineTypes: []string{"a3-highgpu-8g", "g2-standard-8", "n1-standard-4"},
			Accelerators: []string{"nvidia-tesla-t4"}, CalendarCapacity: map[string]int{"a3-highgpu-8g": 2}},
		{Name: "asia-northeast1-a", MachineTypes: []string{"a3-megagpu-8g", "a2-highgpu-1g", "n1-standard-8"},
			Accelerators: []string{"nvidia-h100-mega-80gb", "nvidia-tesla-a100"}, CalendarCapacity: map[string]int{"a3-megagpu-8g": 2}},
		{Name: "asia-northeast1-b", MachineTypes: []string{"a3-megagpu-8g"}, Accelerators: []string{"nvidia-h100-mega-80gb"}},
	}
}

var (
	americas = []string{"us-central1", "us-east1", "us-east4", "us-west1"}
	tokyo    = []string{"asia-northeast1"}
	japan    = []string{"asia-northeast1", "asia-northeast2"}
)

// DefaultSKUs are Compute Engine SKUs in the Billing Catalog's forms,
// with the variety real descriptions have: place names of a region
// ("Tokyo") or of several ("Japan", "Americas"), Spot and legacy
// Preemptible forms, and SKUs a reader must leave out (commitments, sole
// tenancy, workstation GPUs).
func DefaultSKUs() []*billing.Sku {
	type row struct {
		desc, group, usage string
		regions            []string
		unit               string
		usd                float64
	}
	rows := []row{
		{"A3 Instance Core running in Americas", "CPU", "OnDemand", americas, "h", 0.02291161},
		{"A3 Instance Ram running in Americas", "RAM", "OnDemand", americas, "GiBy.h", 0.00307045},
		{"Nvidia H100 80GB GPU running in Americas", "GPU", "OnDemand", americas, "h", 10.18},
		{"Spot Preemptible A3 Instance Core running in Americas", "CPU", "Preemptible", americas, "h", 0.0075},
		{"Spot Preemptible A3 Instance Ram running in Americas", "RAM", "Preemptible", americas, "GiBy.h", 0.001},
		{"Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", americas, "h", 2.6},
		{"A3Plus Instance Core running in Tokyo", "CPU", "OnDemand", tokyo, "h", 0.0294},
		{"A3Plus Instance Ram running in Tokyo", "RAM", "OnDemand", tokyo, "GiBy.h", 0.0039},
		{"Nvidia H100 80GB Mega GPU running in Tokyo", "GPU", "OnDemand", tokyo, "h", 13.1},
		{"Spot Preemptible A3Plus Instance Core running in Tokyo", "CPU", "Preemptible", tokyo, "h", 0.0098},
		{"Spot Preemptible A3Plus Instance Ram running in Tokyo", "RAM", "Preemptible", tokyo, "GiBy.h", 0.0013},
		{"Nvidia H100 80GB Mega GPU attached to Spot Preemptible VMs running in Tokyo", "GPU", "Preemptible", tokyo, "h", 3.9},
		{"A2 Instance Core running in Americas", "CPU", "OnDemand", americas, "h", 0.031611},
		{"A2 Instance Ram running in Americas", "RAM", "OnDemand", americas, "GiBy.h", 0.004237},
		{"Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", americas, "h", 2.933908},
		{"Spot Preemptible A2 Instance Core running in Americas", "CPU", "Preemptible", americas, "h", 0.00952},
		{"Spot Preemptible A2 Instance Ram running in Americas", "RAM", "Preemptible", americas, "GiBy.h", 0.00128},
		{"Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", americas, "h", 1.1},
		{"A2 Instance Core running in Japan", "CPU", "OnDemand", japan, "h", 0.0406},
		{"A2 Instance Ram running in Japan", "RAM", "OnDemand", japan, "GiBy.h", 0.00545},
		{"Nvidia Tesla A100 GPU running in Japan", "GPU", "OnDemand", japan, "h", 3.77},
		{"Spot Preemptible A2 Instance Core running in Japan", "CPU", "Preemptible", japan, "h", 0.0122},
		{"Spot Preemptible A2 Instance Ram running in Japan", "RAM", "Preemptible", japan, "GiBy.h", 0.00164},
		{"Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Japan", "GPU", "Preemptible", japan, "h", 1.41},
		{"G2 Instance Core running in Americas", "CPU", "OnDemand", americas, "h", 0.024988},
		{"G2 Instance Ram running in Americas", "RAM", "OnDemand", americas, "GiBy.h", 0.002927},
		{"Nvidia L4 GPU running in Americas", "GPU", "OnDemand", americas, "h", 0.56},
		{"Spot Preemptible G2 Instance Core running in Americas", "CPU", "Preemptible", americas, "h", 0.0099},
		{"Spot Preemptible G2 Instance Ram running in Americas", "RAM", "Preemptible", americas, "GiBy.h", 0.00116},
		{"Nvidia L4 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", americas, "h", 0.2},
		{"N1 Predefined Instance Core running in Americas", "N1Standard", "OnDemand", americas, "h", 0.031611},
		{"N1 Predefined Instance Ram running in Americas", "N1Standard", "OnDemand", americas, "GiBy.h", 0.004237},
		{"Spot Preemptible N1 Predefined Instance Core running in Americas", "N1Standard", "Preemptible", americas, "h", 0.00698},
		{"Spot Preemptible N1 Predefined Instance Ram running in Americas", "N1Standard", "Preemptible", americas, "GiBy.h", 0.000936},
		{"Nvidia Tesla T4 GPU running in Americas", "GPU", "OnDemand", americas, "h", 0.35},
		{"Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", americas, "h", 0.14},
		{"Preemptible Nvidia Tesla T4 GPU running in Americas", "GPU", "Preemptible", americas, "h", 0.11},
		{"Nvidia Tesla V100 GPU running in Americas", "GPU", "OnDemand", americas, "h", 2.48},
		{"Nvidia Tesla V100 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", americas, "h", 0.99},
		// What a reader must leave out.
		{"Commitment v1: A2 Cpu in Americas for 1 Year", "CPU", "Commit1Yr", americas, "h", 0.0199},
		{"A2 Sole Tenancy Instance Core running in Americas", "CPU", "OnDemand", americas, "h", 0.0348},
		{"Nvidia Tesla T4 Virtual Workstation GPU running in Americas", "GPU", "OnDemand", americas, "h", 0.55},
		{"N1 Predefined Instance Core running in EMEA", "N1Standard", "OnDemand", []string{"europe-west1"}, "h", 0.0348},
	}
	out := make([]*billing.Sku, len(rows))
	for i, r := range rows {
		units := int64(r.usd)
		nanos := int64((r.usd-float64(units))*1e9 + 0.5)
		id := skuID(i)
		out[i] = &billing.Sku{
			Name: "services/6F81-5844-456A/skus/" + id, SkuId: id, Description: r.desc,
			Category:       &billing.Category{ServiceDisplayName: "Compute Engine", ResourceFamily: "Compute", ResourceGroup: r.group, UsageType: r.usage},
			ServiceRegions: r.regions, ServiceProviderName: "Google",
			PricingInfo: []*billing.PricingInfo{{
				EffectiveTime: "2025-06-01T00:00:00Z", CurrencyConversionRate: 1,
				PricingExpression: &billing.PricingExpression{UsageUnit: r.unit, UsageUnitDescription: r.unit, BaseUnit: "s", DisplayQuantity: 1,
					TieredRates: []*billing.TierRate{{StartUsageAmount: 0, UnitPrice: &billing.Money{CurrencyCode: "USD", Units: units, Nanos: nanos}}}},
			}},
		}
	}
	return out
}

func skuID(i int) string {
	const hex = "0123456789ABCDEF"
	b := []byte("0000-0000-0000")
	for j, k := 13, i*2654435761+0x1F2E; j >= 0; j-- {
		if b[j] == '-' {
			continue
		}
		b[j] = hex[k&15]
		k >>= 4
	}
	return string(b)
}
