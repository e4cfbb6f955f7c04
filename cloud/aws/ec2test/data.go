package ec2test

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Region is what the fake knows of one region.
type Region struct {
	Name  string
	Zones []Zone
	// InstanceTypes are every type the region offers, GPU or not.
	InstanceTypes []InstanceType
	// Prices is the spot price history, in any order.
	Prices []SpotPrice
	// Offerings are the capacity blocks on sale.
	Offerings []Offering
	// OnDemand maps instance type → on-demand USD per hour (Price List API).
	OnDemand map[string]float64
	// Scores maps instance type → zone id → placement score.
	Scores map[string]map[string]int
	// OmitZoneIDs leaves availabilityZoneId out of the price history, as
	// the API's documented example and older answers do.
	OmitZoneIDs bool
}

// Zone is an availability zone: its name ("us-east-1a") and id ("use1-az1").
type Zone struct{ Name, ID string }

// InstanceType is an instance type's description; GPUName is "" for a type
// without GPUs.
type InstanceType struct {
	Name          string
	VCPUs         int
	MemoryMiB     int
	GPUName       string
	GPUMaker      string
	GPUCount      int
	GPUMemoryMiB  int
	CapacityBlock bool // sold as capacity blocks
}

// SpotPrice is one spot price change.
type SpotPrice struct {
	InstanceType string
	Zone         string
	At           time.Time
	USD          float64
}

// Offering is a capacity block offering of a fixed size.
type Offering struct {
	ID           string
	InstanceType string
	Zone         string
	Start        time.Time
	// Hours and Minutes are the block's length (AWS's
	// capacityBlockDurationHours and capacityBlockDurationMinutes: a
	// block from 04:55 to 11:30 is 6 h 35 min).
	Hours, Minutes int
	// UpfrontUSDPerInstance is the fee of one instance for the whole
	// block; an answer for n instances charges n times it.
	UpfrontUSDPerInstance float64
	// FeeText, when set, is sent as the upfrontFee instead ("NaN", "",
	// "-3"): an answer a parser must survive.
	FeeText string
	// Omit names optional members left out of the answer
	// ("currencyCode", "availabilityZone", "instanceCount", …).
	Omit []string
}

// Length is the block's length.
func (o Offering) Length() time.Duration {
	return time.Duration(o.Hours)*time.Hour + time.Duration(o.Minutes)*time.Minute
}

// Standard instance types, GPU and not, with AWS's own figures (GPU memory
// as DescribeInstanceTypes reports it, per GPU, in MiB).
var standardTypes = []InstanceType{
	{Name: "p5.48xlarge", VCPUs: 192, MemoryMiB: 2097152, GPUName: "H100", GPUMaker: "NVIDIA", GPUCount: 8, GPUMemoryMiB: 81920, CapacityBlock: true},
	{Name: "p4d.24xlarge", VCPUs: 96, MemoryMiB: 1179648, GPUName: "A100", GPUMaker: "NVIDIA", GPUCount: 8, GPUMemoryMiB: 40960, CapacityBlock: true},
	{Name: "g6e.xlarge", VCPUs: 4, MemoryMiB: 32768, GPUName: "L40S", GPUMaker: "NVIDIA", GPUCount: 1, GPUMemoryMiB: 45776},
	{Name: "g6.xlarge", VCPUs: 4, MemoryMiB: 16384, GPUName: "L4", GPUMaker: "NVIDIA", GPUCount: 1, GPUMemoryMiB: 22888},
	{Name: "g5.12xlarge", VCPUs: 48, MemoryMiB: 196608, GPUName: "A10G", GPUMaker: "NVIDIA", GPUCount: 4, GPUMemoryMiB: 24576},
	{Name: "g4dn.xlarge", VCPUs: 4, MemoryMiB: 16384, GPUName: "T4", GPUMaker: "NVIDIA", GPUCount: 1, GPUMemoryMiB: 16384},
	{Name: "m7i.large", VCPUs: 2, MemoryMiB: 8192},
	{Name: "c6i.2xlarge", VCPUs: 8, MemoryMiB: 16384},
	{Name: "r6g.xlarge", VCPUs: 4, MemoryMiB: 32768},
}

// alternatives are the blocks AWS offers beside those of the asked length
// (EC2 User Guide, "Find and purchase Capacity Blocks": they end at 11:30
// UTC like every block, so those starting on other days or at odd times
// are a little shorter or longer). They follow the documented examples:
// 19 h 17 min and 43 h 17 min blocks from 16:13 (aws-samples' answer to a
// 24 h query), and a block from 04:55 to 11:30 (the API reference's
// capacityBlockDurationHours example, 6 h 35 min). Their ids come from a
// hash, not the data's random source, so adding them left the rest of the
// generated data as it was; one leaves out its currencyCode.
func alternatives(region, typ string, zones []Zone, to time.Time, od float64) []Offering {
	base := to.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	alts := []Offering{
		{Start: base.Add(16*time.Hour + 13*time.Minute), Hours: 19, Minutes: 17, Omit: []string{"currencyCode"}},
		{Start: base.Add(16*time.Hour + 13*time.Minute), Hours: 43, Minutes: 17},
		{Start: base.Add(24*time.Hour + 4*time.Hour + 55*time.Minute), Hours: 6, Minutes: 35},
	}
	for i := range alts {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%s/%d", region, typ, i)
		alts[i].ID = fmt.Sprintf("cb-%017x", h.Sum64()>>4)
		alts[i].InstanceType = typ
		alts[i].Zone = zones[i%len(zones)].Name
		alts[i].UpfrontUSDPerInstance = math.Round(od*0.55*alts[i].Length().Hours()*100) / 100
	}
	return alts
}

// On-demand list prices (USD per hour, us-east-1) of the standard types.
var standardOnDemand = map[string]float64{
	"p5.48xlarge": 98.32, "p4d.24xlarge": 32.7726, "g6e.xlarge": 1.861, "g6.xlarge": 0.8048,
	"g5.12xlarge": 5.672, "g4dn.xlarge": 0.526, "m7i.large": 0.1008, "c6i.2xlarge": 0.34, "r6g.xlarge": 0.2016,
}

// regionNames are real regions' zone id prefixes ("use1" in "use1-az1")
// and Price List locations.
var regionNames = map[string]struct{ zoneIDPrefix, location string }{
	"us-east-1": {"use1", "US East (N. Virginia)"}, "us-east-2": {"use2", "US East (Ohio)"},
	"us-west-1": {"usw1", "US West (N. California)"}, "us-west-2": {"usw2", "US West (Oregon)"},
	"ca-central-1": {"cac1", "Canada (Central)"}, "sa-east-1": {"sae1", "South America (Sao Paulo)"},
	"eu-west-1": {"euw1", "EU (Ireland)"}, "eu-west-2": {"euw2", "EU (London)"}, "eu-west-3": {"euw3", "EU (Paris)"},
	"eu-central-1": {"euc1", "EU (Frankfurt)"}, "eu-north-1": {"eun1", "EU (Stockholm)"},
	"ap-south-1": {"aps1", "Asia Pacific (Mumbai)"}, "ap-northeast-1": {"apne1", "Asia Pacific (Tokyo)"},
	"ap-northeast-2": {"apne2", "Asia Pacific (Seoul)"}, "ap-northeast-3": {"apne3", "Asia Pacific (Osaka)"},
	"ap-southeast-1": {"apse1", "Asia Pacific (Singapore)"}, "ap-southeast-2": {"apse2", "Asia Pacific (Sydney)"},
	"me-central-1": {"mec1", "Middle East (UAE)"}, "il-central-1": {"ilc1", "Israel (Tel Aviv)"},
}

// GPURegions are sixteen real regions where AWS sells GPU instances, for
// runs that fan out as a real user's would.
var GPURegions = []string{
	"us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
	"eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1",
	"ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-southeast-1", "ap-southeast-2",
}

// Generate builds realistic data for the regions: three zones each, the
// standard GPU and non-GPU types, a spot price history over [from, to]
// changing every step (a bounded random walk at 25-45 % of on-demand), and
// capacity blocks for the H100 and A100 types. The same seed gives the
// same data.
func Generate(seed uint64, regions []string, from, to time.Time, step time.Duration) []*Region {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []*Region
	for ri, name := range regions {
		prefix := regionNames[name].zoneIDPrefix
		if prefix == "" {
			prefix = fmt.Sprintf("r%d", ri)
		}
		r := &Region{Name: name, OnDemand: map[string]float64{}, Scores: map[string]map[string]int{}}
		for i, l := range []string{"a", "b", "c"} {
			r.Zones = append(r.Zones, Zone{Name: name + l, ID: fmt.Sprintf("%s-az%d", prefix, i+1)})
		}
		r.InstanceTypes = append(r.InstanceTypes, standardTypes...)
		regionFactor := 1 + 0.05*float64(ri)
		for _, it := range r.InstanceTypes {
			od := math.Round(standardOnDemand[it.Name]*regionFactor*10000) / 10000
			r.OnDemand[it.Name] = od
			r.Scores[it.Name] = map[string]int{}
			for _, z := range r.Zones {
				r.Scores[it.Name][z.ID] = 1 + rng.IntN(10)
				// Every type has history in every zone, starting one step
				// before the window so the price at its start is known.
				share := 0.25 + 0.2*rng.Float64()
				for t := from.Add(-step).Truncate(time.Second); !t.After(to); t = t.Add(step) {
					share += (rng.Float64() - 0.5) * 0.04
					share = math.Min(0.45, math.Max(0.25, share))
					r.Prices = append(r.Prices, SpotPrice{InstanceType: it.Name, Zone: z.Name, At: t,
						USD: math.Round(od*share*10000) / 10000})
				}
			}
			if it.CapacityBlock {
				day := to.UTC().Truncate(24 * time.Hour).Add(24*time.Hour + 11*time.Hour + 30*time.Minute)
				for k, hours := range []int{24, 48, 48, 72, 168} {
					z := r.Zones[k%len(r.Zones)]
					fee := od * 0.6 * float64(hours) // per instance
					r.Offerings = append(r.Offerings, Offering{
						ID:           fmt.Sprintf("cb-%017x", rng.Uint64()),
						InstanceType: it.Name, Zone: z.Name, Start: day.Add(time.Duration(k) * 24 * time.Hour),
						Hours: hours, UpfrontUSDPerInstance: math.Round(fee*100) / 100,
					})
				}
				r.Offerings = append(r.Offerings, alternatives(name, it.Name, r.Zones, to, od)...)
			}
		}
		sort.Slice(r.Prices, func(i, j int) bool { return r.Prices[i].At.After(r.Prices[j].At) })
		out = append(out, r)
	}
	return out
}
