package cmd

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// checkRegionsKnown refuses a region no provider in use has: it would drop out unsaid.
func (t providerTable) checkRegionsKnown(names, regions []string) error {
	for _, r := range regions {
		known := false
		var examples []string
		for _, name := range names {
			d := t.describe(name)
			if d.KnowsRegion(r) {
				known = true
				break
			}
			if d.RegionExample != "" {
				examples = append(examples, name+"'s are named such as "+d.RegionExample)
			}
		}
		if !known {
			return usagef("--region %s: no provider in use has a region of that name (%s)", r, strings.Join(examples, "; "))
		}
	}
	return nil
}

// regionClouds returns the clouds whose real provider has the region.
func (t providerTable) regionClouds(region string) []domain.Cloud {
	var out []domain.Cloud
	for _, r := range t {
		d := r.desc
		if d.Simulated || d.Cloud == "" || d.IsRegion == nil || !d.IsRegion(region) {
			continue
		}
		out = append(out, d.Cloud)
	}
	return out
}

// cloudName is the cloud as users read it, from its provider's row.
func (t providerTable) cloudName(c domain.Cloud) string {
	for _, r := range t {
		if r.desc.Cloud == c {
			return r.desc.CloudName()
		}
	}
	return string(c)
}

// checkFleetTypes refuses, before any estimate or question, types the fleet's
// region cannot launch: another cloud's, or ones its provider does not sell there.
func (a *app) checkFleetTypes(ctx context.Context, spec domain.FleetSpec, timeout time.Duration) error {
	clouds := a.table.regionClouds(spec.Region)
	where := spec.Region + " is " + a.table.article(clouds) + " region"
	if d := a.table.describe(spec.Provider); d.Cloud != "" {
		clouds = []domain.Cloud{d.Cloud}
		where = "--provider " + spec.Provider + " launches " + a.table.cloudName(d.Cloud) + " ones"
	}
	models := map[string]bool{}
	for _, t := range spec.InstanceTypes {
		e, ok := domain.LookupGPU(t)
		if !ok {
			return usagef("--instance-types: %q is not a GPU instance type gpumarket knows (such as p5.48xlarge or Standard_ND96isr_H100_v5)", t)
		}
		models[e.GPU.Model] = true
		if len(clouds) > 0 && !slices.Contains(clouds, e.Cloud) {
			return usagef("--instance-types %s is %s instance type, but %s (%s)",
				t, a.table.article([]domain.Cloud{e.Cloud}), where, a.table.sampleTypes(clouds[0], e.GPU.Model))
		}
	}
	p, err := a.provider(ctx, spec.Provider)
	if err != nil {
		return err
	}
	sold, err := soldTypes(ctx, p, spec.Region, models, timeout)
	if err != nil {
		return nil
	}
	for _, t := range spec.InstanceTypes {
		if sold[strings.ToLower(t)] {
			continue
		}
		var list []string
		for k := range sold {
			list = append(list, k)
		}
		sort.Strings(list)
		has := "none of these GPUs there"
		if len(list) > 0 {
			has = strings.Join(list, ", ") + " there"
		}
		return usagef("--instance-types %s: %s does not sell it in %s (it sells %s)", t, spec.Provider, spec.Region, has)
	}
	return nil
}

// soldTypes returns the region's instance types of the models, lower-case.
func soldTypes(ctx context.Context, p domain.Provider, region string, models map[string]bool, timeout time.Duration) (map[string]bool, error) {
	var gpus []string
	for m := range models {
		gpus = append(gpus, m)
	}
	sort.Strings(gpus)
	now := time.Now()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	sold := map[string]bool{}
	failed := false
	err := p.Fetch(cctx, domain.FetchRequest{
		Query: domain.Query{Providers: []string{p.Name()}, Regions: []string{region}, GPUs: gpus, Window: 6 * time.Hour},
		Since: now.Add(-6 * time.Hour), Until: now, Backfill: true, Aside: true,
	}, func(ev domain.Event) {
		// The sink runs on several goroutines and may not keep an event's slices.
		mu.Lock()
		defer mu.Unlock()
		if ev.Err != nil && (ev.Region == "" || ev.Region == region) {
			failed = true
		}
		for _, pl := range ev.Pools {
			if pl.Region == region {
				sold[strings.ToLower(pl.InstanceType)] = true
			}
		}
		for _, h := range ev.Histories {
			if h.Pool.Region == region {
				sold[strings.ToLower(h.Pool.InstanceType)] = true
			}
		}
		for _, pt := range ev.Points {
			if pt.Pool.Region == region {
				sold[strings.ToLower(pt.Pool.InstanceType)] = true
			}
		}
	})
	if err == nil && failed {
		err = fmt.Errorf("%s: the region failed", region)
	}
	if err != nil {
		return nil, err
	}
	return sold, nil
}

// sampleTypes names up to three of the cloud's types with the model, for a message.
func (t providerTable) sampleTypes(c domain.Cloud, model string) string {
	var out []string
	for _, e := range domain.CatalogEntries(c) {
		if e.GPU.Model == model {
			out = append(out, e.InstanceType)
		}
	}
	head := fmt.Sprintf("%s %s types: ", t.cloudName(c), model)
	if len(out) == 0 {
		// None of that GPU: say so, rather than list others under its name.
		head = fmt.Sprintf("%s has no %s type; its GPU types include ", t.cloudName(c), model)
		for _, e := range domain.CatalogEntries(c) {
			out = append(out, e.InstanceType)
		}
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return head + strings.Join(out, ", ")
}

// article names a region's clouds with their article: "an Azure".
func (t providerTable) article(clouds []domain.Cloud) string {
	names := make([]string, len(clouds))
	for i, c := range clouds {
		names[i] = t.cloudName(c)
	}
	if len(names) == 0 {
		return "a"
	}
	if strings.ContainsRune("AEIOUaeiou", rune(names[0][0])) {
		return "an " + strings.Join(names, " or ")
	}
	return "a " + strings.Join(names, " or ")
}
