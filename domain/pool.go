// Package domain holds the market's types, the Provider interface, the GPU catalog and price math.
package domain

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Cloud names a pool's cloud; a simulated pool names the one it imitates.
type Cloud string

// The clouds gpumarket knows.
const (
	CloudAWS   Cloud = "aws"
	CloudAzure Cloud = "azure"
	CloudGCP   Cloud = "gcp"
)

// GPUSpec describes the accelerators of one instance type or VM size.
type GPUSpec struct {
	Model     string  // canonical: "H100", "A100", …
	Count     float64 // per instance; fractional for partial-GPU sizes
	MemoryGiB float64 // of one GPU, or of a partial GPU's share
}

// PoolKey identifies a pool; its String form is stable and used as a map key.
type PoolKey struct {
	Provider     string
	Region       string
	Zone         string
	InstanceType string
}

// String returns "provider/region/zone/instance-type".
func (k PoolKey) String() string {
	return k.Provider + "/" + k.Region + "/" + k.Zone + "/" + k.InstanceType
}

// Pool is a market for one instance type in one zone; unknown values are nil.
type Pool struct {
	Provider     string // source that reports it: "sim", "aws", "azure"
	Cloud        Cloud
	Region       string
	Zone         string // "us-east-1a", or Azure's "1", "2", "3"; "" when the source has no zones
	InstanceType string
	GPU          GPUSpec

	OnDemandUSDHour *float64 // list price of an instance-hour
	Interruption    *Interruption
	PlacementScore  *int // AWS's 1-10 spot placement score
	// PlacementNote says why an asked pool has no score ("not in AWS's top 10").
	PlacementNote string
	Restricted    bool // not offered to this account here: shown, marked
	Simulated     bool
}

// Key returns the pool's identity.
func (p Pool) Key() PoolKey {
	return PoolKey{Provider: p.Provider, Region: p.Region, Zone: p.Zone, InstanceType: p.InstanceType}
}

// Place names a region and zone as one; AWS zones carry their region, Azure's ("1") do not.
func Place(region, zone string) string {
	switch {
	case zone == "":
		return region
	case strings.HasPrefix(zone, region):
		return zone
	}
	return region + "/" + zone
}

// Interruption is what is known of how often a pool's spot instances are reclaimed.
type Interruption struct {
	Bucket  string       // canonical: "<5%" … ">20%"
	Process *SpotProcess // the source's own truth (sim), which the planner prefers
	Source  string       // for the UI: "aws spot advisor (embedded 2025-06)"
	AsOf    time.Time    // zero if unknown
}

// Buckets are the canonical interruption buckets, calmest first.
var Buckets = []string{"<5%", "5-10%", "10-15%", "15-20%", ">20%"}

// BucketRank orders buckets calmest first; unknown labels rank last.
func BucketRank(bucket string) int {
	if i := slices.Index(Buckets, bucket); i >= 0 {
		return i
	}
	return len(Buckets)
}

// NormalizeBucket maps AWS's "<5%" … ">20%" and Azure's "0-5" … "20+" onto Buckets.
func NormalizeBucket(label string) (string, bool) {
	s := strings.TrimSpace(label)
	s = strings.TrimSuffix(s, "%")
	s = strings.ReplaceAll(s, " ", "")
	b, ok := bucketOf[s]
	return b, ok
}

// bucketOf maps the clouds' labels, without "%" and spaces, onto Buckets.
var bucketOf = map[string]string{"<5": "<5%", "0-5": "<5%", "5-10": "5-10%", "10-15": "10-15%", "15-20": "15-20%", ">20": ">20%", "20+": ">20%"}

// NewInterruption builds interruption data from a source's bucket label.
func NewInterruption(label, source string, asOf time.Time) (*Interruption, bool) {
	b, ok := NormalizeBucket(label)
	if !ok {
		return nil, false
	}
	return &Interruption{Bucket: b, Source: source, AsOf: asOf}, true
}

// Float returns a pointer to v, for the optional fields of Pool.
func Float(v float64) *float64 { return &v }

// Int returns a pointer to v.
func Int(v int) *int { return &v }

// SpotProcess is a pool's spot capacity as runs ended by interruptions, then gaps.
type SpotProcess struct {
	InterruptionsPerHour float64 // per hour one instance is held
	GapMedianHours       float64 // until reclaimed capacity comes back
	Availability         float64 // long-run share of time with capacity, (0, 1]
	RegionShare          float64 // share common to the region's other zones; 0: independent
}

// PerGPUHour converts an instance-hour price to a GPU-hour price; NaN with no GPUs.
func PerGPUHour(usdHour, gpus float64) float64 {
	if gpus <= 0 {
		return math.NaN()
	}
	return usdHour / gpus
}

// SavingsPct is how much cheaper spot is than on-demand, in percent; NaN with no on-demand.
func SavingsPct(spot, onDemand float64) float64 {
	if onDemand <= 0 {
		return math.NaN()
	}
	return (1 - spot/onDemand) * 100
}
