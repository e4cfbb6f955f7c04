package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws"
	"github.com/gpumarket/gpumarket/cloud/azure"
	"github.com/gpumarket/gpumarket/cloud/gcp"
	"github.com/gpumarket/gpumarket/cloud/sim"
	"github.com/gpumarket/gpumarket/domain"
)

// Row is one usable provider: its descriptor (known unbuilt) and its constructor.
type Row struct {
	Desc  domain.Descriptor
	Build func(ctx context.Context, s *Settings) (domain.Provider, error)
}

// Table is every usable provider in --help's order: adding one is its package
// and a row here.
type Table []Row

// DefaultTable is the table of a normal run.
func DefaultTable() Table {
	return Table{
		{Desc: sim.Descriptor, Build: func(_ context.Context, e *Settings) (domain.Provider, error) {
			return sim.New(sim.Options{Seed: e.Config.Sim.Seed, Now: e.Now}), nil
		}},
		{Desc: aws.Descriptor, Build: func(ctx context.Context, e *Settings) (domain.Provider, error) {
			return aws.New(ctx, aws.Options{
				Regions: e.Query.Regions, Profile: e.Config.AWS.Profile, AdvisorURL: e.Config.AWS.AdvisorURL,
				LaunchTemplate: e.Config.AWS.LaunchTemplate, DataDir: e.DataDir, Logger: e.Log,
			})
		}},
		{Desc: azure.Descriptor, Build: func(ctx context.Context, e *Settings) (domain.Provider, error) {
			// No subscription or login: list prices only; the short credential timeout
			// spares a machine with no Azure identity a wait on IMDS.
			a := e.Config.Azure
			return azure.New(ctx, azure.Options{
				SubscriptionID: a.SubscriptionID, ResourceGroup: a.ResourceGroup, PricesURL: a.PricesURL,
				CredentialTimeout: 5 * time.Second, Logger: e.Log,
				ImageID: a.ImageID, SubnetID: a.SubnetID, AdminUsername: a.AdminUsername, SSHPublicKey: a.SSHPublicKey,
			})
		}},
		{Desc: gcp.Descriptor, Build: func(ctx context.Context, e *Settings) (domain.Provider, error) {
			g := e.Config.GCP
			return gcp.New(ctx, gcp.Options{Project: g.Project, CredentialsFile: g.CredentialsFile, Logger: e.Log,
				Endpoints: gcp.Endpoints{Compute: g.Endpoints.Compute, Billing: g.Endpoints.Billing, Monitoring: g.Endpoints.Monitoring},
				Image:     g.Image, Subnetwork: g.Subnetwork, InstanceTemplate: g.InstanceTemplate, DiskGB: g.DiskGB})
		}},
	}
}

// Lookup returns the row of the named provider.
func (t Table) Lookup(name string) (Row, bool) {
	for _, r := range t {
		if r.Desc.Name == name {
			return r, true
		}
	}
	return Row{}, false
}

// Fallback is the first simulated provider: gpumarket works with no account.
func (t Table) Fallback() string {
	for _, r := range t {
		if r.Desc.Simulated {
			return r.Desc.Name
		}
	}
	return t[0].Desc.Name
}

// Names lists the providers' names.
func (t Table) Names() []string {
	out := make([]string, len(t))
	for i, r := range t {
		out[i] = r.Desc.Name
	}
	return out
}

// Describe returns name's descriptor; an unknown name gets one claiming nothing.
func (t Table) Describe(name string) domain.Descriptor {
	if r, ok := t.Lookup(name); ok {
		return r.Desc
	}
	return domain.Descriptor{Name: name}
}

// Simulated reports whether any of the named providers is simulated.
func (t Table) Simulated(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return t.Describe(n).Simulated })
}

// CheckRegions refuses a region filter that leaves a provider nothing to ask:
// it would answer with no rows and no error.
func (t Table) CheckRegions(names, regions []string) error {
	if len(regions) == 0 {
		return nil
	}
	for _, name := range names {
		if d := t.Describe(name); d.IsRegion != nil && !slices.ContainsFunc(regions, d.IsRegion) {
			return Usagef("--region %s names no %s region (such as %s), so --provider %s would have nothing to show; add one or drop %s",
				strings.Join(regions, ","), name, d.RegionExample, name, name)
		}
	}
	// A region no provider has would drop out unsaid.
	for _, r := range regions {
		known := false
		var examples []string
		for _, name := range names {
			d := t.Describe(name)
			if d.KnowsRegion(r) {
				known = true
				break
			}
			if d.RegionExample != "" {
				examples = append(examples, name+"'s are named such as "+d.RegionExample)
			}
		}
		if !known {
			return Usagef("--region %s: no provider in use has a region of that name (%s)", r, strings.Join(examples, "; "))
		}
	}
	return nil
}

// CheckCount refuses a count over what every kind of a provider's offering holds.
func (t Table) CheckCount(n int, names []string) error {
	for _, name := range names {
		most := 0
		for _, terms := range t.Describe(name).Sells {
			if terms.MaxInstances == 0 {
				most = 0
				break
			}
			most = max(most, terms.MaxInstances)
		}
		if most > 0 && n > most {
			return Usagef("--count %d: %s sells blocks of 1 to %d instances", n, name, most)
		}
	}
	return nil
}

// CheckDuration refuses a block length none of the providers' terms accept.
func (t Table) CheckDuration(d time.Duration, names []string) error {
	for _, name := range names {
		sells := t.Describe(name).Sells
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
			return Usagef("--duration %s (%s)", strings.TrimPrefix(first.Error(), "duration "), name)
		}
	}
	return nil
}

// RegionClouds returns the clouds whose real provider has the region.
func (t Table) RegionClouds(region string) []domain.Cloud {
	var out []domain.Cloud
	for _, r := range t {
		d := r.Desc
		if d.Simulated || d.Cloud == "" || d.IsRegion == nil || !d.IsRegion(region) {
			continue
		}
		out = append(out, d.Cloud)
	}
	return out
}

// CloudName is the cloud as users read it.
func (t Table) CloudName(c domain.Cloud) string {
	for _, r := range t {
		if r.Desc.Cloud == c {
			return r.Desc.CloudName()
		}
	}
	return string(c)
}

// SampleTypes names up to three of the cloud's types of model, for a message;
// where it has none of model, up to three of its GPU types.
func (t Table) SampleTypes(c domain.Cloud, model string) string {
	var of, all []string
	for _, e := range domain.CatalogEntries(c) {
		if all = append(all, e.InstanceType); e.GPU.Model == model {
			of = append(of, e.InstanceType)
		}
	}
	switch name := t.CloudName(c); {
	case len(of) > 0:
		return fmt.Sprintf("%s %s types: %s", name, model, strings.Join(of[:min(3, len(of))], ", "))
	case len(all) > 0:
		return fmt.Sprintf("%s has no %s type; its GPU types include %s", name, model, strings.Join(all[:min(3, len(all))], ", "))
	default:
		return fmt.Sprintf("gpumarket's catalog lists no %s instance type", name)
	}
}

// Article names a region's clouds with their article: "an Azure".
func (t Table) Article(clouds []domain.Cloud) string {
	names := make([]string, len(clouds))
	for i, c := range clouds {
		names[i] = t.CloudName(c)
	}
	if len(names) == 0 {
		return "a"
	}
	if strings.ContainsRune("AEIOUaeiou", rune(names[0][0])) {
		return "an " + strings.Join(names, " or ")
	}
	return "a " + strings.Join(names, " or ")
}

// LongestLead is the longest lead of the named providers' terms; ok is false
// when one sells with no limit to its start (an Azure reservation), or none sells.
func (t Table) LongestLead(names []string) (time.Duration, bool) {
	var most time.Duration
	for _, name := range names {
		sells := t.Describe(name).Sells
		if len(sells) == 0 {
			continue
		}
		lead := time.Duration(0)
		for _, terms := range sells {
			lead = max(lead, terms.MaxLead)
		}
		if lead == 0 {
			return 0, false
		}
		most = max(most, lead)
	}
	return most, most > 0
}

// SimBanner is said first wherever simulated prices are shown.
func (t Table) SimBanner() string {
	var real []string
	for _, r := range t {
		if !r.Desc.Simulated {
			real = append(real, r.Desc.Name)
		}
	}
	return "SIMULATED MARKET: prices are generated by gpumarket's simulator, not quoted by a cloud (use --provider " + orList(real) + " for real ones)"
}

func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
