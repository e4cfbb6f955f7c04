package azure

import (
	"context"
	"testing"

	"github.com/gpumarket/gpumarket/domain"
)

// WatchFleet counts the scale set's VMs that run: an evicted spot VM
// stops counting while it is being deleted, and the regular base is not
// evicted.
func TestWatchFleetSeesEvictions(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, fleetOptions(f))
	ctx := context.Background()
	fl, err := p.LaunchFleet(ctx, domain.FleetSpec{Provider: "azure", Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4"},
		TargetCapacity: 4, OnDemandBase: 1, ClientToken: "led-9", Actor: "bob@host"})
	if err != nil {
		t.Fatal(err)
	}
	watch := func() int {
		t.Helper()
		n, err := p.WatchFleet(ctx, "eastus", fl.ID)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := watch(); n != 4 {
		t.Fatalf("launched: %d run, want 4", n)
	}
	if f.evict(fl.ID, 1, false) != 1 {
		t.Fatal("nothing evicted")
	}
	if n := watch(); n != 3 {
		t.Errorf("one VM being evicted: %d run, want 3", n)
	}
	if f.evict(fl.ID, 1, true) != 1 {
		t.Fatal("nothing evicted")
	}
	if n := watch(); n != 2 {
		t.Errorf("one being evicted, one gone: %d run, want 2", n)
	}
	if got := f.evict(fl.ID, 10, true); got != 1 {
		t.Errorf("evicted %d more, want the last spot VM only (one is regular)", got)
	}
	if n := watch(); n != 1 {
		t.Errorf("all spot VMs evicted: %d run, want the regular one", n)
	}
	if err := p.DeleteFleet(ctx, "eastus", fl.ID); err != nil {
		t.Fatal(err)
	}
	if n := watch(); n != 0 {
		t.Errorf("deleted: %d run", n)
	}
}
