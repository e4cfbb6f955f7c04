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

	"github.com/gpumarket/gpumarket/providers"
)

var _ providers.UsageReporter = (*Provider)(nil)

// The metrics a scale set's usage is read from (Azure Monitor). Azure has
// no platform GPU metric: GPU utilization is there only where the VMs run
// an agent that publishes it, such as Telegraf's nvidia_smi input, whose
// custom metrics land in namespace telegraf/nvidia_smi. Percentage CPU is
// a platform metric of every scale set, per VM (dimension VMName), and
// stands in otherwise.
const (
	gpuMetricNamespace = "telegraf/nvidia_smi"
	gpuMetricName      = "utilization_gpu"
	cpuMetricNamespace = "Microsoft.Compute/virtualMachineScaleSets"
	cpuMetricName      = "Percentage CPU"

	// SourceGPU and SourceCPU are the metrics_source of a report.
	SourceGPU = "Azure Monitor telegraf/nvidia_smi utilization_gpu"
	SourceCPU = "Azure Monitor Percentage CPU (CPU as a stand-in: no GPU metrics)"
)

// metricsClients keeps one Azure Monitor client per provider. It lives
// here rather than in armClients because this file is all of usage's
// change to the package (azure.go belongs to the provider's owner); fold
// it into armClients when convenient.
var metricsClients sync.Map // *Provider → *armmonitor.MetricsClient

// metrics returns the provider's Azure Monitor client, signed in the way
// the other ARM clients are.
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
	mc, err := armmonitor.NewMetricsClient(c.subID, cred, p.opt.ClientOptions)
	if err != nil {
		return nil, fmt.Errorf("azure monitor client: %w", err)
	}
	got, _ := metricsClients.LoadOrStore(p, mc)
	return got.(*armmonitor.MetricsClient), nil
}

// Usage reports how a spot scale set's VMs ran and how busy they were,
// from Azure Monitor: per VM (dimension VMName), the hours with a
// datapoint are the hours it ran, and their average is its utilization —
// the Telegraf GPU metric where the VMs publish it, else Percentage CPU,
// said so. Azure Monitor does not say which VMs were evicted, so
// interruptions are unknown. A capacity reservation's usage (the VMs
// associated with it) is not read yet: it is refused, and its row says
// so.
func (p *Provider) Usage(ctx context.Context, q providers.UsageQuery) (providers.UsageReport, error) {
	if q.Kind != providers.KindFleet {
		return providers.UsageReport{}, fmt.Errorf("azure: usage of %s reservations is not read yet (only of spot scale sets)", q.Kind)
	}
	if !strings.HasPrefix(q.ProviderRef, "/") {
		return providers.UsageReport{}, fmt.Errorf("azure: usage of %s: %q is not a scale set resource id", q.Ref, q.ProviderRef)
	}
	from, to := q.From, q.To
	if !q.Start.IsZero() && q.Start.After(from) {
		from = q.Start
	}
	if !q.End.IsZero() && q.End.Before(to) {
		to = q.End
	}
	rep := providers.UsageReport{InterruptionsUnknown: true}
	if !to.After(from) {
		return rep, nil
	}
	mc, err := p.metrics(ctx)
	if err != nil {
		return providers.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, err)
	}
	from = from.Truncate(time.Hour)
	gpu, gerr := vmSeries(ctx, mc, q.ProviderRef, gpuMetricNamespace, gpuMetricName, from, to)
	cpu, cerr := vmSeries(ctx, mc, q.ProviderRef, cpuMetricNamespace, cpuMetricName, from, to)
	if cerr != nil {
		// Without the platform metric nothing says which VMs ran.
		return providers.UsageReport{}, fmt.Errorf("azure: usage of %s: %w", q.Ref, cerr)
	}
	busy, source := cpu, SourceCPU
	if gerr == nil && len(gpu) > 0 {
		busy, source = gpu, SourceGPU
	}
	names := make([]string, 0, len(cpu))
	for vm := range cpu {
		names = append(names, vm)
	}
	sort.Strings(names)
	for _, vm := range names {
		samples := cpu[vm]
		if len(samples) == 0 {
			continue
		}
		// The VM ran over the hours it reported in, from the first to
		// the end of the last.
		last := samples[len(samples)-1]
		in := providers.InstanceUsage{ID: vm, InstanceType: q.InstanceType, Zone: q.Zone, Spot: true,
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

// errMetricAbsent is a metric the resource does not publish: not a
// failure, the stand-in is used.
var errMetricAbsent = errors.New("metric not published")

// vmSeries reads one metric of a scale set per VM, hourly averages, as
// busy samples (percent / 100). Hours without a value are left out.
func vmSeries(ctx context.Context, mc *armmonitor.MetricsClient, resource, namespace, name string, from, to time.Time) (map[string][]providers.BusySample, error) {
	out, err := mc.List(ctx, strings.TrimPrefix(resource, "/"), &armmonitor.MetricsClientListOptions{
		Metricnames: ptr(name), Metricnamespace: ptr(namespace), Aggregation: ptr("average"), Interval: ptr("PT1H"),
		Timespan: ptr(from.UTC().Format(time.RFC3339) + "/" + to.UTC().Format(time.RFC3339)),
		Filter:   ptr("VMName eq '*'"), Top: ptrInt32(1000), AutoAdjustTimegrain: ptrBool(true), ValidateDimensions: ptrBool(false),
	})
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == 400 && strings.Contains(strings.ToLower(re.ErrorCode+err.Error()), "metric") {
			return nil, fmt.Errorf("%s %s: %w", namespace, name, errMetricAbsent)
		}
		return nil, fmt.Errorf("%s %s: %w", namespace, name, err)
	}
	// Azure may answer with another grain than asked (AutoAdjustTimegrain).
	grain := time.Hour
	if out.Interval != nil {
		if d, ok := isoHours(*out.Interval); ok {
			grain = d
		}
	}
	series := map[string][]providers.BusySample{}
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
			vm := ""
			for _, md := range ts.Metadatavalues {
				if md != nil && md.Name != nil && strings.EqualFold(deref(md.Name.Value), "vmname") {
					vm = deref(md.Value)
				}
			}
			if vm == "" {
				continue
			}
			for _, d := range ts.Data {
				if d == nil || d.TimeStamp == nil || d.Average == nil {
					continue // no value that hour: not running, or not measured
				}
				series[vm] = append(series[vm], providers.BusySample{At: d.TimeStamp.UTC(), Period: grain,
					Share: min(max(*d.Average/100, 0), 1)})
			}
		}
	}
	for vm := range series {
		s := series[vm]
		sort.Slice(s, func(i, j int) bool { return s[i].At.Before(s[j].At) })
	}
	return series, nil
}

// isoHours reads the ISO 8601 grains Azure Monitor answers with (PT1M,
// PT5M, PT1H, PT6H, P1D).
func isoHours(s string) (time.Duration, bool) {
	switch strings.ToUpper(s) {
	case "PT1M":
		return time.Minute, true
	case "PT5M":
		return 5 * time.Minute, true
	case "PT15M":
		return 15 * time.Minute, true
	case "PT30M":
		return 30 * time.Minute, true
	case "PT1H":
		return time.Hour, true
	case "PT6H":
		return 6 * time.Hour, true
	case "PT12H":
		return 12 * time.Hour, true
	case "P1D":
		return 24 * time.Hour, true
	}
	return 0, false
}

func ptr(s string) *string    { return &s }
func ptrInt32(v int32) *int32 { return &v }
func ptrBool(v bool) *bool    { return &v }
