package app

import (
	"context"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
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

// A ledger row of a provider this run does not use (an AWS fleet seen from
// a run on the simulated market) is described by its row of the table, so
// views name its cloud and who keeps its schedule.
func TestBookingDescribesProvidersNotInUse(t *testing.T) {
	s := simSettings(t, domain.Query{Providers: []string{"sim"}})
	a := New(context.Background(), s, DefaultTable(), nil)
	defer a.Close()
	svc, err := a.Booking(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := svc.Describe("aws")
	if d.CloudName() != "AWS" || ledger.KeeperOf(d) != ledger.KeptByCloud {
		t.Errorf("aws not in use: %+v (kept by %q), want AWS's row, kept by the cloud", d, ledger.KeeperOf(d))
	}
	if d := svc.Describe("nosuch"); d.Name != "nosuch" || d.CloudName() != "" {
		t.Errorf("an unknown provider: %+v, want its name and nothing claimed", d)
	}
}

// A cloud the catalog has no row of (a provider of a new cloud) has no type
// to name: the refusal says so rather than trailing off after "include".
func TestSampleTypesOfACloudWithoutCatalogRows(t *testing.T) {
	acme := domain.Cloud("acme-cloud")
	tb := append(DefaultTable(), Row{Desc: domain.Descriptor{Name: "acme", Cloud: acme, CloudTitle: "Acme Cloud"}})
	if got, want := tb.SampleTypes(acme, "H100"), "gpumarket's catalog lists no Acme Cloud instance type"; got != want {
		t.Errorf("SampleTypes of a cloud without catalog rows = %q, want %q", got, want)
	}
	if got := tb.SampleTypes(domain.CloudAzure, "L4"); !strings.HasPrefix(got, "Azure has no L4 type; its GPU types include Standard_") {
		t.Errorf("SampleTypes of a model the cloud lacks = %q, want some of its types named", got)
	}
	if got := tb.SampleTypes(domain.CloudAzure, "A100"); !strings.HasPrefix(got, "Azure A100 types: Standard_N") {
		t.Errorf("SampleTypes of a model the cloud has = %q, want its types of it", got)
	}
}
