package azure

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/monitor/armmonitor"

	"github.com/gpumarket/gpumarket/domain"
)

// associationNote: Azure lists the VMs associated with a reservation now, not those that were.
const associationNote = "Azure lists only the VMs associated with the reservation now: " +
	"a VM that ran in it earlier and was since deleted or moved out is not counted, so running hours may be under-counted"

// vmMetricsInFlight bounds a reservation's VMs read at once, within the shared ARM read bucket.
const vmMetricsInFlight = 4

// reservationUsage reads the VMs a reservation names now (its instance view),
// each on its own resource; a VM ran in the hours it has a value. None is spot:
// "Spot VMs … aren't supported with Capacity Reservation"
// (capacity-reservation-overview, Limitations), so none was evicted.
func (p *Provider) reservationUsage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	id, err := reservationID(q.ProviderRef)
	if err != nil {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, err)
	}
	from, until, ok := usageSpan(q)
	if !ok {
		return domain.UsageReport{}, nil
	}
	c, err := p.clients(ctx)
	if err != nil {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w (%v)", q.Ref, errNoAccount, err)
	}
	if err := inSubscription(id, c); err != nil {
		// Asked here, the 404 would say the row deleted.
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, err)
	}
	got, err := c.reserve.Get(ctx, id.ResourceGroupName, id.Parent.Name, id.Name,
		&armcompute.CapacityReservationsClientGetOptions{Expand: to.Ptr(armcompute.CapacityReservationInstanceViewTypesInstanceView)})
	if isNotFound(err) {
		// Azure keeps nothing of a deleted reservation: an ended row's usage is gone.
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: capacity reservation %s (group %s, resource group %s) is not in Azure (%w): "+
			"once a reservation is deleted (gpumarket deletes one at its end) Azure no longer says which VMs used it, so its running and busy hours cannot be read",
			q.Ref, id.Name, id.Parent.Name, id.ResourceGroupName, short(err))
	}
	if err != nil {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: get capacity reservation %s: %w", q.Ref, id.Name, short(err))
	}
	res := &got.CapacityReservation
	vms := reservationVMs(res)
	rep := domain.UsageReport{Note: associationNote}
	if len(vms) == 0 {
		return rep, nil
	}
	mc, err := p.metrics(ctx)
	if err != nil {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, err)
	}
	kind := vmKind{instanceType: q.InstanceType, zone: q.Zone}
	if res.SKU != nil && deref(res.SKU.Name) != "" {
		kind.instanceType = deref(res.SKU.Name)
	}
	if len(res.Zones) > 0 && deref(res.Zones[0]) != "" {
		kind.zone = deref(res.Zones[0])
	}

	results := make([]vmUsage, len(vms))
	sem := make(chan struct{}, vmMetricsInFlight)
	var wg sync.WaitGroup
	for i, vm := range vms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = readVM(ctx, mc, vm, kind, from, until)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, err)
	}

	var notes []string
	sources := map[string]bool{}
	for _, u := range results {
		rep.Instances = append(rep.Instances, u.runs...)
		if u.source != "" {
			sources[u.source] = true
		}
		notes = append(notes, u.notes...)
	}
	switch {
	case len(sources) > 1:
		rep.Source = SourceMixed
	case sources[SourceGPU]:
		rep.Source = SourceGPU
	case sources[SourceCPU]:
		rep.Source = SourceCPU
	}
	rep.Note = strings.Join(append(notes, associationNote), "; ")
	return rep, nil
}

// reservationVMs are the ids of the VMs associated or allocated now, each once, sorted.
func reservationVMs(r *armcompute.CapacityReservation) []string {
	if r.Properties == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(list []*armcompute.SubResourceReadOnly) {
		for _, vm := range list {
			if vm == nil || deref(vm.ID) == "" {
				continue
			}
			// ARM ids are case-insensitive, and answers vary a type's case.
			if k := strings.ToLower(*vm.ID); !seen[k] {
				seen[k] = true
				out = append(out, *vm.ID)
			}
		}
	}
	add(r.Properties.VirtualMachinesAssociated)
	if iv := r.Properties.InstanceView; iv != nil && iv.UtilizationInfo != nil {
		add(iv.UtilizationInfo.VirtualMachinesAllocated)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i]) < strings.ToLower(out[j]) })
	return out
}

// vmKind is every VM of a reservation: the reserved size and zone.
type vmKind struct{ instanceType, zone string }

type vmUsage struct {
	runs []domain.InstanceUsage
	// source: SourceGPU or SourceCPU; "" for none.
	source string
	notes  []string
}

// readVM reads a VM's hourly CPU and GPU metric: running hours are those with a
// CPU value (else GPU); busy samples the GPU's where published, else CPU's.
func readVM(ctx context.Context, mc *armmonitor.MetricsClient, vmID string, kind vmKind, from, until time.Time) vmUsage {
	rid, err := arm.ParseResourceID(vmID)
	if err != nil {
		return vmUsage{notes: []string{fmt.Sprintf("%q is not a VM resource id: it had no metrics", vmID)}}
	}
	name := vmName(rid)
	// Platform metrics are in the namespace of the VM's resource type.
	cpu, cerr := metricSeries(ctx, mc, vmID, rid.ResourceType.String(), cpuMetricName, "", from, until)
	gpu, gerr := metricSeries(ctx, mc, vmID, gpuMetricNamespace, gpuMetricName, "", from, until)
	var u vmUsage
	ran, busy, source := cpu[""], cpu[""], SourceCPU
	if gerr == nil && len(gpu[""]) > 0 {
		busy, source = gpu[""], SourceGPU
	}
	switch {
	case cerr == nil:
	case gerr == nil && len(gpu[""]) > 0:
		ran = gpu[""]
		u.notes = append(u.notes, fmt.Sprintf("VM %s: CPU metric not read (%v): its running hours are those its GPU metric has", name, cerr))
	default:
		return vmUsage{notes: []string{fmt.Sprintf("VM %s had no metrics (%v): its running hours are not counted", name, cerr)}}
	}
	if gerr != nil && !errors.Is(gerr, errMetricAbsent) {
		u.notes = append(u.notes, fmt.Sprintf("VM %s: GPU metric not read (%v): its CPU stands in", name, gerr))
	}
	for _, r := range runsOf(ran, until) {
		in := domain.InstanceUsage{ID: name, InstanceType: kind.instanceType, Zone: kind.zone, Start: r.start, End: r.end}
		for _, s := range busy {
			if !s.At.Before(r.start) && (r.end.IsZero() || s.At.Before(r.end)) {
				in.Busy = append(in.Busy, s)
			}
		}
		if len(in.Busy) > 0 {
			u.source = source
		}
		u.runs = append(u.runs, in)
	}
	return u
}

// vmName is a VM's name, or a scale set's name and instance id.
func vmName(rid *arm.ResourceID) string {
	if rid.Parent != nil && strings.EqualFold(rid.Parent.ResourceType.Type, "virtualMachineScaleSets") {
		return rid.Parent.Name + "/" + rid.Name
	}
	return rid.Name
}

// run is a span a VM ran; a zero end means it still runs.
type run struct{ start, end time.Time }

// runsOf splits samples into runs of back-to-back values; an hour without one
// was not run. The last run goes on unless it ended before the span's last hour,
// which may be unpublished yet.
func runsOf(samples []domain.BusySample, until time.Time) []run {
	var out []run
	for _, s := range samples {
		if n := len(out); n > 0 && !s.At.After(out[n-1].end) {
			out[n-1].end = domain.Later(out[n-1].end, s.At.Add(s.Period))
			continue
		}
		out = append(out, run{start: s.At, end: s.At.Add(s.Period)})
	}
	if n := len(out); n > 0 && !out[n-1].end.Before(until.Add(-time.Hour)) {
		out[n-1].end = time.Time{}
	}
	return out
}
