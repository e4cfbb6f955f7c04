package azure

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
)

// WatchFleet counts a scale set's VMs that run and are not being evicted.
// A Flexible scale set's VMs are plain VMs: "Get instance view on
// individual VMs" (Azure, orchestration modes API comparison), listed by
// VirtualMachines_List with $filter 'virtualMachineScaleSet/id' eq '<id>'
// and $expand=instanceView. A VM counts while it is provisioned (or being
// made) and its power state is running or starting; a spot VM evicted
// with policy Delete reads ProvisioningState/deleting, then is gone, so
// an eviction shows whether or not the scale set's capacity follows it.
func (p *Provider) WatchFleet(ctx context.Context, region, id string) (int, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return 0, fmt.Errorf("azure fleet: %w (%v)", errNoAccount, err)
	}
	rg, name, err := p.scaleSetID(c, id)
	if err != nil {
		return 0, fmt.Errorf("azure fleet: %w", err)
	}
	full := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s", c.subID, rg, name)
	filter := fmt.Sprintf("'virtualMachineScaleSet/id' eq '%s'", full)
	pg := c.vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{
		Filter: &filter, Expand: new(armcompute.ExpandTypeForListVMsInstanceView)})
	n := 0
	for pg.More() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("azure fleet %s: its VMs: %w", name, err)
		}
		for _, vm := range page.Value {
			if vm != nil && vm.Properties != nil && runs(vm.Properties.InstanceView) {
				n++
			}
		}
	}
	return n, nil
}

// runs reads a VM's instance view: provisioned or being made, and
// running or starting.
func runs(v *armcompute.VirtualMachineInstanceView) bool {
	if v == nil {
		return false
	}
	provisioned, powered := false, false
	for _, s := range v.Statuses {
		if s == nil {
			continue
		}
		code := strings.ToLower(deref(s.Code))
		switch code {
		case "provisioningstate/succeeded", "provisioningstate/creating", "provisioningstate/updating":
			provisioned = true
		case "powerstate/running", "powerstate/starting":
			powered = true
		}
	}
	return provisioned && powered
}
