package azure

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/monitor/armmonitor"

	"github.com/gpumarket/gpumarket/domain"
)

var _ domain.UsageReporter = (*Provider)(nil)

// Azure has no platform GPU metric: it is there only where an agent such as
// Telegraf's nvidia_smi publishes it (namespace telegraf/nvidia_smi). Percentage
// CPU, a platform metric per VM, stands in otherwise.
const (
	gpuMetricNamespace = "telegraf/nvidia_smi"
	gpuMetricName      = "utilization_gpu"
	cpuMetricNamespace = "Microsoft.Compute/virtualMachineScaleSets"
	cpuMetricName      = "Percentage CPU"

	// SourceGPU and SourceCPU are the metrics_source of a report.
	SourceGPU = "Azure Monitor telegraf/nvidia_smi utilization_gpu"
	SourceCPU = "Azure Monitor Percentage CPU (CPU as a stand-in: no GPU metrics)"
	// SourceMixed: each VM's samples from the GPU metric where it publishes it, else CPU.
	SourceMixed = "Azure Monitor telegraf/nvidia_smi utilization_gpu where a VM publishes it, else Percentage CPU (CPU as a stand-in)"
)

// metricsClients keeps one Azure Monitor client per provider, beside armClients.
var metricsClients sync.Map // *Provider → *armmonitor.MetricsClient

// metrics returns the provider's Azure Monitor client, signed in as the other ARM clients.
func (p *Provider) metrics(ctx context.Context) (*armmonitor.MetricsClient, error) {
	if c, ok := metricsClients.Load(p); ok {
		return c.(*armmonitor.MetricsClient), nil
	}
	c, err := p.clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", errNoAccount, err)
	}
	var cred azcore.TokenCredential = p.opt.Credential
	if cred == nil {
		var o *azidentity.DefaultAzureCredentialOptions
		if p.opt.ClientOptions != nil {
			o = &azidentity.DefaultAzureCredentialOptions{ClientOptions: p.opt.ClientOptions.ClientOptions}
		}
		if cred, err = azidentity.NewDefaultAzureCredential(o); err != nil {
			return nil, fmt.Errorf("no Azure credential: %w", err)
		}
	}
	// An ARM call like the others: same read bucket and retry rule.
	mc, err := armmonitor.NewMetricsClient(c.subID, cred, p.clientOptions())
	if err != nil {
		return nil, fmt.Errorf("azure monitor client: %w", err)
	}
	got, _ := metricsClients.LoadOrStore(p, mc)
	return got.(*armmonitor.MetricsClient), nil
}

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
	mc, err := p.metrics(ctx)
	if err != nil {
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, err)
	}
	cpu, cerr := metricSeries(ctx, mc, q.ProviderRef, cpuMetricNamespace, cpuMetricName, "VMName", from, to)
	if cerr != nil {
		// Without the platform metric nothing says which VMs ran.
		return domain.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, cerr)
	}
	names := make([]string, 0, len(cpu))
	for vm := range cpu {
		names = append(names, vm)
	}
	sort.Strings(names)
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
	}
	for _, in := range rep.Instances {
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
func metricSeries(ctx context.Context, mc *armmonitor.MetricsClient, resource, namespace, name, dim string, from, to time.Time) (map[string][]domain.BusySample, error) {
	opt := &armmonitor.MetricsClientListOptions{
		Metricnames: ptr(name), Metricnamespace: ptr(namespace), Aggregation: ptr("average"), Interval: ptr("PT1H"),
		Timespan:            ptr(from.UTC().Format(time.RFC3339) + "/" + to.UTC().Format(time.RFC3339)),
		AutoAdjustTimegrain: ptrBool(true), ValidateDimensions: ptrBool(false),
	}
	if dim != "" {
		opt.Filter, opt.Top = ptr(dim+" eq '*'"), ptrInt32(1000)
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
		if d, ok := isoHours(*out.Interval); ok {
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
	for k := range series {
		s := series[k]
		sort.Slice(s, func(i, j int) bool { return s[i].At.Before(s[j].At) })
	}
	return series, nil
}

// isoHours reads Azure Monitor's ISO 8601 grains (PT1M … P1D).
func isoHours(s string) (time.Duration, bool) {
	d, ok := isoGrains[strings.ToUpper(s)]
	return d, ok
}

var isoGrains = map[string]time.Duration{
	"PT1M": time.Minute, "PT5M": 5 * time.Minute, "PT15M": 15 * time.Minute, "PT30M": 30 * time.Minute,
	"PT1H": time.Hour, "PT6H": 6 * time.Hour, "PT12H": 12 * time.Hour, "P1D": 24 * time.Hour,
}

func ptr(s string) *string    { return &s }
func ptrInt32(v int32) *int32 { return &v }
func ptrBool(v bool) *bool    { return &v }
