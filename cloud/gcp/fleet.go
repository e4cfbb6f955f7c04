package gcp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/api/compute/v1"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// A fleet is Spot VMs from one regional bulk insert (a second for the on-demand
// base), labelled with its id: one call with a requestId, replacing nothing,
// unlike a managed instance group.
const (
	labelFleet = "gpumarket-fleet"
	labelRef   = "gpumarket-ref"
	labelActor = "gpumarket-actor"
	labelTool  = "gpumarket-tool"
	// Name patterns of the two bulk inserts: -s- Spot, -o- on-demand.
	spotMark, odMark = "-s-", "-o-"
)

// FleetID is the id of the fleet a launch with this client token makes.
func FleetID(token string) string { return resourceName("gpumarket", token) }

// ValidateFleet checks a spec against bulk insert without a call and fills the default strategy.
func (p *Provider) ValidateFleet(spec domain.FleetSpec) (domain.FleetSpec, error) {
	if !IsRegion(spec.Region) {
		return spec, fmt.Errorf("region %q: want a Google Cloud region such as us-central1", spec.Region)
	}
	if _, _, err := fleetTypes(spec.InstanceTypes); err != nil {
		return spec, err
	}
	if spec.TargetCapacity < 1 || spec.OnDemandBase < 0 || spec.OnDemandBase > spec.TargetCapacity {
		return spec, fmt.Errorf("target %d with on-demand base %d: want a target of at least 1 and a base from 0 to the target", spec.TargetCapacity, spec.OnDemandBase)
	}
	if spec.MaxPriceUSD != nil {
		return spec, errors.New("--max-price: Google Spot VMs take no maximum price (their price changes at most once a month); drop it")
	}
	switch spec.Strategy {
	case "":
		spec.Strategy = domain.StrategyPriceCapacityOptimized
	case domain.StrategyPriceCapacityOptimized, domain.StrategyCapacityOptimized, domain.StrategyLowestPrice, domain.StrategyDiversified:
	default:
		return spec, fmt.Errorf("strategy %q: want one of %s", spec.Strategy, strings.Join(domain.Strategies, ", "))
	}
	for _, z := range spec.Zones {
		if regionOf(z) != spec.Region {
			return spec, fmt.Errorf("zone %q is not in %s: want a zone such as %s-a", z, spec.Region, spec.Region)
		}
	}
	if p.opt.Image == "" && p.opt.InstanceTemplate == "" {
		return spec, errors.New("gcp fleets need a boot image: set gcp.image (such as projects/debian-cloud/global/images/family/debian-12) or gcp.instance_template")
	}
	return spec, spec.CheckSchedule(p.now())
}

// fleetTypes reads a fleet's machines: several accelerator-optimised types, or one N1 type with cards.
func fleetTypes(types []string) (bases []string, accel *compute.AcceleratorConfig, err error) {
	for _, t := range types {
		if e, ok := domain.LookupGPU(t); !ok || e.Cloud != domain.CloudGCP {
			return nil, nil, fmt.Errorf("machine %q: want a Google GPU machine type such as a3-highgpu-8g, g2-standard-8 or n1-standard-8+1xt4", t)
		}
		base, n, card, err := ParseType(t)
		if err != nil {
			return nil, nil, err
		}
		if n > 0 {
			if len(types) > 1 {
				return nil, nil, fmt.Errorf("machine %q: an N1 type with cards is launched alone (the cards are the whole request's): launch one fleet per type", t)
			}
			accel = &compute.AcceleratorConfig{AcceleratorType: card, AcceleratorCount: n}
		}
		bases = append(bases, base)
	}
	if len(bases) == 0 {
		return nil, nil, errors.New("no machine type: want one such as a3-highgpu-8g")
	}
	return bases, accel, nil
}

// LaunchFleet bulk-inserts Spot VMs (terminated by deletion) and the on-demand
// base; an end is set on the VMs (terminationTime), kept without gpumarket. No
// dry run: a dry run checks the types against the region.
func (p *Provider) LaunchFleet(ctx context.Context, spec domain.FleetSpec) (domain.Fleet, error) {
	spec, err := p.ValidateFleet(spec)
	if err != nil {
		return domain.Fleet{}, fmt.Errorf("%w: %v", domain.ErrDeclined, err)
	}
	zones, err := p.fleetZones(ctx, spec)
	if err != nil {
		return domain.Fleet{}, err
	}
	id := FleetID(spec.ClientToken)
	f := domain.Fleet{ID: id, Provider: Name, Region: spec.Region, Target: spec.TargetCapacity}
	if spec.DryRun {
		f.DryRun = true
		f.Message = fmt.Sprintf("Compute Engine has no dry run for bulk insert: %s is sold in %s", strings.Join(spec.InstanceTypes, ", "), strings.Join(zones, ", "))
		return f, nil
	}
	parts := []struct {
		n     int
		spot  bool
		mark  string
		label string
	}{{spec.TargetCapacity - spec.OnDemandBase, true, spotMark, "spot"}, {spec.OnDemandBase, false, odMark, "on-demand"}}
	var made []string
	for _, part := range parts {
		if part.n == 0 {
			continue
		}
		res, err := p.bulkRequest(spec, id, zones, part.n, part.spot, part.mark)
		if err != nil {
			return f, err
		}
		what := fmt.Sprintf("bulk insert of %d %s VMs in %s", part.n, part.label, spec.Region)
		op, err := p.compute.RegionInstances.BulkInsert(p.project, spec.Region, res).RequestId(requestID(spec.ClientToken, part.label)).Context(ctx).Do()
		if err != nil {
			return f, apiErr(what, err)
		}
		if op, err = p.wait(ctx, what, op); err != nil {
			return f, err
		}
		made = append(made, fmt.Sprintf("%d of %d %s", createdVMs(op), part.n, part.label))
	}
	d, err := p.DescribeFleet(ctx, spec.Region, id)
	if err != nil {
		d = f
		d.State = "active"
	}
	d.Message = "bulk insert made " + strings.Join(made, " and ") + " VMs"
	return d, nil
}

func createdVMs(op *compute.Operation) int64 {
	var n int64
	if op.InstancesBulkInsertOperationMetadata != nil {
		for _, s := range op.InstancesBulkInsertOperationMetadata.PerLocationStatus {
			n += s.CreatedVmCount
		}
	}
	return n
}

// fleetZones are the region's zones selling every type (among the fleet's own, if named).
func (p *Provider) fleetZones(ctx context.Context, spec domain.FleetSpec) ([]string, error) {
	ms, err := p.machines(ctx)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, t := range spec.InstanceTypes {
		for _, m := range ms {
			if m.Type == t && regionOf(m.Zone) == spec.Region && (len(spec.Zones) == 0 || slices.Contains(spec.Zones, m.Zone)) {
				count[m.Zone]++
			}
		}
	}
	var zones []string
	for z, n := range count {
		if n > 0 {
			zones = append(zones, z)
		}
	}
	sort.Strings(zones)
	if len(zones) == 0 {
		return nil, fmt.Errorf("gcp: %w: %s is not sold in %s", domain.ErrDeclined, strings.Join(spec.InstanceTypes, ", "), spec.Region)
	}
	return zones, nil
}

// bulkRequest is one bulk insert of n VMs.
func (p *Provider) bulkRequest(spec domain.FleetSpec, id string, zones []string, n int, spot bool, mark string) (*compute.BulkInsertInstanceResource, error) {
	bases, accel, err := fleetTypes(spec.InstanceTypes)
	if err != nil {
		return nil, err
	}
	sched := &compute.Scheduling{OnHostMaintenance: "TERMINATE", AutomaticRestart: new(bool), ProvisioningModel: "STANDARD"}
	if spot {
		sched.ProvisioningModel, sched.InstanceTerminationAction = "SPOT", "DELETE"
	}
	if !spec.End.IsZero() {
		sched.TerminationTime, sched.InstanceTerminationAction = spec.End.UTC().Format(time.RFC3339), "DELETE"
	}
	// The description keeps the row id and actor exactly, as labels cannot.
	props := &compute.InstanceProperties{
		MachineType: bases[0],
		Scheduling:  sched,
		Description: describeTags(domain.Tags(spec.ClientToken, spec.Actor, "")),
		Labels: map[string]string{labelFleet: id, labelRef: labelValue(spec.ClientToken), labelTool: domain.ToolName,
			labelActor: labelValue(spec.Actor)},
	}
	if accel != nil {
		props.GuestAccelerators = []*compute.AcceleratorConfig{accel}
	}
	if p.opt.InstanceTemplate == "" {
		props.Disks = []*compute.AttachedDisk{{Boot: true, AutoDelete: true,
			InitializeParams: &compute.AttachedDiskInitializeParams{SourceImage: p.opt.Image, DiskSizeGb: p.opt.DiskGB}}}
		ni := &compute.NetworkInterface{Network: "global/networks/default"}
		if p.opt.Subnetwork != "" {
			ni = &compute.NetworkInterface{Subnetwork: p.opt.Subnetwork}
		}
		props.NetworkInterfaces = []*compute.NetworkInterface{ni}
	}
	res := &compute.BulkInsertInstanceResource{
		Count: int64(n), MinCount: 1, NamePattern: id + mark + "####",
		InstanceProperties: props, SourceInstanceTemplate: p.opt.InstanceTemplate,
		LocationPolicy: &compute.LocationPolicy{TargetShape: "ANY", Locations: map[string]compute.LocationPolicyLocation{}},
	}
	if spec.Strategy == domain.StrategyDiversified {
		res.LocationPolicy.TargetShape = "BALANCED"
	}
	for _, z := range zones {
		res.LocationPolicy.Locations["zones/"+z] = compute.LocationPolicyLocation{Preference: "ALLOW"}
	}
	if len(bases) > 1 {
		sel := map[string]compute.InstanceFlexibilityPolicyInstanceSelection{}
		for i, b := range bases {
			sel[fmt.Sprintf("pick-%d", i)] = compute.InstanceFlexibilityPolicyInstanceSelection{MachineTypes: []string{b}, Rank: int64(i + 1)}
		}
		res.InstanceFlexibilityPolicy = &compute.InstanceFlexibilityPolicy{InstanceSelections: sel}
	}
	return res, nil
}

// labelledVMs lists the project's VMs whose label key has the value, in every zone.
func (p *Provider) labelledVMs(ctx context.Context, key, value string) ([]*compute.Instance, error) {
	var out []*compute.Instance
	err := p.compute.Instances.AggregatedList(p.project).Filter(fmt.Sprintf(`labels.%s = "%s"`, key, value)).
		Pages(ctx, func(l *compute.InstanceAggregatedList) error {
			for _, sl := range l.Items {
				out = append(out, sl.Instances...)
			}
			return nil
		})
	return out, err
}

// fleetVMs lists the fleet's VMs by label across the region.
func (p *Provider) fleetVMs(ctx context.Context, region, id string) ([]*compute.Instance, error) {
	vms, err := p.labelledVMs(ctx, labelFleet, id)
	if err != nil {
		return nil, apiErr("list the VMs of fleet "+id, err)
	}
	return slices.DeleteFunc(vms, func(in *compute.Instance) bool { return regionOf(path.Base(in.Zone)) != region }), nil
}

// DescribeFleet counts the fleet's running VMs at the catalog's Spot or on-demand rate.
func (p *Provider) DescribeFleet(ctx context.Context, region, id string) (domain.Fleet, error) {
	vms, err := p.fleetVMs(ctx, region, id)
	if err != nil {
		return domain.Fleet{}, err
	}
	f := domain.Fleet{ID: id, Provider: Name, Region: region, State: "ended", Target: len(vms)}
	book, _ := p.priceBook(ctx)
	for _, in := range vms {
		switch in.Status {
		case "PROVISIONING", "STAGING", "RUNNING":
			f.Instances++
			if book != nil {
				if m, err := p.machineOf(ctx, path.Base(in.Zone), typeOf(in)); err == nil {
					if usd := book.price(m, strings.Contains(in.Name, spotMark)); !math.IsNaN(usd) {
						f.EstimatedUSDh += usd
					}
				}
			}
		}
	}
	if f.Instances > 0 {
		f.State = "active"
	}
	f.Message = fmt.Sprintf("%d of %d VMs running", f.Instances, len(vms))
	return f, nil
}

// typeOf names an instance's machine as gpumarket does.
func typeOf(in *compute.Instance) string {
	t := path.Base(in.MachineType)
	for _, g := range in.GuestAccelerators {
		for _, a := range accelerators {
			if path.Base(g.AcceleratorType) == a.name {
				t = fmt.Sprintf("%s+%dx%s", t, g.AcceleratorCount, a.short)
			}
		}
	}
	return t
}

// DeleteFleet deletes every VM of the fleet and waits for the deletions.
func (p *Provider) DeleteFleet(ctx context.Context, region, id string) error {
	vms, err := p.fleetVMs(ctx, region, id)
	if err != nil {
		return err
	}
	errs := make([]error, len(vms))
	fanout.Each(len(vms), 8, func(i int) {
		in := vms[i]
		what := "delete VM " + in.Name + " of fleet " + id
		op, err := p.compute.Instances.Delete(p.project, path.Base(in.Zone), in.Name).RequestId(requestID(id, "delete "+in.Name)).Context(ctx).Do()
		if err != nil {
			if !notFound(err) {
				errs[i] = apiErr(what, err)
			}
			return
		}
		_, errs[i] = p.wait(ctx, what, op)
	})
	return errors.Join(errs...)
}

// FindFleet settles a lost launch: the VMs by label, else the bulk insert's
// operation by requestId (clientOperationId).
func (p *Provider) FindFleet(ctx context.Context, region, clientToken string) (*domain.Fleet, error) {
	id := FleetID(clientToken)
	f, err := p.DescribeFleet(ctx, region, id)
	if err != nil {
		return nil, err
	}
	if f.Target > 0 {
		return &f, nil
	}
	for _, part := range []string{"spot", "on-demand"} {
		var found *compute.Operation
		err := p.compute.RegionOperations.List(p.project, region).Filter(fmt.Sprintf(`clientOperationId = "%s"`, requestID(clientToken, part))).
			Pages(ctx, func(l *compute.OperationList) error {
				if len(l.Items) > 0 && found == nil {
					found = l.Items[0]
				}
				return nil
			})
		if err != nil {
			return nil, apiErr("look up the bulk insert of fleet "+id, err)
		}
		if found != nil {
			// The launch was made: its operation says how it ended.
			if _, err := p.wait(ctx, "fleet "+id, found); err != nil {
				var failed *opError
				if !errors.As(err, &failed) {
					return nil, err
				}
				f.State, f.Message = "failed", err.Error()
				return &f, nil
			}
			if f, err = p.DescribeFleet(ctx, region, id); err != nil {
				return nil, err
			}
			return &f, nil
		}
	}
	return nil, nil
}

var _ domain.RecordLister = (*Provider)(nil)

// ListRecords lists what gpumarket bought or launched since, so a lost ledger
// can be rebuilt: future reservations named gpumarket-… (tags in the
// description), and one fleet per label of its VMs (cost NaN; one whose VMs
// are all gone is not found).
func (p *Provider) ListRecords(ctx context.Context, since time.Time) ([]domain.CloudRecord, error) {
	var out []domain.CloudRecord
	err := p.compute.FutureReservations.AggregatedList(p.project).Filter(`name eq "gpumarket-.*"`).
		Pages(ctx, func(l *compute.FutureReservationsAggregatedListResponse) error {
			for scope, sl := range l.Items {
				for _, fr := range sl.FutureReservations {
					if rec, ok := p.reservationRecord(scope, fr); ok && !rec.CreatedAt.Before(since) {
						out = append(out, rec)
					}
				}
			}
			return nil
		})
	if err != nil {
		return nil, apiErr("list gpumarket's future reservations", err)
	}
	vms, err := p.labelledVMs(ctx, labelTool, domain.ToolName)
	if err != nil {
		return nil, apiErr("list gpumarket's VMs", err)
	}
	fleets := map[string][]*compute.Instance{}
	for _, in := range vms {
		if id := in.Labels[labelFleet]; id != "" {
			fleets[id] = append(fleets[id], in)
		}
	}
	for id, vms := range fleets {
		if rec := fleetRecord(id, vms); !rec.CreatedAt.Before(since) {
			out = append(out, rec)
		}
	}
	domain.SortRecords(out)
	return out, nil
}

// fleetRecord makes a fleet's record from its VMs, in order of creation.
func fleetRecord(id string, vms []*compute.Instance) domain.CloudRecord {
	created := func(in *compute.Instance) time.Time {
		t, _ := time.Parse(time.RFC3339, in.CreationTimestamp)
		return t.UTC()
	}
	slices.SortFunc(vms, func(a, b *compute.Instance) int {
		return cmp.Or(created(a).Compare(created(b)), strings.Compare(a.Name, b.Name))
	})
	rec := domain.CloudRecord{Kind: domain.KindFleet, ProviderRef: id, Provider: Name, Cloud: domain.CloudGCP,
		InstanceCount: len(vms), CostUSD: math.NaN(), State: "ended"}
	var types, zones []string
	for _, in := range vms {
		zone := path.Base(in.Zone)
		if rec.Region == "" {
			rec.Region = regionOf(zone)
		}
		if t := created(in); !t.IsZero() && (rec.Start.IsZero() || t.Before(rec.Start)) {
			rec.Start = t
		}
		if !slices.Contains(zones, zone) {
			zones = append(zones, zone)
		}
		if t := typeOf(in); !slices.Contains(types, t) {
			types = append(types, t)
		}
		switch in.Status {
		case "PROVISIONING", "STAGING", "RUNNING":
			rec.State = "active"
		}
		if s := in.Scheduling; s != nil && s.TerminationTime != "" {
			if t, err := time.Parse(time.RFC3339, s.TerminationTime); err == nil {
				rec.End = t.UTC()
			}
		}
	}
	rec.CreatedAt = rec.Start
	rec.InstanceType, rec.Zone = strings.Join(types, ","), strings.Join(zones, ",")
	// The description keeps row id and actor as written; labels lower-case them.
	tags := readTags(vms[0].Description)
	rec.Ref, rec.Actor = tags[domain.TagRef], tags[domain.TagActor]
	if rec.Ref == "" {
		rec.Ref = vms[0].Labels[labelRef]
	}
	if rec.Actor == "" {
		rec.Actor = vms[0].Labels[labelActor]
	}
	return rec
}
