package azure

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/monitor/armmonitor"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

var _ domain.UsageReporter = (*Provider)(nil)

// Azure has no platform GPU metric: it is there only where an agent such as
// Telegraf's nvidia_smi publishes it (namespace telegraf/nvidia_smi). Percentage
// CPU, a platform metric per VM, stands in otherwise.
const (
	gpuMetricNamespace, gpuMetricName = "telegraf/nvidia_smi", "utilization_gpu"
	cpuMetricNamespace, cpuMetricName = "Microsoft.Compute/virtualMachineScaleSets", "Percentage CPU"
)

// SourceGPU and SourceCPU are the metrics_source of a report; SourceMixed:
// each VM's samples from the GPU metric where it publishes it, else CPU.
var (
	SourceGPU   = "Azure Monitor telegraf/nvidia_smi utilization_gpu"
	SourceCPU   = domain.CPUStandIn("Azure Monitor Percentage CPU", "no GPU metrics")
	SourceMixed = domain.CPUStandIn(SourceGPU+" where a VM publishes it, else Percentage CPU", "")
)

// Usage reports how a row's capacity ran and how busy, from Azure Monitor. A
// spot scale set: per VM of its metrics, interruptions unknown (evictions are
// not said). A reservation: the VMs associated now (reservationUsage), none
// evicted. Hours with a datapoint are hours run; GPU metric, else CPU.
func (p *Provider) Usage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	switch q.Kind {
	case domain.KindFleet:
		return p.scaleSetUsage(ctx, q)
	case domain.KindReservation:
		return p.reservationUsage(ctx, q)
	}
	return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: Azure has no %q capacity in gpumarket (only %s and %s)",
		q.Ref, q.Kind, domain.KindReservation, domain.KindFleet)
}

// usageSpan is the part of [From, To] the row ran in, from its first whole hour; false if none.
func usageSpan(q domain.UsageQuery) (from, to time.Time, ok bool) {
	from, to = q.From, q.To
	if !q.Start.IsZero() && q.Start.After(from) {
		from = q.Start
	}
	if !q.End.IsZero() && q.End.Before(to) {
		to = q.End
	}
	return from.Truncate(time.Hour), to, to.After(from)
}

func (p *Provider) scaleSetUsage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	if !strings.HasPrefix(q.ProviderRef, "/") {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %q is not a scale set resource id", q.Ref, q.ProviderRef)
	}
	from, to, ok := usageSpan(q)
	rep := domain.UsageReport{InterruptionsUnknown: true}
	if !ok {
		return rep, nil
	}
	c, err := p.clients(ctx)
	if err != nil {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w (%v)", q.Ref, errNoAccount, err)
	}
	mc := c.metrics
	cpu, cerr := metricSeries(ctx, mc, q.ProviderRef, cpuMetricNamespace, cpuMetricName, "VMName", from, to)
	if cerr != nil {
		// Without the platform metric nothing says which VMs ran.
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, cerr)
	}
	names := slices.Sorted(maps.Keys(cpu))
	gpu, gerr := scaleSetGPU(ctx, mc, q.ProviderRef, names, from, to)
	busy, source := cpu, SourceCPU
	if len(gpu) > 0 {
		busy, source = gpu, SourceGPU
	}
	for _, vm := range names {
		samples := cpu[vm]
		if len(samples) == 0 {
			continue
		}
		last := samples[len(samples)-1]
		in := domain.InstanceUsage{ID: vm, InstanceType: q.InstanceType, Zone: q.Zone, Spot: true,
			Start: samples[0].At, Busy: busy[vm]}
		if end := last.At.Add(last.Period); end.Before(to.Add(-time.Hour)) {
			in.End = end
		}
		rep.Instances = append(rep.Instances, in)
		if len(in.Busy) > 0 {
			rep.Source = source
		}
	}
	if gerr != nil && !errors.Is(gerr, errMetricAbsent) {
		rep.Note = "Azure Monitor GPU metric: " + gerr.Error()
	}
	return rep, nil
}

// scaleSetGPU reads the Telegraf GPU metric of a Flexible scale set's VMs, each
// on its own resource, where Telegraf posts it (its README: resource_id
// "…/virtualMachines/<vm_name>"); unsplit, it is the VM's mean over its GPUs.
func scaleSetGPU(ctx context.Context, mc *armmonitor.MetricsClient, scaleSet string, vms []string, from, to time.Time) (map[string][]domain.BusySample, error) {
	group, _, ok := strings.Cut(scaleSet, "/providers/")
	if !ok {
		return nil, fmt.Errorf("%q is not a resource id", scaleSet)
	}
	out := map[string][]domain.BusySample{}
	var first error
	for _, vm := range vms {
		s, err := metricSeries(ctx, mc, group+"/providers/Microsoft.Compute/virtualMachines/"+vm, gpuMetricNamespace, gpuMetricName, "", from, to)
		switch {
		case err == nil && len(s[""]) > 0:
			out[vm] = s[""]
		case err != nil && !errors.Is(err, errMetricAbsent) && first == nil:
			first = fmt.Errorf("VM %s: %w", vm, err)
		}
	}
	return out, first
}

// errMetricAbsent: the resource does not publish the metric; the stand-in is used.
var errMetricAbsent = errors.New("metric not published")

// metricSeries reads a metric as hourly busy samples keyed by dimension dim;
// with dim "" the one series, keyed "" (GetMetricError.json: an unsplit series
// has empty metadatavalues). Hours without a value are left out.
func metricSeries(ctx context.Context, mc *armmonitor.MetricsClient, resource, namespace, name, dim string, from, until time.Time) (map[string][]domain.BusySample, error) {
	opt := &armmonitor.MetricsClientListOptions{
		Metricnames: &name, Metricnamespace: &namespace, Aggregation: to.Ptr("average"), Interval: to.Ptr("PT1H"),
		Timespan:            to.Ptr(from.UTC().Format(time.RFC3339) + "/" + until.UTC().Format(time.RFC3339)),
		AutoAdjustTimegrain: to.Ptr(true), ValidateDimensions: to.Ptr(false),
	}
	if dim != "" {
		opt.Filter, opt.Top = to.Ptr(dim+" eq '*'"), to.Ptr[int32](1000)
	}
	out, err := mc.List(ctx, strings.TrimPrefix(resource, "/"), opt)
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == 400 && strings.Contains(strings.ToLower(re.ErrorCode+err.Error()), "metric") {
			return nil, fmt.Errorf("%s %s: %w", namespace, name, errMetricAbsent)
		}
		return nil, fmt.Errorf("%s %s: %w", namespace, name, short(err))
	}
	// Azure may answer with another grain than asked (AutoAdjustTimegrain).
	grain := time.Hour
	if out.Interval != nil {
		if d, ok := isoGrains[strings.ToUpper(*out.Interval)]; ok {
			grain = d
		}
	}
	series := map[string][]domain.BusySample{}
	for _, m := range out.Value {
		if m == nil {
			continue
		}
		if code := deref(m.ErrorCode); code != "" && code != "Success" {
			return nil, fmt.Errorf("%s %s: %s: %s: %w", namespace, name, code, deref(m.ErrorMessage), errMetricAbsent)
		}
		for _, ts := range m.Timeseries {
			if ts == nil {
				continue
			}
			key := ""
			if dim != "" {
				for _, md := range ts.Metadatavalues {
					if md != nil && md.Name != nil && strings.EqualFold(deref(md.Name.Value), dim) {
						key = deref(md.Value)
					}
				}
				if key == "" {
					continue
				}
			}
			for _, d := range ts.Data {
				if d == nil || d.TimeStamp == nil || d.Average == nil {
					continue // no value that hour: not running, or not measured
				}
				series[key] = append(series[key], domain.BusySample{At: d.TimeStamp.UTC(), Period: grain,
					Share: min(max(*d.Average/100, 0), 1)})
			}
		}
	}
	for _, s := range series {
		slices.SortFunc(s, func(a, b domain.BusySample) int { return a.At.Compare(b.At) })
	}
	return series, nil
}

// isoGrains are Azure Monitor's ISO 8601 grains (PT1M … P1D).
var isoGrains = map[string]time.Duration{
	"PT1M": time.Minute, "PT5M": 5 * time.Minute, "PT15M": 15 * time.Minute, "PT30M": 30 * time.Minute,
	"PT1H": time.Hour, "PT6H": 6 * time.Hour, "PT12H": 12 * time.Hour, "P1D": 24 * time.Hour,
}

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
	mc := c.metrics
	kind := vmKind{instanceType: q.InstanceType, zone: q.Zone}
	if res.SKU != nil && deref(res.SKU.Name) != "" {
		kind.instanceType = deref(res.SKU.Name)
	}
	if len(res.Zones) > 0 && deref(res.Zones[0]) != "" {
		kind.zone = deref(res.Zones[0])
	}

	results := make([]vmUsage, len(vms))
	fanout.Each(len(vms), vmMetricsInFlight, func(i int) {
		results[i] = readVM(ctx, mc, vms[i], kind, from, until)
	})
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
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
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
