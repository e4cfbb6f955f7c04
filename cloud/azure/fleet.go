package azure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/gpumarket/gpumarket/domain"
)

// missingFleetConfig names the unset config keys a spot scale set needs.
func (p *Provider) missingFleetConfig() []string {
	var miss []string
	for _, k := range []struct{ key, v string }{{"azure.resource_group", p.opt.ResourceGroup}, {"azure.image_id", p.opt.ImageID},
		{"azure.subnet_id", p.opt.SubnetID}, {"azure.admin_username", p.opt.AdminUsername}, {"azure.ssh_public_key", p.opt.SSHPublicKey}} {
		if k.v == "" {
			miss = append(miss, k.key)
		}
	}
	return miss
}

// checkStrategy refuses what Azure has no counterpart of; one size leaves no allocation choice.
func checkStrategy(strategy string) error {
	switch strategy {
	case "", domain.StrategyPriceCapacityOptimized, domain.StrategyCapacityOptimized, domain.StrategyLowestPrice:
		return nil
	}
	return fmt.Errorf("strategy %q is not available on Azure: want %s, %s or %s",
		strategy, domain.StrategyPriceCapacityOptimized, domain.StrategyCapacityOptimized, domain.StrategyLowestPrice)
}

// fleetSizes drops repeated sizes and refuses several: an instance mix is
// documented for A, B, D, E and F families only, and GPU sizes are N-series
// (https://learn.microsoft.com/azure/virtual-machine-scale-sets/instance-mix-overview).
func fleetSizes(types []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, t := range types {
		t = strings.TrimSpace(t)
		if t == "" || seen[strings.ToLower(t)] {
			continue
		}
		seen[strings.ToLower(t)] = true
		out = append(out, t)
	}
	switch {
	case len(out) == 0:
		return nil, errors.New("no instance type: want one Azure GPU VM size such as Standard_NC24ads_A100_v4")
	case len(out) > 1:
		return nil, fmt.Errorf("%d VM sizes (%s): a scale set of several sizes is an instance mix, which Azure takes only for A, B, D, E and F family sizes, and GPU sizes are N-series: launch one fleet per size",
			len(out), strings.Join(out, ", "))
	}
	return out, nil
}

// imageReference reads a resource id or a URN "publisher:offer:sku:version".
func imageReference(image string) (*armcompute.ImageReference, error) {
	if strings.HasPrefix(image, "/") {
		return &armcompute.ImageReference{ID: to.Ptr(image)}, nil
	}
	parts := strings.Split(image, ":")
	if len(parts) == 4 && parts[0] != "" && parts[1] != "" && parts[2] != "" && parts[3] != "" {
		return &armcompute.ImageReference{Publisher: &parts[0], Offer: &parts[1], SKU: &parts[2], Version: &parts[3]}, nil
	}
	return nil, fmt.Errorf("azure.image_id %q: want an image resource id (/subscriptions/…) or a marketplace URN publisher:offer:sku:version", image)
}

// sshKey reads azure.ssh_public_key: the key itself or a file holding it.
func sshKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "ssh-") || strings.HasPrefix(v, "ecdsa-") {
		return v, nil
	}
	data, err := os.ReadFile(v)
	if err != nil {
		return "", fmt.Errorf("azure.ssh_public_key: neither a public key (ssh-ed25519 …, ssh-rsa …) nor a readable file: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

// scaleSet builds a fleet's scale set; the on-demand base is its
// PriorityMixPolicy, so one resource and Azure keeps the base on eviction
// (Flexible, as VirtualMachineScaleSet_Create_WithSpotPlusPriorityFlex.json).
func (p *Provider) scaleSet(spec domain.FleetSpec) (armcompute.VirtualMachineScaleSet, error) {
	img, err := imageReference(p.opt.ImageID)
	if err != nil {
		return armcompute.VirtualMachineScaleSet{}, err
	}
	key, err := sshKey(p.opt.SSHPublicKey)
	if err != nil {
		return armcompute.VirtualMachineScaleSet{}, err
	}
	maxPrice := -1.0 // up to the on-demand price: never evicted for price
	if spec.MaxPriceUSD != nil {
		maxPrice = *spec.MaxPriceUSD
	}
	user := p.opt.AdminUsername
	props := &armcompute.VirtualMachineScaleSetProperties{
		OrchestrationMode:        to.Ptr(armcompute.OrchestrationModeFlexible),
		PlatformFaultDomainCount: to.Ptr[int32](1),
		SinglePlacementGroup:     to.Ptr(false),
		PriorityMixPolicy: &armcompute.PriorityMixPolicy{
			BaseRegularPriorityCount:           to.Ptr(int32(spec.OnDemandBase)),
			RegularPriorityPercentageAboveBase: to.Ptr[int32](0),
		},
		VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
			Priority:       to.Ptr(armcompute.VirtualMachinePriorityTypesSpot),
			EvictionPolicy: to.Ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete),
			BillingProfile: &armcompute.BillingProfile{MaxPrice: &maxPrice},
			StorageProfile: &armcompute.VirtualMachineScaleSetStorageProfile{
				ImageReference: img,
				OSDisk: &armcompute.VirtualMachineScaleSetOSDisk{
					CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage),
					DeleteOption: to.Ptr(armcompute.DiskDeleteOptionTypesDelete),
				},
			},
			OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{
				ComputerNamePrefix: to.Ptr("gpum"),
				AdminUsername:      &user,
				LinuxConfiguration: &armcompute.LinuxConfiguration{
					DisablePasswordAuthentication: to.Ptr(true),
					SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
						Path: to.Ptr("/home/" + user + "/.ssh/authorized_keys"), KeyData: &key,
					}}},
				},
			},
			NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
				NetworkAPIVersion: to.Ptr(armcompute.NetworkAPIVersionTwoThousandTwenty1101),
				NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
					Name: to.Ptr("nic"),
					Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
						Primary: to.Ptr(true),
						IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{
							Name: to.Ptr("ip"),
							Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
								Primary: to.Ptr(true),
								Subnet:  &armcompute.APIEntityReference{ID: to.Ptr(p.opt.SubnetID)},
							},
						}},
					},
				}},
			},
		},
	}
	ss := armcompute.VirtualMachineScaleSet{
		Location:   to.Ptr(spec.Region),
		SKU:        &armcompute.SKU{Name: to.Ptr(spec.InstanceTypes[0]), Capacity: to.Ptr(int64(spec.TargetCapacity))},
		Properties: props,
		Tags:       azureTags(spec.ClientToken, spec.Actor, "", nil),
	}
	for _, z := range spec.Zones {
		ss.Zones = append(ss.Zones, to.Ptr(z))
	}
	return ss, nil
}

var _ interface {
	domain.FleetLauncher
	domain.FleetFinder
} = (*Provider)(nil)

// LaunchFleet creates a spot scale set of one size (evictions delete, MaxPrice
// or -1 for "up to on-demand"), named after the ClientToken so a retry updates
// it, tagged with the ledger row. DryRun validates locally (size, config,
// quotas): Azure has no dry run.
func (p *Provider) LaunchFleet(ctx context.Context, spec domain.FleetSpec) (domain.Fleet, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return domain.Fleet{}, refuse("azure fleet: %w (%v)", errNoAccount, err)
	}
	if miss := p.missingFleetConfig(); len(miss) > 0 {
		return domain.Fleet{}, refuse("azure fleet: a spot scale set needs these config keys, not set: %s", strings.Join(miss, ", "))
	}
	if !IsRegion(spec.Region) {
		return domain.Fleet{}, refuse("azure fleet: region %q: want an Azure region such as eastus", spec.Region)
	}
	types, err := fleetSizes(spec.InstanceTypes)
	if err != nil {
		return domain.Fleet{}, refuse("azure fleet: %w", err)
	}
	spec.InstanceTypes = types
	if err := checkStrategy(spec.Strategy); err != nil {
		return domain.Fleet{}, refuse("azure fleet: %w", err)
	}
	if spec.TargetCapacity <= 0 || spec.OnDemandBase < 0 || spec.OnDemandBase > spec.TargetCapacity {
		return domain.Fleet{}, refuse("azure fleet: target %d with on-demand base %d: want a positive target and a base from 0 to the target", spec.TargetCapacity, spec.OnDemandBase)
	}
	size, err := p.validateSize(ctx, c, spec.Region, types[0], spec.Zones)
	if err != nil {
		return domain.Fleet{}, refuse("azure fleet: %w", err)
	}
	ss, err := p.scaleSet(spec)
	if err != nil {
		return domain.Fleet{}, refuse("azure fleet: %w", err)
	}
	f := domain.Fleet{Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, EstimatedUSDh: p.estimate(ctx, c, spec)}
	if spec.DryRun {
		needs := append(needsOf(size, spec.OnDemandBase, false), needsOf(size, spec.TargetCapacity-spec.OnDemandBase, true)...)
		quota, err := p.checkQuota(ctx, c, spec.Region, needs)
		if err != nil {
			return domain.Fleet{}, refuse("azure fleet: %w", err)
		}
		f.DryRun = true
		f.Message = fmt.Sprintf("%s: %s offered in %s and not restricted; config complete; %s", NoDryRunMessage, size.Name, spec.Region, quota)
		return f, nil
	}
	name := resourceName(spec.ClientToken, fleetHash(spec))
	poller, err := c.vmss.BeginCreateOrUpdate(ctx, c.resGroup, name, ss, nil)
	if err != nil {
		return domain.Fleet{}, settle(fmt.Errorf("azure fleet: create scale set %s: %w", name, err))
	}
	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opt.PollFrequency})
	if err != nil {
		return domain.Fleet{}, settle(fmt.Errorf("azure fleet: scale set %s: %w", name, err))
	}
	f.ID = deref(resp.ID)
	f.State = "pending"
	if resp.Properties != nil {
		f.State = ledgerState(deref(resp.Properties.ProvisioningState))
	}
	f.Message = fmt.Sprintf("spot scale set %s: %d VMs, %d of them regular priority; evicted spot VMs are deleted", name, spec.TargetCapacity, spec.OnDemandBase)
	return f, nil
}

func fleetHash(spec domain.FleetSpec) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%v|%d|%d", spec.Region, spec.InstanceTypes, spec.TargetCapacity, spec.OnDemandBase)))
	return hex.EncodeToString(h[:6])
}

// estimate is the hourly cost from list prices (0 if unknown): base at on-demand, the rest at spot list.
func (p *Provider) estimate(ctx context.Context, c *armClients, spec domain.FleetSpec) float64 {
	sizes, err := p.sizesFor(ctx, c, spec.Region)
	if err != nil {
		return 0
	}
	prices, err := p.retailFor(ctx, spec.Region, sizes)
	if err != nil {
		return 0
	}
	rp, ok := prices[strings.ToLower(spec.InstanceTypes[0])]
	if !ok || rp.OnDemand == nil || rp.Spot == nil {
		return 0
	}
	return float64(spec.OnDemandBase)**rp.OnDemand + float64(spec.TargetCapacity-spec.OnDemandBase)**rp.Spot
}

// scaleSetID parses a scale set id, or a bare name in the configured group.
func (p *Provider) scaleSetID(c *armClients, id string) (rg, name string, err error) {
	if !strings.HasPrefix(id, "/") {
		if c.resGroup == "" {
			return "", "", errors.New("azure.resource_group is not set")
		}
		return c.resGroup, id, nil
	}
	rid, err := arm.ParseResourceID(id)
	if err != nil || !strings.EqualFold(rid.ResourceType.String(), "Microsoft.Compute/virtualMachineScaleSets") {
		return "", "", fmt.Errorf("%q is not a scale set resource id", id)
	}
	return rid.ResourceGroupName, rid.Name, nil
}

// DescribeFleet reads a scale set's state and provisioned VMs; one gone is "deleted".
func (p *Provider) DescribeFleet(ctx context.Context, region, id string) (domain.Fleet, error) {
	c, err := p.clients(ctx)
	if err != nil {
		return domain.Fleet{}, fmt.Errorf("azure fleet: %w (%v)", errNoAccount, err)
	}
	rg, name, err := p.scaleSetID(c, id)
	if err != nil {
		return domain.Fleet{}, fmt.Errorf("azure fleet: %w", err)
	}
	f := domain.Fleet{ID: id, Provider: Name, Region: region}
	got, err := c.vmss.Get(ctx, rg, name, nil)
	if isNotFound(err) {
		f.State = "deleted"
		return f, nil
	}
	if err != nil {
		return domain.Fleet{}, fmt.Errorf("azure fleet %s: %w", name, err)
	}
	if got.SKU != nil {
		f.Target = int(deref(got.SKU.Capacity))
	}
	if got.Properties != nil {
		f.State = ledgerState(deref(got.Properties.ProvisioningState))
	}
	view, err := c.vmss.GetInstanceView(ctx, rg, name, nil)
	if err != nil {
		return domain.Fleet{}, fmt.Errorf("azure fleet %s: instance view: %w", name, err)
	}
	if view.VirtualMachine != nil {
		for _, s := range view.VirtualMachine.StatusesSummary {
			if s != nil && strings.EqualFold(deref(s.Code), "ProvisioningState/succeeded") {
				f.Instances += int(deref(s.Count))
			}
		}
	}
	return f, nil
}

// DeleteFleet deletes a scale set and its VMs, or a reservation given its id, so
// the ledger ends both through one call; one already gone is fine.
func (p *Provider) DeleteFleet(ctx context.Context, region, id string) error {
	if strings.Contains(strings.ToLower(id), "/capacityreservationgroups/") {
		return p.DeleteBooking(ctx, id)
	}
	c, err := p.clients(ctx)
	if err != nil {
		return refuse("azure fleet: %w (%v)", errNoAccount, err)
	}
	rg, name, err := p.scaleSetID(c, id)
	if err != nil {
		return refuse("azure delete fleet: %w", err)
	}
	poller, err := c.vmss.BeginDelete(ctx, rg, name, nil)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return settle(fmt.Errorf("azure delete fleet %s: %w", name, err))
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.opt.PollFrequency}); err != nil && !isNotFound(err) {
		return settle(fmt.Errorf("azure delete fleet %s: %w", name, err))
	}
	return nil
}

// FindFleet finds the scale set named after the client token and tagged with it; nil, nil if none.
func (p *Provider) FindFleet(ctx context.Context, region, clientToken string) (*domain.Fleet, error) {
	if clientToken == "" {
		return nil, errors.New("azure fleet lookup: want the launch's client token")
	}
	c, err := p.clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("azure fleet lookup: %w (%v)", errNoAccount, err)
	}
	if c.resGroup == "" {
		return nil, errors.New("azure fleet lookup: azure.resource_group is not set")
	}
	name := resourceName(clientToken, "")
	got, err := c.vmss.Get(ctx, c.resGroup, name, nil)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("azure fleet lookup %s: %w", name, err)
	}
	if t := got.Tags[TagRef]; t == nil || *t != clientToken {
		return nil, nil // a scale set of that name that gpumarket did not make for this token
	}
	f, err := p.DescribeFleet(ctx, region, deref(got.ID))
	if err != nil {
		return nil, err
	}
	return &f, nil
}

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
	vms, err := listAll(ctx, c.vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{
		Filter: &filter, Expand: new(armcompute.ExpandTypeForListVMsInstanceView)}),
		func(p armcompute.VirtualMachinesClientListResponse) []*armcompute.VirtualMachine { return p.Value })
	if err != nil {
		return 0, fmt.Errorf("azure fleet %s: its VMs: %w", name, err)
	}
	n := 0
	for _, vm := range vms {
		if vm.Properties != nil && runs(vm.Properties.InstanceView) {
			n++
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
