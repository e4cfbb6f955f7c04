package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// CheckFleetTypes refuses, before any estimate or question, types the fleet's
// region cannot launch: another cloud's, or ones its provider does not sell there.
func (a *App) CheckFleetTypes(ctx context.Context, spec domain.FleetSpec, timeout time.Duration) error {
	clouds := a.table.RegionClouds(spec.Region)
	where := spec.Region + " is " + a.table.Article(clouds) + " region"
	if d := a.table.Describe(spec.Provider); d.Cloud != "" {
		clouds = []domain.Cloud{d.Cloud}
		where = "--provider " + spec.Provider + " launches " + a.table.CloudName(d.Cloud) + " ones"
	}
	models := map[string]bool{}
	for _, t := range spec.InstanceTypes {
		e, ok := domain.LookupGPU(t)
		if !ok {
			return Usagef("--instance-types: %q is not a GPU instance type gpumarket knows (such as p5.48xlarge or Standard_ND96isr_H100_v5)", t)
		}
		models[e.GPU.Model] = true
		if len(clouds) > 0 && !slices.Contains(clouds, e.Cloud) {
			return Usagef("--instance-types %s is %s instance type, but %s (%s)",
				t, a.table.Article([]domain.Cloud{e.Cloud}), where, a.table.SampleTypes(clouds[0], e.GPU.Model))
		}
	}
	p, err := a.Provider(ctx, spec.Provider)
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
		return Usagef("--instance-types %s: %s does not sell it in %s (it sells %s)", t, spec.Provider, spec.Region, has)
	}
	return nil
}

// soldTypes returns the region's instance types of the models, lower-case.
func soldTypes(ctx context.Context, p domain.Provider, region string, models map[string]bool, timeout time.Duration) (map[string]bool, error) {
	gpus := slices.Sorted(maps.Keys(models))
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := domain.Query{Providers: []string{p.Name()}, Regions: []string{region}, GPUs: gpus, Window: 6 * time.Hour}
	l, err := domain.ReadLatest(cctx, p, q, time.Now(), 6*time.Hour)
	if err == nil && l.Failed(region) {
		err = fmt.Errorf("%s: the region failed", region)
	}
	if err != nil {
		return nil, err
	}
	sold := map[string]bool{}
	for _, pl := range l.Pools {
		if pl.Region == region {
			sold[strings.ToLower(pl.InstanceType)] = true
		}
	}
	for k := range l.Prices {
		if k.Region == region {
			sold[strings.ToLower(k.InstanceType)] = true
		}
	}
	return sold, nil
}
