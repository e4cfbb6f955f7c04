package aws

import (
	"context"
	"sort"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/gpumarket/gpumarket/providers"
)

// scoreTTL is how long placement scores are kept: AWS limits how many
// distinct score requests an account may make a day.
const scoreTTL = 6 * time.Hour

// maxScoreTypes caps the instance types scored per refresh, for the same
// quota; the newest GPU models go first.
const maxScoreTypes = 10

type scoreState struct {
	denied bool
	at     time.Time
}

// updateScores asks GetSpotPlacementScores, once per instance type for all
// the regions, for a score per zone, and sends the pools whose score
// changed. When the caller may not call it (UnauthorizedOperation) the
// scores stay nil and it is not asked again.
func (p *Provider) updateScores(ctx context.Context, regions []string, q providers.Query, sink providers.Sink) {
	now := p.opt.Now()
	p.mu.Lock()
	st := p.scores
	p.mu.Unlock()
	if st.denied || (!st.at.IsZero() && now.Sub(st.at) < scoreTTL) {
		return
	}
	type typeInfo struct {
		name  string
		model string
	}
	seen := map[string]typeInfo{}
	for _, r := range regions {
		rs := p.regionState(r)
		rs.mu.Lock()
		for k, pool := range rs.pools {
			if q.WantsGPU(pool.GPU.Model) {
				seen[k.InstanceType] = typeInfo{k.InstanceType, pool.GPU.Model}
			}
		}
		rs.mu.Unlock()
	}
	rank := map[string]int{}
	for i, m := range providers.GPUModels {
		rank[m] = i
	}
	var types []typeInfo
	for _, t := range seen {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if rank[types[i].model] != rank[types[j].model] {
			return rank[types[i].model] < rank[types[j].model]
		}
		return types[i].name < types[j].name
	})
	if len(types) > maxScoreTypes {
		types = types[:maxScoreTypes]
	}
	// scores[region][zone id][type]
	scores := map[string]map[string]map[string]int{}
	for _, t := range types {
		pg := ec2.NewGetSpotPlacementScoresPaginator(p.client(p.home), &ec2.GetSpotPlacementScoresInput{
			InstanceTypes:          []string{t.name},
			RegionNames:            regions,
			TargetCapacity:         awssdk.Int32(1),
			SingleAvailabilityZone: awssdk.Bool(true),
			MaxResults:             awssdk.Int32(100),
		})
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			if err != nil {
				if apiCode(err) == "UnauthorizedOperation" {
					p.opt.Logger.Info("spot placement scores not allowed for these credentials; scores stay unknown", "err", err)
					p.mu.Lock()
					p.scores.denied = true
					p.mu.Unlock()
					return
				}
				p.opt.Logger.Warn("spot placement scores", "type", t.name, "err", err)
				return
			}
			for _, s := range out.SpotPlacementScores {
				if s.Region == nil || s.AvailabilityZoneId == nil || s.Score == nil {
					continue
				}
				r, z := *s.Region, *s.AvailabilityZoneId
				if scores[r] == nil {
					scores[r] = map[string]map[string]int{}
				}
				if scores[r][z] == nil {
					scores[r][z] = map[string]int{}
				}
				scores[r][z][t.name] = int(*s.Score)
			}
		}
	}
	p.mu.Lock()
	p.scores.at = now
	p.mu.Unlock()
	for _, r := range regions {
		rs := p.regionState(r)
		var changed []providers.Pool
		rs.mu.Lock()
		for id, byType := range scores[r] {
			zone := rs.zoneNames[id]
			if zone == "" {
				continue
			}
			for typ, score := range byType {
				k := providers.PoolKey{Provider: Name, Region: r, Zone: zone, InstanceType: typ}
				pool, ok := rs.pools[k]
				if !ok || (pool.PlacementScore != nil && *pool.PlacementScore == score) {
					continue
				}
				pool.PlacementScore = providers.Int(score)
				rs.pools[k] = pool
				changed = append(changed, pool)
			}
		}
		rs.mu.Unlock()
		if len(changed) > 0 {
			sink(providers.Event{Provider: Name, Region: r, Pools: changed})
		}
	}
}
