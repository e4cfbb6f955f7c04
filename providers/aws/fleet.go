package aws

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/providers"
)

// LaunchFleet launches a spot fleet with CreateFleet of type "instant".
//
// Why instant rather than maintain/request: an instant fleet is one
// synchronous call that answers with the instances it launched and the
// errors of the pools it could not fill, so the ledger records exactly what
// was bought and the user sees "insufficient capacity" at once; it leaves
// no standing request that keeps launching (and billing) after gpumarket
// has exited. The price is that interrupted instances are not replaced —
// the user relaunches from the Fleet view.
//
// Overrides are the instance types × zones of the spec (types alone when it
// names no zones); the spot part uses the spec's allocation strategy
// (price-capacity-optimized by default) and MaxPriceUSD caps each pool's
// price; OnDemandBase instances are on-demand. ClientToken makes a repeated
// launch return the first fleet rather than a second.
func (p *Provider) LaunchFleet(ctx context.Context, spec providers.FleetSpec) (providers.Fleet, error) {
	if err := p.validateFleet(&spec); err != nil {
		return providers.Fleet{}, err
	}
	ltSpec := &ec2types.FleetLaunchTemplateSpecificationRequest{Version: awssdk.String("$Default")}
	if strings.HasPrefix(spec.LaunchTemplate, "lt-") {
		ltSpec.LaunchTemplateId = awssdk.String(spec.LaunchTemplate)
	} else {
		ltSpec.LaunchTemplateName = awssdk.String(spec.LaunchTemplate)
	}
	var maxPrice *string
	if spec.MaxPriceUSD != nil {
		maxPrice = awssdk.String(strconv.FormatFloat(*spec.MaxPriceUSD, 'f', -1, 64))
	}
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	zones := spec.Zones
	if len(zones) == 0 {
		zones = []string{""}
	}
	for _, t := range spec.InstanceTypes {
		for _, z := range zones {
			o := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(t), MaxPrice: maxPrice}
			if z != "" {
				o.AvailabilityZone = awssdk.String(z)
			}
			overrides = append(overrides, o)
		}
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: ltSpec, Overrides: overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       awssdk.Int32(int32(spec.TargetCapacity)),
			OnDemandTargetCapacity:    awssdk.Int32(int32(spec.OnDemandBase)),
			SpotTargetCapacity:        awssdk.Int32(int32(spec.TargetCapacity - spec.OnDemandBase)),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeSpot,
		},
		SpotOptions: &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategy(spec.Strategy)},
		DryRun:      awssdk.Bool(spec.DryRun),
	}
	if spec.OnDemandBase > 0 {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	if spec.ClientToken != "" {
		in.ClientToken = awssdk.String(spec.ClientToken)
	}
	out, err := p.client(spec.Region).CreateFleet(ctx, in)
	if spec.DryRun {
		if apiCode(err) == "DryRunOperation" {
			return providers.Fleet{Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, DryRun: true,
				Message: "dry run: AWS says the fleet would launch"}, nil
		}
		if err == nil {
			return providers.Fleet{}, fmt.Errorf("aws: dry-run fleet in %s: AWS answered without DryRunOperation (fleet %s); delete it if it exists",
				spec.Region, awssdk.ToString(out.FleetId))
		}
		return providers.Fleet{}, explain(fmt.Errorf("aws: dry-run fleet in %s: %w", spec.Region, err))
	}
	if err != nil {
		return providers.Fleet{}, explain(fmt.Errorf("aws: create fleet in %s: %w", spec.Region, err))
	}
	f := providers.Fleet{ID: awssdk.ToString(out.FleetId), Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, State: "active"}
	for _, inst := range out.Instances {
		f.Instances += len(inst.InstanceIds)
	}
	var msgs []string
	for _, e := range out.Errors {
		msgs = append(msgs, awssdk.ToString(e.ErrorCode)+": "+awssdk.ToString(e.ErrorMessage))
	}
	switch {
	case f.ID == "":
		return f, fmt.Errorf("aws: create fleet in %s launched nothing: %s", spec.Region, strings.Join(msgs, "; "))
	case f.Instances == 0:
		f.State = "failed"
	}
	f.Message = fmt.Sprintf("launched %d of %d instances", f.Instances, f.Target)
	if len(msgs) > 0 {
		f.Message += "; " + strings.Join(msgs, "; ")
	}
	return f, nil
}

func (p *Provider) validateFleet(spec *providers.FleetSpec) error {
	if spec.Region == "" {
		return specErrorf("aws: fleet: region is required")
	}
	if len(spec.InstanceTypes) == 0 {
		return specErrorf("aws: fleet: at least one instance type is required")
	}
	if spec.TargetCapacity < 1 {
		return specErrorf("aws: fleet: target %d: want at least 1 instance", spec.TargetCapacity)
	}
	if spec.OnDemandBase < 0 || spec.OnDemandBase > spec.TargetCapacity {
		return specErrorf("aws: fleet: on-demand base %d: want 0 to the target (%d)", spec.OnDemandBase, spec.TargetCapacity)
	}
	if spec.Strategy == "" {
		spec.Strategy = providers.StrategyPriceCapacityOptimized
	}
	ok := false
	for _, s := range providers.Strategies {
		ok = ok || s == spec.Strategy
	}
	if !ok {
		return specErrorf("aws: fleet: strategy %q: want one of %s", spec.Strategy, strings.Join(providers.Strategies, ", "))
	}
	if spec.MaxPriceUSD != nil && *spec.MaxPriceUSD <= 0 {
		return specErrorf("aws: fleet: max price %g: want a positive USD per instance-hour", *spec.MaxPriceUSD)
	}
	if spec.LaunchTemplate == "" {
		spec.LaunchTemplate = p.opt.LaunchTemplate
	}
	if spec.LaunchTemplate == "" {
		return specErrorf("aws: fleet: no launch template: set aws.launch_template in the config file (an id lt-… or a name)")
	}
	return nil
}

// DescribeFleet returns a fleet's state and running instances.
func (p *Provider) DescribeFleet(ctx context.Context, region, id string) (providers.Fleet, error) {
	out, err := p.client(region).DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: []string{id}})
	if err != nil {
		return providers.Fleet{}, explain(fmt.Errorf("aws: describe fleet %s in %s: %w", id, region, err))
	}
	for _, fd := range out.Fleets {
		if awssdk.ToString(fd.FleetId) != id {
			continue
		}
		f := providers.Fleet{ID: id, Provider: Name, Region: region, State: fleetState(fd.FleetState)}
		if fd.TargetCapacitySpecification != nil {
			f.Target = int(awssdk.ToInt32(fd.TargetCapacitySpecification.TotalTargetCapacity))
		}
		for _, inst := range fd.Instances {
			f.Instances += len(inst.InstanceIds)
		}
		f.Message = string(fd.FleetState)
		return f, nil
	}
	return providers.Fleet{}, fmt.Errorf("aws: describe fleet %s in %s: no such fleet", id, region)
}

// FindFleet finds the fleet launched with a client token, so a launch whose
// answer was lost is settled instead of sent again. DescribeFleets has no
// client-token filter: the region's fleets are paged through and matched.
// It returns nil, nil when no fleet has the token.
func (p *Provider) FindFleet(ctx context.Context, region, clientToken string) (*providers.Fleet, error) {
	pages := ec2.NewDescribeFleetsPaginator(p.client(region), &ec2.DescribeFleetsInput{MaxResults: awssdk.Int32(1000)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, explain(fmt.Errorf("aws: find fleet with client token %s in %s: %w", clientToken, region, err))
		}
		for _, fd := range out.Fleets {
			if awssdk.ToString(fd.ClientToken) != clientToken {
				continue
			}
			f, err := p.DescribeFleet(ctx, region, awssdk.ToString(fd.FleetId))
			if err != nil {
				return nil, err
			}
			return &f, nil
		}
	}
	return nil, nil
}

// DeleteFleet deletes a fleet and terminates its instances (an instant
// fleet can only be deleted that way, and a forgotten GPU instance is the
// costliest mistake gpumarket could leave behind).
func (p *Provider) DeleteFleet(ctx context.Context, region, id string) error {
	out, err := p.client(region).DeleteFleets(ctx, &ec2.DeleteFleetsInput{FleetIds: []string{id}, TerminateInstances: awssdk.Bool(true)})
	if err != nil {
		return explain(fmt.Errorf("aws: delete fleet %s in %s: %w", id, region, err))
	}
	for _, u := range out.UnsuccessfulFleetDeletions {
		if awssdk.ToString(u.FleetId) == id {
			msg := ""
			if u.Error != nil {
				msg = string(u.Error.Code) + ": " + awssdk.ToString(u.Error.Message)
			}
			return fmt.Errorf("aws: delete fleet %s in %s: %s", id, region, msg)
		}
	}
	for _, s := range out.SuccessfulFleetDeletions {
		if awssdk.ToString(s.FleetId) == id {
			return nil
		}
	}
	return fmt.Errorf("aws: delete fleet %s in %s: AWS did not confirm the deletion", id, region)
}

// fleetState maps AWS's fleet states onto the ledger's.
func fleetState(s ec2types.FleetStateCode) string {
	switch s {
	case "submitted", "modifying":
		return "pending"
	case "active":
		return "active"
	case "deleted", "deleted_running", "deleted_terminating":
		return "deleted"
	case "failed":
		return "failed"
	}
	return "unknown"
}
