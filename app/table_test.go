package app

import (
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/config"
)

// TestProviderTableMatchesConfig: the names a config file may give are
// the table's, so a provider added to one is added to the other.
func TestProviderTableMatchesConfig(t *testing.T) {
	names := DefaultTable().Names()
	if err := (config.Config{Providers: names}).CheckProviders(names); err != nil {
		t.Errorf("the table's own names refused: %v", err)
	}
	if err := (config.Config{Providers: []string{"oci"}}).CheckProviders(names); err == nil || !strings.Contains(err.Error(), strings.Join(names, ", ")) {
		t.Errorf("an unknown provider: %v; want it refused, naming %v", err, names)
	}
	for _, r := range DefaultTable() {
		if r.Build == nil || r.Desc.Name == "" {
			t.Errorf("row %+v has no name or constructor", r.Desc)
		}
	}
	if DefaultTable().Fallback() != "sim" {
		t.Errorf("with no provider named, the source is %q, want the simulated market", DefaultTable().Fallback())
	}
}
