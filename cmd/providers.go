package cmd

import (
	"context"
	"strings"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/sim"
)

// buildProviders makes the named sources. Each cloud's case builds its
// client from e.cfg (and the standard credential chain of its SDK); a
// source that cannot be built is a runtime error naming it.
func buildProviders(ctx context.Context, e *env, names []string) ([]providers.Provider, error) {
	_ = ctx // the cloud cases load SDK config with it
	var out []providers.Provider
	for _, name := range names {
		switch name {
		case "sim":
			out = append(out, sim.New(sim.Options{Seed: e.cfg.Sim.Seed}))

		// case "aws": added by the AWS provider's engineer (providers/aws).

		// case "azure": added by the Azure provider's engineer (providers/azure).

		default:
			return nil, usagef("--provider: unknown or not yet available provider %q; want a comma list of %s", name, strings.Join(config.ProviderNames, ", "))
		}
	}
	return out, nil
}
