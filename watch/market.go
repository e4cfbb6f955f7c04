package watch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
)

// pool is the pool a spot or bucket rule watches.
type pool struct {
	InstanceType string
	Region       string
	Zone         string
	Provider     string
}

// validatePool checks a rule's pool, spelling its instance type the catalog's way.
func validatePool(it, region, zone, provider *string) error {
	if *it == "" {
		return ruleErr("", "instance_type: missing; want a GPU instance type or VM size such as p5.48xlarge or Standard_ND96isr_H100_v5")
	}
	e, ok := domain.LookupGPU(*it)
	if !ok {
		return ruleErr("instance_type", "%q is no GPU instance type or VM size gpumarket knows; want one such as p5.48xlarge, g6e.xlarge or Standard_ND96isr_H100_v5 (see `gpumarket prices`)", *it)
	}
	*it = e.InstanceType
	if *region == "" {
		return ruleErr("", "region: missing; want a region such as us-west-2 or eastus")
	}
	if !config.ValidRegion(*region) {
		return ruleErr("region", "bad region %q; want %s", *region, config.RegionForm)
	}
	// A zone is its region's name and a letter (AWS) or a digit (Azure).
	if z := *zone; z != "" && !(strings.HasPrefix(z, *region) && len(z) == len(*region)+1) && !(len(z) == 1 && z[0] >= '1' && z[0] <= '9') {
		return ruleErr("zone", "%q is not a zone of %s; want one such as %sa (AWS) or 1, 2, 3 (Azure), or no zone for any zone of the region", z, *region, *region)
	}
	// Whether it is in use is checked against the run's providers.
	if *provider != "" && !config.ValidProviderName(*provider) {
		return ruleErr("provider", "bad provider %q; want a provider's name such as aws or gcp, or none for any provider in use", *provider)
	}
	return nil
}

// check asks the providers in use for the pool's provider and region.
func (p pool) check(inUse []domain.Descriptor) error {
	ds := inUse
	if p.Provider != "" {
		ds = nil
		for _, d := range inUse {
			if d.Name == p.Provider {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			return ruleErr("provider", "%s is not in use in this run (providers: %s); want one of them, or none", p.Provider, names(inUse))
		}
	}
	for _, d := range ds {
		if d.KnowsRegion(p.Region) {
			return nil
		}
	}
	return ruleErr("region", "%s is a region none of the providers in use (%s) knows; want one such as %s", p.Region, names(inUse), regionExamples(ds))
}

// reads is the pool's GPU model in its region.
func (p pool) reads() marketNeed {
	n := marketNeed{Regions: []string{p.Region}}
	if e, ok := domain.LookupGPU(p.InstanceType); ok {
		n.GPUs = []string{e.GPU.Model}
	}
	return n
}

// where says the pool's place for a rule's description.
func (p pool) where() string {
	s := "in " + p.Region
	if p.Zone != "" {
		s = "in " + p.Zone
		if !strings.HasPrefix(p.Zone, p.Region) {
			s = "in " + p.Region + "/" + p.Zone
		}
	} else {
		s += " (any zone)"
	}
	if p.Provider != "" {
		s += " at " + p.Provider
	}
	return s
}

// matches reports whether a pool of the market is this one.
func (p pool) matches(pv *feed.PoolView) bool {
	return strings.EqualFold(pv.InstanceType, p.InstanceType) && pv.Region == p.Region &&
		(p.Zone == "" || pv.Zone == p.Zone) && (p.Provider == "" || pv.Provider == p.Provider) && !pv.Restricted
}

// notInMarket says once that no pool matches a rule: it cannot fire while so.
func (e *Evaluator) notInMarket(r Rule, p pool) {
	where := p.Region
	if p.Zone != "" {
		where = p.Zone
	}
	e.sayOnce(r, fmt.Sprintf("no pool of %s in %s is in this run's market (its filters, or the region has none); the rule cannot fire until one is", p.InstanceType, where))
}

// fresh reports whether the pool's source is not stale and its region's fetch
// did not fail: a crossing is never decided on old data.
func fresh(snap *feed.Snapshot, pv *feed.PoolView) bool {
	src, ok := snap.Source(pv.Provider)
	if !ok || src.Stale {
		return false
	}
	for _, r := range src.Regions {
		if r.Region == pv.Region {
			return r.Err == ""
		}
	}
	return true
}

// poolAlert is an alert about a pool.
func poolAlert(pv feed.PoolView) *Alert {
	return &Alert{Simulated: pv.Simulated, Provider: strp(pv.Provider), Region: strp(pv.Region), Zone: strp(pv.Zone),
		InstanceType: strp(pv.InstanceType), GPUModel: strp(pv.GPU.Model), GPUCount: fp(pv.GPU.Count)}
}

// marketNeed is the GPU models in regions a rule reads (none: the query's).
type marketNeed struct {
	GPUs, Regions []string
}

// MarketFor is the market a headless watch needs for rules: their GPUs and
// regions, an hour of history; false when no rule reads the market.
func MarketFor(q domain.Query, specs []Spec) (domain.Query, bool) {
	var gpus, regions []string
	every, any := false, false
	for _, s := range specs {
		m, ok := s.Cond.(marketReader)
		if !ok {
			continue
		}
		n := m.reads()
		any = true
		every = every || len(n.Regions) == 0
		for _, g := range n.GPUs {
			if !slices.Contains(gpus, g) {
				gpus = append(gpus, g)
			}
		}
		for _, r := range n.Regions {
			if !slices.Contains(regions, r) {
				regions = append(regions, r)
			}
		}
	}
	if !any {
		return q, false
	}
	if every {
		regions = q.Regions // the config's, or every region
	}
	q.GPUs, q.Regions, q.Window = gpus, regions, time.Hour
	return q, true
}

func names(ds []domain.Descriptor) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return strings.Join(out, ", ")
}

func regionExamples(ds []domain.Descriptor) string {
	var ex []string
	for _, d := range ds {
		if d.RegionExample != "" && !slices.Contains(ex, d.RegionExample) {
			ex = append(ex, d.RegionExample)
		}
	}
	if len(ex) == 0 {
		return "us-east-1"
	}
	return strings.Join(ex, " or ")
}
