package aws

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/domain"
)

// EC2 Fleet limits checked before any call ("Quotas for EC2 Fleet and Spot Fleet", EC2 User Guide).
const (
	// MaxFleetTarget is the most instances one EC2 Fleet may target.
	MaxFleetTarget = 10000
	// MaxFleetPools is the most pools (type × zone) a request or maintain fleet may name.
	MaxFleetPools = 300
)

const tagFleetID = "aws:ec2:fleet-id"

// LaunchFleet launches a spot fleet with CreateFleet; its client token is the
// ledger row's id, so a repeat returns the first fleet. A fleet to run now is
// "instant": one call answering what launched and what could not, no standing
// request billing after gpumarket exits. A scheduled one is "request", the type
// AWS documents ValidFrom/ValidUntil for, likewise not replacing interruptions.
func (p *Provider) LaunchFleet(ctx context.Context, spec domain.FleetSpec) (domain.Fleet, error) {
	if err := p.validateFleet(&spec); err != nil {
		return domain.Fleet{}, err
	}
	now := p.opt.Now()
	in := p.createFleetInput(spec, now)
	out, err := p.client(spec.Region).CreateFleet(ctx, in)
	if spec.DryRun {
		if apiCode(err) == "DryRunOperation" {
			return domain.Fleet{Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, DryRun: true,
				Message: "dry run: AWS says the fleet would launch" + scheduleNote(in)}, nil
		}
		if err == nil {
			return domain.Fleet{}, fmt.Errorf("aws: dry-run fleet in %s: AWS answered without DryRunOperation (fleet %s); delete it if it exists",
				spec.Region, awssdk.ToString(out.FleetId))
		}
		return domain.Fleet{}, explain(fmt.Errorf("aws: dry-run fleet in %s: %w", spec.Region, err))
	}
	if err != nil {
		return domain.Fleet{}, explain(fmt.Errorf("aws: create fleet in %s: %w", spec.Region, err))
	}
	f := domain.Fleet{ID: awssdk.ToString(out.FleetId), Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, State: "active"}
	if in.Type != ec2types.FleetTypeInstant {
		if f.ID == "" {
			return f, fmt.Errorf("aws: create fleet in %s: the answer names no fleet; look it up by its client token", spec.Region)
		}
		if in.ValidFrom != nil {
			f.State = "scheduled"
		}
		f.Message = fmt.Sprintf("fleet %s of %d instances requested%s", f.ID, f.Target, scheduleNote(in))
		return f, nil
	}
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

func (p *Provider) createFleetInput(spec domain.FleetSpec, now time.Time) *ec2.CreateFleetInput {
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
	tags := domain.Tags(spec.ClientToken, spec.Actor, "")
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
		SpotOptions:       &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategy(spec.Strategy)},
		DryRun:            awssdk.Bool(spec.DryRun),
		TagSpecifications: append(tagSpecs(ec2types.ResourceTypeFleet, tags), tagSpecs(ec2types.ResourceTypeInstance, tags)...),
	}
	if spec.OnDemandBase > 0 {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	if spec.ClientToken != "" {
		in.ClientToken = awssdk.String(spec.ClientToken)
	}
	if spec.Start.After(now) || !spec.End.IsZero() {
		in.Type = ec2types.FleetTypeRequest
		// A request fleet tags only itself; instances get the launch template's tags.
		in.TagSpecifications = tagSpecs(ec2types.ResourceTypeFleet, tags)
		if spec.Start.After(now) {
			in.ValidFrom = awssdk.Time(spec.Start.UTC().Truncate(time.Second))
		}
		if !spec.End.IsZero() {
			// Truncated: the fleet never ends later than asked.
			in.ValidUntil = awssdk.Time(spec.End.UTC().Truncate(time.Second))
			in.TerminateInstancesWithExpiration = awssdk.Bool(true)
		}
	}
	return in
}

func scheduleNote(in *ec2.CreateFleetInput) string {
	var s string
	if in.ValidFrom != nil {
		s += "; AWS launches it at " + in.ValidFrom.UTC().Format(time.RFC3339)
	}
	if in.ValidUntil != nil {
		s += "; AWS terminates its instances at " + in.ValidUntil.UTC().Format(time.RFC3339)
	}
	return s
}

// ValidateFleet checks a spec without a call and fills its defaults; errors
// match ErrInvalidSpec and domain.ErrDeclined.
func (p *Provider) ValidateFleet(spec domain.FleetSpec) (domain.FleetSpec, error) {
	err := p.validateFleet(&spec)
	return spec, err
}

func (p *Provider) validateFleet(spec *domain.FleetSpec) error {
	if spec.Region == "" {
		return specErrorf("aws: fleet: region is required")
	}
	if len(spec.InstanceTypes) == 0 {
		return specErrorf("aws: fleet: at least one instance type is required")
	}
	if spec.TargetCapacity < 1 {
		return specErrorf("aws: fleet: target %d: want at least 1 instance", spec.TargetCapacity)
	}
	if spec.TargetCapacity > MaxFleetTarget {
		return limitErrorf("aws: fleet: target %d: an EC2 Fleet targets at most %d instances (AWS's quota per fleet)", spec.TargetCapacity, MaxFleetTarget)
	}
	if spec.OnDemandBase < 0 || spec.OnDemandBase > spec.TargetCapacity {
		return specErrorf("aws: fleet: on-demand base %d: want 0 to the target (%d)", spec.OnDemandBase, spec.TargetCapacity)
	}
	if spec.Strategy == "" {
		spec.Strategy = domain.StrategyPriceCapacityOptimized
	}
	ok := false
	for _, s := range domain.Strategies {
		ok = ok || s == spec.Strategy
	}
	if !ok {
		return specErrorf("aws: fleet: strategy %q: want one of %s", spec.Strategy, strings.Join(domain.Strategies, ", "))
	}
	if spec.MaxPriceUSD != nil && (*spec.MaxPriceUSD <= 0 || math.IsNaN(*spec.MaxPriceUSD) || math.IsInf(*spec.MaxPriceUSD, 0)) {
		return specErrorf("aws: fleet: max price %g: want a positive USD per instance-hour", *spec.MaxPriceUSD)
	}
	now := p.opt.Now()
	if !spec.End.IsZero() {
		start := spec.Start
		if start.Before(now) {
			start = now
		}
		if !spec.End.After(start.Add(time.Minute)) {
			return specErrorf("aws: fleet: end %s: want a time after the start (%s)", spec.End.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))
		}
	}
	if pools := len(spec.InstanceTypes) * max(1, len(spec.Zones)); (spec.Start.After(now) || !spec.End.IsZero()) && pools > MaxFleetPools {
		return limitErrorf("aws: fleet: %d instance types × zones: a scheduled fleet names at most %d (AWS's quota of capacity pools per request fleet)", pools, MaxFleetPools)
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
func (p *Provider) DescribeFleet(ctx context.Context, region, id string) (domain.Fleet, error) {
	out, err := p.client(region).DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: []string{id}})
	if err != nil {
		return domain.Fleet{}, explain(fmt.Errorf("aws: describe fleet %s in %s: %w", id, region, err))
	}
	for _, fd := range out.Fleets {
		if awssdk.ToString(fd.FleetId) == id {
			return p.describedFleet(ctx, region, fd), nil
		}
	}
	return domain.Fleet{}, fmt.Errorf("aws: describe fleet %s in %s: no such fleet", id, region)
}

// describedFleet counts a fleet's running instances: an instant fleet lists them;
// another's come from DescribeFleetInstances, else FulfilledCapacity.
func (p *Provider) describedFleet(ctx context.Context, region string, fd ec2types.FleetData) domain.Fleet {
	f := p.fleetOf(region, fd)
	if fd.Type == ec2types.FleetTypeInstant {
		for _, inst := range fd.Instances {
			f.Instances += len(inst.InstanceIds)
		}
		return f
	}
	f.Instances = int(awssdk.ToFloat64(fd.FulfilledCapacity))
	if f.State != "active" {
		return f
	}
	n, err := p.activeInstances(ctx, region, f.ID)
	if err != nil {
		f.Message += " (running count from FulfilledCapacity: " + err.Error() + ")"
		return f
	}
	f.Instances = n
	return f
}

func (p *Provider) fleetOf(region string, fd ec2types.FleetData) domain.Fleet {
	state, note := fleetState(fd, p.opt.Now())
	f := domain.Fleet{ID: awssdk.ToString(fd.FleetId), Provider: Name, Region: region, State: state}
	if fd.TargetCapacitySpecification != nil {
		f.Target = int(awssdk.ToInt32(fd.TargetCapacitySpecification.TotalTargetCapacity))
	}
	f.Message = string(fd.FleetState)
	if note != "" {
		f.Message += " (" + note + ")"
	}
	return f
}

// activeInstances counts a request or maintain fleet's instances (not instant fleets).
func (p *Provider) activeInstances(ctx context.Context, region, id string) (int, error) {
	n := 0
	var token *string
	for {
		out, err := p.client(region).DescribeFleetInstances(ctx, &ec2.DescribeFleetInstancesInput{
			FleetId: awssdk.String(id), MaxResults: awssdk.Int32(1000), NextToken: token})
		if err != nil {
			return 0, err
		}
		n += len(out.ActiveInstances)
		if token = out.NextToken; awssdk.ToString(token) == "" {
			return n, nil
		}
	}
}

// FindFleet finds the fleet launched with a client token, nil, nil if none.
// DescribeFleets has no token filter and lists instant fleets only by id: listed
// fleets are matched, then instances tagged with the token name theirs.
func (p *Provider) FindFleet(ctx context.Context, region, clientToken string) (*domain.Fleet, error) {
	pages := ec2.NewDescribeFleetsPaginator(p.client(region), &ec2.DescribeFleetsInput{MaxResults: awssdk.Int32(1000)})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, explain(fmt.Errorf("aws: find fleet with client token %s in %s: %w", clientToken, region, err))
		}
		for _, fd := range out.Fleets {
			if awssdk.ToString(fd.ClientToken) == clientToken {
				f := p.describedFleet(ctx, region, fd)
				return &f, nil
			}
		}
	}
	ids, err := p.taggedFleetIDs(ctx, region, ec2types.Filter{Name: awssdk.String("tag:" + domain.TagRef), Values: []string{clientToken}})
	if err != nil {
		return nil, explain(fmt.Errorf("aws: find fleet with client token %s in %s: %w", clientToken, region, err))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := p.client(region).DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: ids})
	if err != nil {
		return nil, explain(fmt.Errorf("aws: find fleet with client token %s in %s: %w", clientToken, region, err))
	}
	for _, fd := range out.Fleets {
		if awssdk.ToString(fd.ClientToken) == clientToken {
			f := p.describedFleet(ctx, region, fd)
			return &f, nil
		}
	}
	return nil, nil
}

// taggedFleetIDs returns the fleets that launched the filter's instances.
func (p *Provider) taggedFleetIDs(ctx context.Context, region string, filter ec2types.Filter) ([]string, error) {
	pg := ec2.NewDescribeInstancesPaginator(p.client(region), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{filter}, MaxResults: awssdk.Int32(1000),
	})
	seen := map[string]bool{}
	for pg.HasMorePages() {
		out, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				if id, ok := tagValue(in.Tags, tagFleetID); ok && id != "" {
					seen[id] = true
				}
			}
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// DeleteFleet deletes a fleet and terminates its instances. DeleteFleets "might
// fail" for an instant fleet over 1,000 instances (the model), so those beyond
// are terminated first.
func (p *Provider) DeleteFleet(ctx context.Context, region, id string) error {
	if err := p.trimInstantFleet(ctx, region, id); err != nil {
		return explain(fmt.Errorf("aws: delete fleet %s in %s: %w", id, region, err))
	}
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

// maxInstantDelete: DeleteFleets' documented instant limit and TerminateInstances' ids per call.
const maxInstantDelete = 1000

// trimInstantFleet terminates an instant fleet's instances beyond maxInstantDelete.
func (p *Provider) trimInstantFleet(ctx context.Context, region, id string) error {
	out, err := p.client(region).DescribeFleets(ctx, &ec2.DescribeFleetsInput{FleetIds: []string{id}})
	if err != nil {
		return nil // DeleteFleets, asked next, says what is wrong
	}
	var ids []string
	for _, fd := range out.Fleets {
		if awssdk.ToString(fd.FleetId) != id || fd.Type != ec2types.FleetTypeInstant {
			continue
		}
		for _, inst := range fd.Instances {
			ids = append(ids, inst.InstanceIds...)
		}
	}
	for len(ids) > maxInstantDelete {
		n := min(maxInstantDelete, len(ids)-maxInstantDelete)
		if _, err := p.client(region).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[:n]}); err != nil {
			return fmt.Errorf("terminate %d of its %d instances before deleting it: %w", n, len(ids), err)
		}
		ids = ids[n:]
	}
	return nil
}

// fleetState maps a fleet onto the ledger's states, with a note: before
// ValidFrom scheduled, past ValidUntil ended; an unknown state is active.
func fleetState(fd ec2types.FleetData, now time.Time) (state, note string) {
	expired := fd.ValidUntil != nil && !now.Before(*fd.ValidUntil)
	switch fd.FleetState {
	case ec2types.FleetStateCodeSubmitted, ec2types.FleetStateCodeModifying, ec2types.FleetStateCodeActive:
		switch {
		case expired:
			return "ended", "past its end; AWS is expiring it"
		case fd.ValidFrom != nil && now.Before(*fd.ValidFrom):
			return "scheduled", "AWS launches it at " + fd.ValidFrom.UTC().Format(time.RFC3339)
		}
		return "active", ""
	case ec2types.FleetStateCodeDeleted, ec2types.FleetStateCodeDeletedTerminatingInstances:
		if expired {
			return "ended", ""
		}
		return "deleted", ""
	case ec2types.FleetStateCodeDeletedRunning:
		if expired {
			return "ended", "its instances were left running"
		}
		return "deleted", "its instances were left running"
	case ec2types.FleetStateCodeFailed:
		return "failed", ""
	}
	return "active", fmt.Sprintf("AWS state %q, which this version of gpumarket does not know", string(fd.FleetState))
}
