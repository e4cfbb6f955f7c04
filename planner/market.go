package planner

import (
	"math"

	"github.com/gpumarket/gpumarket/domain"
)

// Pool is one spot pool as plain figures; prices per instance-hour, NaN
// when unknown.
type Pool struct {
	Key             string
	Provider        string
	Cloud           domain.Cloud
	Region, Zone    string
	InstanceType    string
	GPUModel        string
	GPUsPerInstance float64
	SpotUSDHour     float64
	OnDemandUSDHour float64
	Risk            Risk
	// Restricted pools (not offered to the account there) are left out.
	Restricted bool
}

// PoolOf reads a provider's pool, its spot price and its risk.
func PoolOf(p domain.Pool, spotUSDHour float64, priors Priors) Pool {
	od := math.NaN()
	if p.OnDemandUSDHour != nil && *p.OnDemandUSDHour > 0 {
		od = *p.OnDemandUSDHour
	}
	return Pool{
		Key: p.Key().String(), Provider: p.Provider, Cloud: p.Cloud, Region: p.Region, Zone: p.Zone,
		InstanceType: p.InstanceType, GPUModel: p.GPU.Model, GPUsPerInstance: p.GPU.Count,
		SpotUSDHour: spotUSDHour, OnDemandUSDHour: od, Risk: RiskOf(p, priors), Restricted: p.Restricted,
	}
}

// Market is the pools and the offerings the caller found (BlockQueries).
type Market struct {
	Pools     []Pool
	Offerings []domain.Offering
}
