package sim

import (
	"math"
	"slices"
	"sort"

	"github.com/gpumarket/gpumarket/cloud/advisor"
	"github.com/gpumarket/gpumarket/domain"
)

type region struct {
	Name  string
	Cloud domain.Cloud
	Zones []string
	// UTCOffset in hours, standard time: its business hours are the busy ones.
	UTCOffset float64
	// Busy shifts the interruption score: popular regions are reclaimed more.
	Busy float64
	// PriceMult scales the us-east-1 / eastus list price.
	PriceMult float64
	// AWSTwin: for an Azure region, the nearest AWS region, whose advisor figures stand in.
	AWSTwin string
}

var awsRegions = []region{
	{Name: "us-east-1", Zones: []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"}, UTCOffset: -5, Busy: 0.4, PriceMult: 1.00},
	{Name: "us-east-2", Zones: []string{"us-east-2a", "us-east-2b", "us-east-2c"}, UTCOffset: -5, Busy: 0.1, PriceMult: 1.00},
	{Name: "us-west-2", Zones: []string{"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"}, UTCOffset: -8, Busy: 0.3, PriceMult: 1.00},
	{Name: "ca-central-1", Zones: []string{"ca-central-1a", "ca-central-1b", "ca-central-1d"}, UTCOffset: -5, Busy: -0.3, PriceMult: 1.10},
	{Name: "eu-west-1", Zones: []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}, UTCOffset: 0, Busy: 0.0, PriceMult: 1.08},
	{Name: "eu-west-2", Zones: []string{"eu-west-2a", "eu-west-2b", "eu-west-2c"}, UTCOffset: 0, Busy: 0.1, PriceMult: 1.10},
	{Name: "eu-central-1", Zones: []string{"eu-central-1a", "eu-central-1b", "eu-central-1c"}, UTCOffset: 1, Busy: 0.2, PriceMult: 1.12},
	{Name: "eu-north-1", Zones: []string{"eu-north-1a", "eu-north-1b", "eu-north-1c"}, UTCOffset: 1, Busy: -0.3, PriceMult: 1.04},
	{Name: "ap-northeast-1", Zones: []string{"ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d"}, UTCOffset: 9, Busy: 0.3, PriceMult: 1.20},
	{Name: "ap-southeast-2", Zones: []string{"ap-southeast-2a", "ap-southeast-2b", "ap-southeast-2c"}, UTCOffset: 10, Busy: 0.0, PriceMult: 1.16},
	{Name: "ap-south-1", Zones: []string{"ap-south-1a", "ap-south-1b", "ap-south-1c"}, UTCOffset: 5.5, Busy: -0.1, PriceMult: 1.06},
}

var azureZones = []string{"1", "2", "3"}

// IsRegion reports whether the simulated market has the region (real names).
func IsRegion(name string) bool {
	return slices.ContainsFunc(allRegions, func(r *region) bool { return r.Name == name })
}

// allRegions are every cloud's regions, each told its cloud.
var allRegions = func() (out []*region) {
	clouds := []domain.Cloud{domain.CloudAWS, domain.CloudAzure, domain.CloudGCP}
	for i, list := range [][]region{awsRegions, azureRegions, gcpRegions} {
		for j := range list {
			list[j].Cloud = clouds[i]
			out = append(out, &list[j])
		}
	}
	return out
}()

var azureRegions = []region{
	{Name: "eastus", Zones: azureZones, UTCOffset: -5, Busy: 0.3, PriceMult: 1.00, AWSTwin: "us-east-1"},
	{Name: "eastus2", Zones: azureZones, UTCOffset: -5, Busy: 0.2, PriceMult: 1.00, AWSTwin: "us-east-2"},
	{Name: "southcentralus", Zones: azureZones, UTCOffset: -6, Busy: 0.0, PriceMult: 1.02, AWSTwin: "us-east-2"},
	{Name: "westus3", Zones: azureZones, UTCOffset: -7, Busy: 0.0, PriceMult: 1.00, AWSTwin: "us-west-2"},
	{Name: "westeurope", Zones: azureZones, UTCOffset: 1, Busy: 0.3, PriceMult: 1.10, AWSTwin: "eu-central-1"},
	{Name: "northeurope", Zones: azureZones, UTCOffset: 0, Busy: 0.0, PriceMult: 1.06, AWSTwin: "eu-west-1"},
	{Name: "swedencentral", Zones: azureZones, UTCOffset: 1, Busy: -0.3, PriceMult: 1.04, AWSTwin: "eu-north-1"},
	{Name: "japaneast", Zones: azureZones, UTCOffset: 9, Busy: 0.2, PriceMult: 1.18, AWSTwin: "ap-northeast-1"},
}

// listPrice is the on-demand Linux instance-hour in us-east-1 (after the June
// 2025 P4/P5 cut) or eastus, rounded as the price lists print them.
var listPrice = map[string]float64{
	// p5e/p5en: p5 plus the H200's memory premium, approximate (no public price before the cut).
	"p5.48xlarge": 55.04, "p5e.48xlarge": 61.80, "p5en.48xlarge": 63.30,
	"p4d.24xlarge": 21.96, "p4de.24xlarge": 27.45,
	"g6e.xlarge": 1.861, "g6e.2xlarge": 2.242, "g6e.12xlarge": 10.493, "g6e.48xlarge": 30.131,
	"g6.xlarge": 0.8048, "g6.2xlarge": 0.9776, "g6.12xlarge": 4.6016, "g6.48xlarge": 13.3504,
	"g5.xlarge": 1.006, "g5.2xlarge": 1.212, "g5.12xlarge": 5.672, "g5.48xlarge": 16.288,
	"g4dn.xlarge": 0.526, "g4dn.2xlarge": 0.752, "g4dn.12xlarge": 3.912, "g4dn.metal": 7.824,
	"p3.2xlarge": 3.06, "p3.8xlarge": 12.24, "p3.16xlarge": 24.48,
	// Azure, eastus.
	"Standard_ND96isr_H100_v5": 98.32, "Standard_NC40ads_H100_v5": 6.98, "Standard_NC80adis_H100_v5": 13.96,
	"Standard_NC24ads_A100_v4": 3.673, "Standard_NC48ads_A100_v4": 7.346, "Standard_NC96ads_A100_v4": 14.692,
	"Standard_ND96amsr_A100_v4": 32.77,
	"Standard_NV6ads_A10_v5":    0.454, "Standard_NV12ads_A10_v5": 0.908, "Standard_NV18ads_A10_v5": 1.60, "Standard_NV36ads_A10_v5": 3.20,
	"Standard_NC4as_T4_v3": 0.526, "Standard_NC8as_T4_v3": 0.752, "Standard_NC64as_T4_v3": 4.352,
}

// family is a group of sizes sold in the same regions and zones.
type family struct {
	Name  string
	Cloud domain.Cloud
	Types []string
	// Regions: nil is wherever the advisor lists the type (AWS) or every region (Azure).
	Regions []string
	// MinZones, MaxZones bound the zones carrying it; 0, 0 is all but now and then one.
	MinZones, MaxZones int
	// Twin: for an Azure family, the AWS type whose advisor figures stand in.
	Twin string
}

var families = []family{
	// The six regions of the advisor's ten where p5 is easiest to find.
	{Name: "p5", Cloud: domain.CloudAWS, Types: []string{"p5.48xlarge"},
		Regions: []string{"us-east-1", "us-east-2", "us-west-2", "eu-west-2", "eu-north-1", "ap-northeast-1"}, MinZones: 1, MaxZones: 2},
	{Name: "p5e", Cloud: domain.CloudAWS, Types: []string{"p5e.48xlarge"}, Regions: []string{"us-east-2", "us-west-2"}, MinZones: 1, MaxZones: 1},
	{Name: "p5en", Cloud: domain.CloudAWS, Types: []string{"p5en.48xlarge"}, MinZones: 1, MaxZones: 2},
	{Name: "p4d", Cloud: domain.CloudAWS, Types: []string{"p4d.24xlarge"}, MinZones: 1, MaxZones: 2},
	{Name: "p4de", Cloud: domain.CloudAWS, Types: []string{"p4de.24xlarge"}, MinZones: 1, MaxZones: 1},
	{Name: "g6e", Cloud: domain.CloudAWS, Types: []string{"g6e.xlarge", "g6e.2xlarge", "g6e.12xlarge", "g6e.48xlarge"}, MinZones: 2, MaxZones: 3},
	{Name: "g6", Cloud: domain.CloudAWS, Types: []string{"g6.xlarge", "g6.2xlarge", "g6.12xlarge", "g6.48xlarge"}},
	{Name: "g5", Cloud: domain.CloudAWS, Types: []string{"g5.xlarge", "g5.2xlarge", "g5.12xlarge", "g5.48xlarge"}},
	{Name: "g4dn", Cloud: domain.CloudAWS, Types: []string{"g4dn.xlarge", "g4dn.2xlarge", "g4dn.12xlarge", "g4dn.metal"}},
	{Name: "p3", Cloud: domain.CloudAWS, Types: []string{"p3.2xlarge", "p3.8xlarge", "p3.16xlarge"}, MinZones: 1, MaxZones: 2},

	{Name: "ND H100 v5", Cloud: domain.CloudAzure, Types: []string{"Standard_ND96isr_H100_v5"}, Twin: "p5.48xlarge",
		Regions: []string{"eastus", "eastus2", "southcentralus", "westus3", "westeurope", "swedencentral", "japaneast"}, MinZones: 1, MaxZones: 2},
	{Name: "NC H100 v5", Cloud: domain.CloudAzure, Types: []string{"Standard_NC40ads_H100_v5", "Standard_NC80adis_H100_v5"}, Twin: "p5.48xlarge",
		Regions: []string{"eastus2", "southcentralus", "westeurope", "swedencentral"}, MinZones: 1, MaxZones: 2},
	{Name: "NC A100 v4", Cloud: domain.CloudAzure, Types: []string{"Standard_NC24ads_A100_v4", "Standard_NC48ads_A100_v4", "Standard_NC96ads_A100_v4"}, Twin: "p4d.24xlarge",
		Regions: []string{"eastus", "eastus2", "southcentralus", "westus3", "westeurope", "northeurope", "japaneast"}, MinZones: 2, MaxZones: 3},
	{Name: "ND A100 v4", Cloud: domain.CloudAzure, Types: []string{"Standard_ND96amsr_A100_v4"}, Twin: "p4de.24xlarge",
		Regions: []string{"eastus", "southcentralus", "westus3", "westeurope"}, MinZones: 1, MaxZones: 2},
	{Name: "NV A10 v5", Cloud: domain.CloudAzure, Types: []string{"Standard_NV6ads_A10_v5", "Standard_NV12ads_A10_v5", "Standard_NV18ads_A10_v5", "Standard_NV36ads_A10_v5"}, Twin: "g5.xlarge"},
	{Name: "NCas T4 v3", Cloud: domain.CloudAzure, Types: []string{"Standard_NC4as_T4_v3", "Standard_NC8as_T4_v3", "Standard_NC64as_T4_v3"}, Twin: "g4dn.xlarge"},
}

// gpuPrior is the prior interruption score per GPU model (0 "<5%" … 4 ">20%"):
// the scarcest GPUs reclaimed most, which the advisor's data does not show for old fleets.
var gpuPrior = map[string]float64{
	"H200": 3.5, "H100": 3.6, "A100": 2.6, "L40S": 2.2, "L4": 2.0, "A10G": 2.0, "A10": 2.0, "T4": 0.9, "V100": 0.7,
}

// advisorWeight is the advisor figure's share of a pool's score; the rest is the prior.
const advisorWeight = 0.35

// savingsPrior is the typical spot saving (%) per GPU model where the advisor has none.
var savingsPrior = map[string]float64{
	"H200": 64, "H100": 67, "A100": 73, "L40S": 66, "L4": 64, "A10G": 64, "A10": 72, "T4": 80, "V100": 80,
}

var blockGPUs = []string{"H100", "H200", "A100"}

// strHash hashes a name without the seed: the market's structure is the same
// for every seed, which drives only prices and offerings.
func strHash(parts ...string) uint64 { return mix(uint64(newHashPrefix(parts...))) }

func pickZones(r region, f family) []string {
	zones := append([]string(nil), r.Zones...)
	if f.MinZones == 0 && f.MaxZones == 0 {
		if h := strHash("drop", r.Name, f.Name); len(zones) > 2 && h%4 == 0 {
			i := int(h>>8) % len(zones)
			zones = append(zones[:i], zones[i+1:]...)
		}
		return zones
	}
	n := f.MinZones + int(strHash("nzones", r.Name, f.Name)%uint64(f.MaxZones-f.MinZones+1))
	n = min(n, len(zones))
	sort.Slice(zones, func(i, j int) bool {
		return strHash("zone", f.Name, zones[i]) < strHash("zone", f.Name, zones[j])
	})
	zones = zones[:n]
	sort.Strings(zones)
	return zones
}

// poolSpec is one pool's seed-independent terms.
type poolSpec struct {
	Desc      domain.Pool // without Interruption and PlacementScore, which vary with time
	Region    *region
	Family    string
	Bucket    int
	Placement int
	BaseRatio float64
	Source    string
}

// Interruption sources, shown in the UI next to the bucket.
const (
	sourceAWS   = "sim (aws spot advisor 2025-06, blended with GPU prior)"
	sourceAzure = "sim (from aws spot advisor 2025-06 of the nearest aws region, blended with GPU prior)"
	sourcePrior = "sim (GPU prior)"
)

func buildSpecs() []poolSpec {
	adv := advisor.Embedded()
	var out []poolSpec
	for _, r := range allRegions {
		for _, f := range slices.Concat(families, gcpFamilies) {
			if f.Cloud != r.Cloud || f.Regions != nil && !slices.Contains(f.Regions, r.Name) {
				continue
			}
			zones := pickZones(*r, f)
			for _, t := range f.Types {
				// An AWS family of no listed regions is sold where the advisor lists the type.
				if f.Regions == nil && r.Cloud == domain.CloudAWS {
					if _, ok := adv.Lookup(r.Name, t); !ok {
						continue
					}
				}
				e, ok := domain.LookupGPU(t)
				if !ok {
					panic("sim: instance type missing from the catalog: " + t)
				}
				for _, z := range zones {
					out = append(out, newSpec(adv, r, f, t, z, e.GPU))
				}
			}
		}
	}
	return out
}

func newSpec(adv *advisor.Data, r *region, f family, t, zone string, gpu domain.GPUSpec) poolSpec {
	od := math.Round(listPriceOf(t)*r.PriceMult*1e4) / 1e4
	s := poolSpec{
		Desc: domain.Pool{
			Provider: Name, Cloud: r.Cloud, Region: r.Name, Zone: zone, InstanceType: t, GPU: gpu,
			OnDemandUSDHour: domain.Float(od), Simulated: true,
		},
		Region: r, Family: f.Name,
	}
	// The type's own advisor figure (AWS), or its twin's in the nearest AWS region
	// (Azure), else the type's mean over the advisor's regions.
	advType, advRegion := t, r.Name
	s.Source = sourceAWS
	if r.Cloud != domain.CloudAWS {
		advType, advRegion = f.Twin, r.AWSTwin
		s.Source = sourceAzure
	}
	rangeIdx, savings, ok := advisorFigure(adv, advRegion, advType)
	prior := gpuPrior[gpu.Model]
	score := prior
	if ok {
		score = advisorWeight*rangeIdx + (1-advisorWeight)*prior
	} else {
		s.Source = sourcePrior
	}
	if r.Cloud == domain.CloudGCP {
		s.Source = sourceGCP
	}
	// Stretch blended scores back so calm and wild buckets stay as common as in the data.
	score = 2 + 1.35*(score-2)
	jitter := unit(strHash("int", r.Name, zone, t)) - 0.5
	score += r.Busy + jitter
	s.Bucket = clampInt(int(math.Round(score)), 0, len(domain.Buckets)-1)

	if r.Cloud == domain.CloudAWS {
		pj := int(strHash("score", r.Name, zone, t) % 3) // 0..2
		s.Placement = clampInt(9-2*s.Bucket+pj-1, 1, 10)
	}

	if !ok || r.Cloud != domain.CloudAWS {
		savings = savingsPrior[gpu.Model]
	}
	savings += unit(strHash("sav", r.Name, zone, t))*8 - 4
	// Inside the promised 60-91 % band, with room for cycles and spikes.
	savings = math.Max(65, math.Min(87, savings))
	s.BaseRatio = 1 - savings/100
	return s
}

// advisorFigure returns a type's advisor range and savings in a region, else its mean.
func advisorFigure(adv *advisor.Data, region, t string) (rangeIdx, savings float64, ok bool) {
	if e, found := adv.Lookup(region, t); found {
		return float64(e.Range), float64(e.SavingsPct), true
	}
	var n int
	for reg := range adv.Regions {
		if e, found := adv.Lookup(reg, t); found {
			rangeIdx += float64(e.Range)
			savings += float64(e.SavingsPct)
			n++
		}
	}
	if n == 0 {
		return 0, 0, false
	}
	return rangeIdx / float64(n), savings / float64(n), true
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }
