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

// associationNote is what a reservation's report cannot know, said on
// every one: Azure lists the VMs associated with a reservation now, not
// those that were.
const associationNote = "Azure lists only the VMs associated with the reservation now: " +
	"a VM that ran in it earlier and was since deleted or moved out is not counted, so running hours may be under-counted"

// vmMetricsInFlight bounds the VMs of one reservation whose metrics are
// read at once: two calls each, within the ARM read bucket every call
// shares.
const vmMetricsInFlight = 4

// reservationUsage reads how the VMs of an On-demand Capacity Reservation
// ran (see Usage). The reservation's Get with its instance view names the
// VMs associated with it (virtualMachinesAssociated) and those allocated
// against it now (instanceView.utilizationInfo.virtualMachinesAllocated);
// each one's hourly Percentage CPU, and GPU utilization where its agent
// publishes it, is read on its own resource. A VM ran in the hours it has
// a value: an associated VM that is deallocated has none, and does not
// count as running.
//
// The VMs are not spot (Azure does not take Spot VMs into a capacity
// reservation: "Spot VMs and Azure Dedicated Host Nodes aren't supported
// with Capacity Reservation", capacity-reservation-overview, Limitations
// and restrictions), so none was evicted: interruptions are known, and
// none. The reservation's price covers them (Spot false).
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
		// Asked here, Azure answers 404, and the row would be said
		// deleted.
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, err)
	}
	got, err := c.reserve.Get(ctx, id.ResourceGroupName, id.Parent.Name, id.Name,
		&armcompute.CapacityReservationsClientGetOptions{Expand: to.Ptr(armcompute.CapacityReservationInstanceViewTypesInstanceView)})
	if isNotFound(err) {
		// gpumarket deletes a reservation at its end, and Azure keeps
		// nothing of a deleted one: an ended row's usage cannot be read.
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

// reservationVMs are the resource ids of the VMs a reservation names:
// associated with it, or allocated against it now (Azure lists the
// allocated ones among the associated, but an answer may omit either
// list), each once, sorted.
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
			// ARM ids are case-insensitive, and its answers vary the
			// case of a type ("virtualMachines", "VirtualMachines").
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

// vmKind is what every VM of a reservation is: the reserved size, in the
// reserved zone (Azure allocates only VMs of the size and zone against
// it).
type vmKind struct{ instanceType, zone string }

// vmUsage is what one VM of a reservation showed.
type vmUsage struct {
	// runs are its runs in the span, oldest first.
	runs []domain.InstanceUsage
	// source is the metric its busy samples come from (SourceGPU or
	// SourceCPU); "" when it has none.
	source string
	// notes say what could not be read of it, for the user.
	notes []string
}

// readVM reads one VM's hourly Percentage CPU and the Telegraf GPU metric
// over [from, until]. Its running hours are those with a CPU value; when
// the CPU cannot be read, those with a GPU value. Busy samples are the
// GPU's where it publishes them, else the CPU's.
func readVM(ctx context.Context, mc *armmonitor.MetricsClient, vmID string, kind vmKind, from, until time.Time) vmUsage {
	rid, err := arm.ParseResourceID(vmID)
	if err != nil {
		return vmUsage{notes: []string{fmt.Sprintf("%q is not a VM resource id: it had no metrics", vmID)}}
	}
	name := vmName(rid)
	// A VM's platform metrics are in the namespace of its resource type:
	// Microsoft.Compute/virtualMachines, or
	// Microsoft.Compute/virtualMachineScaleSets/virtualMachines for a
	// scale set's VM.
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

// vmName is how a report names a VM: its name, or for a scale set's VM
// the scale set's name and its instance id.
func vmName(rid *arm.ResourceID) string {
	if rid.Parent != nil && strings.EqualFold(rid.Parent.ResourceType.Type, "virtualMachineScaleSets") {
		return rid.Parent.Name + "/" + rid.Name
	}
	return rid.Name
}

// run is a span a VM ran; a zero end means it still runs.
type run struct{ start, end time.Time }

// runsOf splits a VM's samples, oldest first, into its runs: periods with
// a value back to back. An hour without a value is one it did not run in
// (Azure Monitor has no platform metric of a deallocated VM) or that was
// not measured; either way it is not counted as running. The last run
// still goes on unless it ended before the span's last hour, which Azure
// Monitor may not have published yet.
func runsOf(samples []domain.BusySample, until time.Time) []run {
	var out []run
	for _, s := range samples {
		if n := len(out); n > 0 && !s.At.After(out[n-1].end) {
			out[n-1].end = maxTime(out[n-1].end, s.At.Add(s.Period))
			continue
		}
		out = append(out, run{start: s.At, end: s.At.Add(s.Period)})
	}
	if n := len(out); n > 0 && !out[n-1].end.Before(until.Add(-time.Hour)) {
		out[n-1].end = time.Time{}
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
