package cmd

import (
	"context"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/aws"
	"github.com/gpumarket/gpumarket/providers/azure"
	"github.com/gpumarket/gpumarket/providers/sim"
)

// buildProviders makes the named sources. Each cloud's case builds its
// client from e.cfg (and the standard credential chain of its SDK); a
// source that cannot be built is a runtime error naming it.
func buildProviders(ctx context.Context, e *env, names []string) ([]providers.Provider, error) {
	_ = ctx // the cloud cases load SDK config with it
	if err := checkRegionsFor(names, e.query.Regions); err != nil {
		return nil, err
	}
	var out []providers.Provider
	for _, name := range names {
		switch name {
		case "sim":
			out = append(out, sim.New(sim.Options{Seed: e.cfg.Sim.Seed}))

		case "aws":
			p, err := aws.New(ctx, aws.Options{
				Regions: e.query.Regions, Profile: e.cfg.AWS.Profile, AdvisorURL: e.cfg.AWS.AdvisorURL,
				LaunchTemplate: e.cfg.AWS.LaunchTemplate, DataDir: e.dataDir, Logger: e.log,
			})
			if err != nil {
				return nil, err
			}
			out = append(out, p)

		case "azure":
			// Without a subscription or a login the provider shows list
			// prices only; the short credential timeout keeps a machine
			// with no Azure identity from waiting on IMDS.
			a := e.cfg.Azure
			p, err := azure.New(ctx, azure.Options{
				SubscriptionID: a.SubscriptionID, ResourceGroup: a.ResourceGroup, PricesURL: a.PricesURL,
				CredentialTimeout: 5 * time.Second, Logger: e.log,
				ImageID: a.ImageID, SubnetID: a.SubnetID, AdminUsername: a.AdminUsername, SSHPublicKey: a.SSHPublicKey,
			})
			if err != nil {
				return nil, err
			}
			out = append(out, p)

		default:
			return nil, usagef("--provider: unknown or not yet available provider %q; want a comma list of %s", name, strings.Join(config.ProviderNames, ", "))
		}
	}
	return out, nil
}

// checkRegionsFor refuses a region filter that leaves a cloud provider
// nothing to ask ("--provider aws --region eastus"): it would answer with
// no rows and no error. Mixed lists are fine: each cloud takes its own.
func checkRegionsFor(names, regions []string) error {
	if len(regions) == 0 {
		return nil
	}
	for _, name := range names {
		var is func(string) bool
		var example string
		switch name {
		case "aws":
			is, example = aws.IsRegion, "us-east-1"
		case "azure":
			is, example = azure.IsRegion, "eastus"
		default:
			continue
		}
		found := false
		for _, r := range regions {
			if is(r) {
				found = true
				break
			}
		}
		if !found {
			return usagef("--region %s names no %s region (such as %s), so --provider %s would have nothing to show; add one or drop %s",
				strings.Join(regions, ","), name, example, name, name)
		}
	}
	return nil
}
