package domain

import (
	"strings"
	"time"
)

// Cloud names the cloud a pool belongs to. A simulated pool still names the
// cloud it imitates.
type Cloud string

// The clouds gpumarket knows.
const (
	CloudAWS   Cloud = "aws"
	CloudAzure Cloud = "azure"
)

// Title is the cloud's name as people write it: "AWS", "Azure".
func (c Cloud) Title() string {
	switch c {
	case CloudAWS:
		return "AWS"
	case CloudAzure:
		return "Azure"
	}
	return string(c)
}

// GPUSpec describes the accelerators of one instance type or VM size.
type GPUSpec struct {
	// Model is the canonical GPU name: "H100", "A100", "L40S", ...
	Model string
	// Count is the GPUs per instance. It is fractional for Azure's
	// partial-GPU sizes (Standard_NV6ads_A10_v5 has 1/6 of an A10).
	Count float64
	// MemoryGiB is the GPU memory of one of the instance's GPUs; for a
	// partial-GPU size (Count below 1), the memory of its share, which is
	// all the GPU memory the instance has: Standard_NV6ads_A10_v5 has
	// 4 GiB, 1/6 of an A10's 24.
	MemoryGiB float64
}

// PoolKey identifies a pool: one instance type in one zone of one region
// of one provider. Its String form is stable and used as a map key.
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

// Pool is a market for one instance type in one zone: the unit gpumarket
// compares. Unknown values are nil, never made up.
type Pool struct {
	Provider     string // source that reports it: "sim", "aws", "azure"
	Cloud        Cloud
	Region       string
	Zone         string // "us-east-1a", or Azure's "1", "2", "3"; "" when the source has no zones
	InstanceType string
	GPU          GPUSpec

	// OnDemandUSDHour is the list price of one instance-hour, nil if unknown.
	OnDemandUSDHour *float64
	// Interruption is the pool's interruption data, nil if unknown.
	Interruption *Interruption
	// PlacementScore is AWS's 1-10 spot placement score, nil if unknown
	// (for instance when the caller may not call GetSpotPlacementScores).
	PlacementScore *int
	// Restricted is set when the cloud reports the size as not offered to
	// this subscription or account in this zone; such pools are shown,
	// marked, not hidden.
	Restricted bool
	// Simulated is true for every pool of the simulated market.
	Simulated bool
}

// Key returns the pool's identity.
func (p Pool) Key() PoolKey {
	return PoolKey{Provider: p.Provider, Region: p.Region, Zone: p.Zone, InstanceType: p.InstanceType}
}

// Place names a region and zone as one: AWS zones carry their region
// ("us-east-1a"), Azure's do not ("1" is westeurope/1, not a place).
func Place(region, zone string) string {
	switch {
	case zone == "":
		return region
	case strings.HasPrefix(zone, region):
		return zone
	}
	return region + "/" + zone
}

// Interruption is what is known of how often a pool's spot instances are
// reclaimed.
type Interruption struct {
	// Bucket is the canonical label: "<5%", "5-10%", "10-15%", "15-20%" or
	// ">20%". Azure's "0-5" ... "20+" are mapped onto the same labels.
	Bucket string
	// Process, when set, is the pool's spot capacity process as the source
	// knows it (the simulated market's own truth); the planner's risk
	// model uses it instead of the bucket. Nil for the clouds.
	Process *SpotProcess
	// Source says where the figure comes from, for the UI:
	// "aws spot advisor (embedded 2025-06)", "azure resource graph", "sim".
	Source string
	// AsOf is when the source published the figure, zero if unknown.
	AsOf time.Time
}

// Buckets are the canonical interruption buckets, calmest first.
var Buckets = []string{"<5%", "5-10%", "10-15%", "15-20%", ">20%"}

// BucketRank orders buckets calmest first; unknown labels rank last.
func BucketRank(bucket string) int {
	for i, b := range Buckets {
		if b == bucket {
			return i
		}
	}
	return len(Buckets)
}

// NormalizeBucket maps a source's interruption label onto a canonical bucket:
// AWS's "<5%" ... ">20%" and Azure's "0-5", "5-10", ..., "20+" (with or
// without a percent sign). It reports false for anything else.
func NormalizeBucket(label string) (string, bool) {
	s := strings.TrimSpace(label)
	s = strings.TrimSuffix(s, "%")
	s = strings.ReplaceAll(s, " ", "")
	switch s {
	case "<5", "0-5":
		return "<5%", true
	case "5-10":
		return "5-10%", true
	case "10-15":
		return "10-15%", true
	case "15-20":
		return "15-20%", true
	case ">20", "20+":
		return ">20%", true
	}
	return "", false
}

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
