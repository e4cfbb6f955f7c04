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

// Limits of EC2 Fleet that a launch is checked against before any call
// ("Quotas for EC2 Fleet and Spot Fleet", EC2 User Guide; the API's
// counts are int32).
const (
	// MaxFleetTarget is the most instances one EC2 Fleet may target.
	MaxFleetTarget = 10000
	// MaxFleetPools is the most capacity pools (instance type × zone) a
	// fleet of type request or maintain may name.
	MaxFleetPools = 300
)

// tagFleetID is the tag EC2 Fleet puts on every instance it launches.
const tagFleetID = "aws:ec2:fleet-id"

// LaunchFleet launches a spot fleet with CreateFleet, tagged with
// domain.Tags (TagRef is the client token: the ledger row's id).
//
// A fleet to run now is of type "instant": one synchronous call that
// answers with the instances it launched and the errors of the pools it
// could not fill, so the ledger records exactly what was launched and the
// user sees "insufficient capacity" at once; it leaves no standing request
// that keeps launching (and billing) after gpumarket has exited. The price
// is that interrupted instances are not replaced.
//
// A scheduled fleet (spec.Start in the future, or an End) is of type
// "request": AWS documents ValidFrom, ValidUntil and
// TerminateInstancesWithExpiration for request and maintain fleets, not
// for instant ones. Request, not maintain: like instant it is a one-time
// request that does not replace interrupted Spot Instances, so the fleet
// bills no more than the one launched now would; AWS launches it at
// ValidFrom and, with TerminateInstancesWithExpiration, terminates its
// instances at ValidUntil, whether or not gpumarket is running. Its answer
// names only the fleet; its instances come at the start.
//
// Overrides are the instance types × zones of the spec (types alone when it
// names no zones); the spot part uses the spec's allocation strategy
// (price-capacity-optimized by default) and MaxPriceUSD caps each pool's
// price; OnDemandBase instances are on-demand. ClientToken makes a repeated
// launch return the first fleet rather than a second.
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

// createFleetInput is the CreateFleet request of a validated spec.
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
		// A request fleet can tag only itself; instances get the tags
		// of the launch template.
		in.TagSpecifications = tagSpecs(ec2types.ResourceTypeFleet, tags)
		if spec.Start.After(now) {
			in.ValidFrom = awssdk.Time(spec.Start.UTC().Truncate(time.Second))
		}
		if !spec.End.IsZero() {
			// Truncated, never rounded up: the fleet never ends later
			// than asked.
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

// ValidateFleet checks a fleet spec against what the provider and the EC2
// API take, without any call, and fills its defaults (the strategy, the
// launch template from the options). Errors match ErrInvalidSpec and
// domain.ErrDeclined; a count beyond the API's limits also matches
// domain.ErrInvalidQuery.
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

// describedFleet is a described fleet with its running instances counted.
// An instant fleet lists them (the model's FleetData.Instances is "Valid
// only when Type is set to instant"); a request or maintain fleet's
// running instances are those DescribeFleetInstances lists, or, when that
// call fails or the fleet is not active, its FulfilledCapacity (one unit
// per instance: gpumarket sets no weights).
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

// fleetOf is a described fleet, its instances not counted.
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

// activeInstances counts a request or maintain fleet's running instances
// (DescribeFleetInstances, which does not take instant fleets).
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

// FindFleet finds the fleet launched with a client token, so a launch whose
// answer was lost is settled instead of sent again. DescribeFleets has no
// client-token filter and lists a fleet of type instant only when asked
// for by id, so: the region's listed fleets (request and maintain) are
// paged through and matched; then the instances tagged with the token
// (TagRef, put on an instant fleet's instances at launch) name, in AWS's
// aws:ec2:fleet-id tag, the instant fleet to describe. It returns nil, nil
// when no fleet has the token.
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

// taggedFleetIDs pages through the instances matching the filter and
// returns the fleets that launched them, by AWS's aws:ec2:fleet-id tag.
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

// DeleteFleet deletes a fleet and terminates its instances (an instant
// fleet can only be deleted that way, and a forgotten GPU instance is the
// costliest mistake gpumarket could leave behind).
//
// DeleteFleets "might fail" for an instant fleet of more than 1,000
// instances (the model: "first terminate most of the instances manually,
// leaving 1000 or fewer"), so such a fleet's instances beyond 1,000 are
// terminated first, up to 1,000 per TerminateInstances call (its limit).
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

// maxInstantDelete is the most instances DeleteFleets is documented to
// delete with an instant fleet; also TerminateInstances' most ids a call.
const maxInstantDelete = 1000

// trimInstantFleet terminates an instant fleet's instances beyond
// maxInstantDelete; a fleet of another type, or of fewer instances, is
// left as it is.
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

// fleetState maps a fleet as AWS describes it onto the ledger's states,
// with a note of what the state leaves out. Its schedule decides first: a
// fleet before its ValidFrom is "scheduled" (AWS shows it active with
// nothing launched yet), one past its ValidUntil has "ended" (expired, its
// instances terminated with it). Otherwise: submitted, modifying and
// active are "active" (the fleet exists and may bill; the ledger's
// "pending" means a call in flight), the deleted states "deleted", failed
// "failed"; a state this version does not know is "active", noted, never
// the ledger's "unknown" (an answer that was lost).
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
