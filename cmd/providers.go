package cmd

import (
	"context"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/azure"
	"github.com/gpumarket/gpumarket/cloud/gcp"
	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
)

// providerRow is one provider gpumarket can use: what it is (its
// descriptor, known before it is built, so flags can be checked against
// it) and how it is built from the settings.
type providerRow struct {
	desc  domain.Descriptor
	build func(ctx context.Context, e *env) (domain.Provider, error)
}

// providerTable is every provider gpumarket can use, in the order --help
// lists them. It is the one place that maps config to constructors:
// adding a provider is its package and a row here (plus its catalog rows
// and config section).
type providerTable []providerRow

// defaultProviders is the table of a normal run.
func defaultProviders() providerTable {
	return providerTable{
		{desc: sim.Descriptor, build: func(_ context.Context, e *env) (domain.Provider, error) {
			return sim.New(sim.Options{Seed: e.cfg.Sim.Seed, Now: e.now}), nil
		}},
		{desc: aws.Descriptor, build: func(ctx context.Context, e *env) (domain.Provider, error) {
			return aws.New(ctx, aws.Options{
				Regions: e.query.Regions, Profile: e.cfg.AWS.Profile, AdvisorURL: e.cfg.AWS.AdvisorURL,
				LaunchTemplate: e.cfg.AWS.LaunchTemplate, DataDir: e.dataDir, Logger: e.log,
			})
		}},
		{desc: azure.Descriptor, build: func(ctx context.Context, e *env) (domain.Provider, error) {
			// Without a subscription or a login the provider shows list
			// prices only; the short credential timeout keeps a machine
			// with no Azure identity from waiting on IMDS.
			a := e.cfg.Azure
			return azure.New(ctx, azure.Options{
				SubscriptionID: a.SubscriptionID, ResourceGroup: a.ResourceGroup, PricesURL: a.PricesURL,
				CredentialTimeout: 5 * time.Second, Logger: e.log,
				ImageID: a.ImageID, SubnetID: a.SubnetID, AdminUsername: a.AdminUsername, SSHPublicKey: a.SSHPublicKey,
			})
		}},
		{desc: gcp.Descriptor, build: func(ctx context.Context, e *env) (domain.Provider, error) {
			g := e.cfg.GCP
			return gcp.New(ctx, gcp.Options{Project: g.Project, CredentialsFile: g.CredentialsFile, Logger: e.log,
				Endpoints: gcp.Endpoints{Compute: g.Endpoints.Compute, Billing: g.Endpoints.Billing, Monitoring: g.Endpoints.Monitoring},
				Image:     g.Image, Subnetwork: g.Subnetwork, InstanceTemplate: g.InstanceTemplate, DiskGB: g.DiskGB})
		}},
	}
}

// lookup returns the row of the named provider.
func (t providerTable) lookup(name string) (providerRow, bool) {
	for _, r := range t {
		if r.desc.Name == name {
			return r, true
		}
	}
	return providerRow{}, false
}

// fallback is the source of a run that names none: the first simulated
// provider, so that gpumarket works with no account.
func (t providerTable) fallback() string {
	for _, r := range t {
		if r.desc.Simulated {
			return r.desc.Name
		}
	}
	return t[0].desc.Name
}

// names lists the providers' names, for messages and --provider.
func (t providerTable) names() []string {
	out := make([]string, len(t))
	for i, r := range t {
		out[i] = r.desc.Name
	}
	return out
}

// describe returns the descriptor of the named provider; a name not in
// the table gets one that names it and claims nothing.
func (t providerTable) describe(name string) domain.Descriptor {
	if r, ok := t.lookup(name); ok {
		return r.desc
	}
	return domain.Descriptor{Name: name}
}

// simulated reports whether any of the named providers is simulated.
func (t providerTable) simulated(names []string) bool {
	for _, n := range names {
		if t.describe(n).Simulated {
			return true
		}
	}
	return false
}

// checkRegions refuses a region filter that leaves a provider nothing to
// ask ("--provider aws --region eastus", "--region mars-1"): it would
// answer with no rows and no error. Mixed lists are fine: each provider
// takes its own.
func (t providerTable) checkRegions(names, regions []string) error {
	if len(regions) == 0 {
		return nil
	}
	for _, name := range names {
		d := t.describe(name)
		if d.IsRegion == nil {
			continue
		}
		found := false
		for _, r := range regions {
			if d.IsRegion(r) {
				found = true
				break
			}
		}
		if !found {
			return usagef("--region %s names no %s region (such as %s), so --provider %s would have nothing to show; add one or drop %s",
				strings.Join(regions, ","), name, d.RegionExample, name, name)
		}
	}
	return t.checkRegionsKnown(names, regions)
}

// checkCount refuses an instance count over what every kind of offering a
// provider sells holds (AWS capacity blocks: 64); terms with no such limit
// leave the count to the provider.
func (t providerTable) checkCount(n int, names []string) error {
	for _, name := range names {
		most := 0
		for _, terms := range t.describe(name).Sells {
			if terms.MaxInstances == 0 {
				most = 0
				break
			}
			most = max(most, terms.MaxInstances)
		}
		if most > 0 && n > most {
			return usagef("--count %d: %s sells blocks of 1 to %d instances", n, name, most)
		}
	}
	return nil
}

// checkDuration refuses a block duration that none of the terms a
// provider sells on accepts (AWS: days, then weeks; Azure's reservations
// and the simulated market, which sells those too: any whole hours).
func (t providerTable) checkDuration(d time.Duration, names []string) error {
	for _, name := range names {
		sells := t.describe(name).Sells
		if len(sells) == 0 {
			continue
		}
		var first error
		ok := false
		for _, terms := range sells {
			err := terms.ValidDuration(d)
			if err == nil {
				ok = true
				break
			}
			if first == nil {
				first = err
			}
		}
		if !ok {
			return usagef("--duration %s (%s)", strings.TrimPrefix(first.Error(), "duration "), name)
		}
	}
	return nil
}
