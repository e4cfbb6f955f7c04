package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// CheckFleetTerms refuses a fleet's size, split, strategy or max price
// that no launch accepts.
func CheckFleetTerms(spec domain.FleetSpec) error {
	err := spec.CheckTerms()
	var fe *domain.FleetError
	if errors.As(err, &fe) {
		return Usagef("--%s", fe)
	}
	return err
}

// FleetSpec puts spec in the query's one region and provider, scheduled
// by --start and --for, with config aws.launch_template by default.
func (a *App) FleetSpec(spec domain.FleetSpec, start, length string) (domain.FleetSpec, error) {
	var err error
	spec.Start, spec.End, err = domain.ParseFleetSchedule(start, length, a.s.Now())
	var fe *domain.FleetError
	if errors.As(err, &fe) {
		return spec, Usagef("--%s", fe)
	}
	q := a.s.Query
	if len(q.Regions) != 1 {
		return spec, Usagef("--region %s: a fleet is launched in exactly one region", strings.Join(q.Regions, ","))
	}
	if len(q.Providers) != 1 {
		return spec, Usagef("--provider %s: a fleet is launched by exactly one provider", strings.Join(q.Providers, ","))
	}
	spec.Provider, spec.Region = q.Providers[0], q.Regions[0]
	spec.LaunchTemplate = cmp.Or(spec.LaunchTemplate, a.s.Config.AWS.LaunchTemplate)
	return spec, nil
}

// CheckFleet refuses, before any estimate or question, what the provider's
// API would refuse (a launch template missing from the config, a count or
// schedule beyond its limits): it is the flags' or the config's to fix.
func (a *App) CheckFleet(ctx context.Context, spec domain.FleetSpec, timeout time.Duration) error {
	if err := a.checkFleetTypes(ctx, spec, timeout); err != nil {
		return err
	}
	p, err := a.Provider(ctx, spec.Provider)
	if err != nil {
		return err
	}
	if v, ok := p.(domain.FleetValidator); ok {
		if _, err := v.ValidateFleet(spec); err != nil {
			return Usagef("%v", FirstLine(err.Error()))
		}
	}
	return nil
}

// checkFleetTypes refuses types the fleet's region cannot launch: another
// cloud's, or ones its provider does not sell there.
func (a *App) checkFleetTypes(ctx context.Context, spec domain.FleetSpec, timeout time.Duration) error {
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
