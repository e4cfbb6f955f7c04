package azure

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/gpumarket/gpumarket/domain"
)

// fakeMonitor is Azure Monitor's metrics API (GET
// {resourceUri}/providers/Microsoft.Insights/metrics, api-version
// 2024-02-01) answering in the documented response shape (the REST
// spec's example GetMetric.json, and GetMetricError.json for a metric
// that cannot be read: an errorCode on the metric, HTTP 200): cost,
// timespan, interval (which may differ from the one asked), value[] of
// metrics with name, unit, timeseries[] of metadatavalues (the VMName
// dimension) and data[] of timeStamp and average — an hour without a
// value has a timeStamp and no average.
//
// A scale set's metrics are asked split by VMName ($filter VMName eq
// '*'). A single VM's (Microsoft.Compute/virtualMachines/{name}, or a
// scale set's VM, …/virtualMachineScaleSets/{name}/virtualMachines/{id})
// are asked without a filter and answered as one timeseries with empty
// metadatavalues (the unsplit metric of GetMetricError.json), its
// platform metrics only in the namespace of its resource type; a custom
// namespace it does not publish is a 400 as Azure answers it ("Failed to
// find metric configuration").
type fakeMonitor struct {
	mu      sync.Mutex
	series  map[string]map[string][]float64 // namespace → vm → hourly values (NaN-free; -1 = no value)
	errCode map[string]string               // namespace → per-metric error code
	status  map[string]int                  // namespace → HTTP status to answer
	// vms are single VMs' series: VM ("train-0", "ss/3") → namespace →
	// hourly values (-1 = no value). vmStatus answers a VM's calls of a
	// namespace ("" every one) with an ARM error of that status.
	vms      map[string]map[string][]float64
	vmStatus map[string]map[string]int
	// throttleNext answers the next calls 429 with Retry-After: 1.
	throttleNext int
	throttled    int
	asked        []url.Values
	askedPaths   []string
	start        time.Time
}

// reVMResource matches a single VM's resource path (lower case): group 1
// is a VM's name, groups 2 and 3 a scale set VM's scale set and id.
var reVMResource = regexp.MustCompile(`/providers/microsoft\.compute/(?:virtualmachines/([^/]+)|virtualmachinescalesets/([^/]+)/virtualmachines/([^/]+))$`)

func (f *fakeMonitor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/providers/Microsoft.Insights/metrics") {
		armError(w, http.StatusNotFound, "NotFound", "no such route "+r.URL.Path)
		return
	}
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.throttleNext > 0 {
		f.throttleNext--
		f.throttled++
		w.Header().Set("Retry-After", "1")
		armError(w, http.StatusTooManyRequests, "TooManyRequests", "The request was throttled.")
		return
	}
	f.asked = append(f.asked, q)
	resource := strings.TrimSuffix(r.URL.Path, "/providers/Microsoft.Insights/metrics")
	f.askedPaths = append(f.askedPaths, resource)
	ns := q.Get("metricnamespace")
	if q.Get("api-version") != "2024-02-01" || q.Get("aggregation") != "average" {
		armError(w, http.StatusBadRequest, "BadRequest", "unexpected query "+q.Encode())
		return
	}
	if m := reVMResource.FindStringSubmatch(strings.ToLower(resource)); m != nil {
		f.serveVM(w, q, resource, m)
		return
	}
	if q.Get("$filter") != "VMName eq '*'" {
		armError(w, http.StatusBadRequest, "BadRequest", "unexpected query "+q.Encode())
		return
	}
	if strings.EqualFold(ns, gpuMetricNamespace) && f.status[ns] == 0 {
		// Telegraf posts its metrics on each VM's resource (its Azure
		// Monitor output's resource_id, "…/virtualMachines/<vm_name>"),
		// never on the scale set: nothing there to find.
		armError(w, http.StatusBadRequest, "BadRequest", "Failed to find metric configuration for provider: "+ns+", resource Id: "+resource)
		return
	}
	if st := f.status[ns]; st != 0 {
		armError(w, st, "BadRequest", "Failed to find metric configuration for provider: "+ns)
		return
	}
	metric := f.metric(resource, q)
	if code := f.errCode[ns]; code != "" {
		metric["errorCode"], metric["errorMessage"] = code, "Sampling type is not found."
	}
	var ts []any
	for vm, vals := range f.series[ns] {
		ts = append(ts, map[string]any{"metadatavalues": []any{map[string]any{"name": map[string]any{"value": "vmname", "localizedValue": "vmname"}, "value": vm}},
			"data": f.data(vals)})
	}
	metric["timeseries"] = ts
	f.answer(w, q, metric)
}

// serveVM answers a single VM's metrics call.
func (f *fakeMonitor) serveVM(w http.ResponseWriter, q url.Values, resource string, m []string) {
	vm, typ := m[1], "microsoft.compute/virtualmachines"
	if vm == "" {
		vm, typ = m[2]+"/"+m[3], "microsoft.compute/virtualmachinescalesets/virtualmachines"
	}
	ns := q.Get("metricnamespace")
	if q.Get("$filter") != "" {
		armError(w, http.StatusBadRequest, "BadRequest", "a VM's metrics have no dimension to filter on: "+q.Get("$filter"))
		return
	}
	var series map[string][]float64
	for k, v := range f.vms {
		if strings.EqualFold(k, vm) {
			series = v
		}
	}
	if series == nil {
		armError(w, http.StatusNotFound, "ResourceNotFound", "The Resource '"+resource+"' was not found.")
		return
	}
	for k, st := range f.vmStatus[vm] {
		if k == "" || strings.EqualFold(k, ns) {
			code := map[int]string{403: "AuthorizationFailed", 500: "InternalServerError"}[st]
			armError(w, st, code, "faked failure of "+vm+"'s metrics")
			return
		}
	}
	var vals []float64
	found := false
	for k, v := range series {
		if strings.EqualFold(k, ns) {
			vals, found = v, true
		}
	}
	if !found && !strings.EqualFold(ns, typ) {
		armError(w, http.StatusBadRequest, "BadRequest", "Failed to find metric configuration for provider: "+ns+", resource Id: "+resource+", metric: "+q.Get("metricnames"))
		return
	}
	metric := f.metric(resource, q)
	metric["timeseries"] = []any{map[string]any{"metadatavalues": []any{}, "data": f.data(vals)}}
	f.answer(w, q, metric)
}

func (f *fakeMonitor) metric(resource string, q url.Values) map[string]any {
	return map[string]any{
		"id":   resource + "/providers/Microsoft.Insights/metrics/" + q.Get("metricnames"),
		"type": "Microsoft.Insights/metrics", "unit": "Percent", "errorCode": "Success",
		"name": map[string]any{"value": q.Get("metricnames"), "localizedValue": q.Get("metricnames")},
	}
}

// data is hourly values from f.start as data[]: -1 is an hour with a
// timeStamp and no average.
func (f *fakeMonitor) data(vals []float64) []any {
	data := []any{}
	for i, v := range vals {
		d := map[string]any{"timeStamp": f.start.Add(time.Duration(i) * time.Hour).Format(time.RFC3339)}
		if v >= 0 {
			d["average"] = v
		}
		data = append(data, d)
	}
	return data
}

func (f *fakeMonitor) answer(w http.ResponseWriter, q url.Values, metric map[string]any) {
	writeJSON(w, http.StatusOK, map[string]any{"cost": 598, "timespan": q.Get("timespan"), "interval": "PT1H",
		"namespace": strings.ToLower(q.Get("metricnamespace")), "resourceregion": "eastus", "value": []any{metric}})
}

func newMonitorProvider(t *testing.T, f *fakeMonitor) *Provider {
	t.Helper()
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	p, err := New(context.Background(), Options{SubscriptionID: testSub, ResourceGroup: "rg-gpu", Credential: fakeCredential{},
		Now: func() time.Time { return testNow },
		ClientOptions: &arm.ClientOptions{ClientOptions: policy.ClientOptions{
			Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: srv.URL + "/", Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: srv.URL, Audience: "https://management.azure.com"}}},
			Transport: srv.Client(), Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Millisecond},
		}, DisableRPRegistration: true}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const scaleSetID = "/subscriptions/" + testSub + "/resourceGroups/rg-gpu/providers/Microsoft.Compute/virtualMachineScaleSets/gpumarket-01J"

func scaleSetQuery() domain.UsageQuery {
	return domain.UsageQuery{Ref: "01J", Kind: domain.KindFleet, ProviderRef: scaleSetID, Region: "eastus",
		InstanceType: "Standard_NC4as_T4_v3", InstanceCount: 2, Start: testNow.Add(-4 * time.Hour), From: testNow.Add(-24 * time.Hour), To: testNow}
}

func TestAzureUsageScaleSet(t *testing.T) {
	start := testNow.Add(-4 * time.Hour).Truncate(time.Hour)
	cases := []struct {
		name    string
		mon     *fakeMonitor
		source  string
		running map[string]int // vm → hours with a value
		share   map[string]float64
	}{
		{
			name: "GPU metric from the VMs' agent, on each VM's resource",
			mon: &fakeMonitor{series: map[string]map[string][]float64{
				cpuMetricNamespace: {"gpumarket-01J_0": {5, 5, 5, 5}, "gpumarket-01J_1": {5, 5, -1, -1}},
			}, vms: map[string]map[string][]float64{
				"gpumarket-01J_0": {gpuMetricNamespace: {90, 90, 90, 90}},
				"gpumarket-01J_1": {gpuMetricNamespace: {10, 10, -1, -1}},
			}},
			source: SourceGPU, running: map[string]int{"gpumarket-01J_0": 4, "gpumarket-01J_1": 2},
			share: map[string]float64{"gpumarket-01J_0": 0.9, "gpumarket-01J_1": 0.1},
		},
		{
			name: "no GPU metric published: Percentage CPU, said so",
			mon: &fakeMonitor{status: map[string]int{gpuMetricNamespace: http.StatusBadRequest},
				series: map[string]map[string][]float64{cpuMetricNamespace: {"gpumarket-01J_0": {40, 40, 40, 40}}}},
			source: SourceCPU, running: map[string]int{"gpumarket-01J_0": 4}, share: map[string]float64{"gpumarket-01J_0": 0.4},
		},
		{
			name: "the GPU metric answers with an error code: CPU, and the note",
			mon: &fakeMonitor{errCode: map[string]string{gpuMetricNamespace: "InvalidSamplingType"},
				series: map[string]map[string][]float64{cpuMetricNamespace: {"gpumarket-01J_0": {40, 40, 40, 40}}}},
			source: SourceCPU, running: map[string]int{"gpumarket-01J_0": 4}, share: map[string]float64{"gpumarket-01J_0": 0.4},
		},
		{
			name:   "no datapoints at all: nothing known to have run, no metrics",
			mon:    &fakeMonitor{},
			source: "", running: map[string]int{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mon := c.mon
			mon.start = start
			p := newMonitorProvider(t, mon)
			rep, err := p.Usage(context.Background(), scaleSetQuery())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Source != c.source || !rep.InterruptionsUnknown {
				t.Errorf("source %q (interruptions unknown %v), want %q", rep.Source, rep.InterruptionsUnknown, c.source)
			}
			if len(rep.Instances) != len(c.running) {
				t.Fatalf("instances %+v, want %v", rep.Instances, c.running)
			}
			for _, in := range rep.Instances {
				if len(in.Busy) != c.running[in.ID] || !in.Spot || !in.Start.Equal(start) {
					t.Errorf("%s: %d samples from %s, want %d from %s", in.ID, len(in.Busy), in.Start, c.running[in.ID], start)
				}
				for _, s := range in.Busy {
					if s.Share != c.share[in.ID] || s.Period != time.Hour {
						t.Errorf("%s sample %+v", in.ID, s)
					}
				}
			}
			if len(mon.asked) != 1+len(c.running) || mon.asked[0].Get("metricnames") != cpuMetricName ||
				mon.asked[0].Get("interval") != "PT1H" || !strings.Contains(mon.asked[0].Get("timespan"), "/") {
				t.Errorf("asked %v", mon.asked)
			}
			for i, path := range mon.askedPaths[1:] {
				if !strings.Contains(path, "/providers/Microsoft.Compute/virtualMachines/gpumarket-01J_") || mon.asked[i+1].Get("metricnamespace") != gpuMetricNamespace {
					t.Errorf("GPU metric asked of %s, want each VM's resource", path)
				}
			}
		})
	}
}

func TestAzureUsageFailures(t *testing.T) {
	mon := &fakeMonitor{status: map[string]int{cpuMetricNamespace: http.StatusForbidden, gpuMetricNamespace: http.StatusForbidden}, start: testNow}
	p := newMonitorProvider(t, mon)
	if _, err := p.Usage(context.Background(), scaleSetQuery()); err == nil {
		t.Error("the platform metric refused, yet a report")
	} else if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error spans lines (azcore's whole answer): %q", err)
	}
	q := scaleSetQuery()
	q.Kind = domain.KindBlock
	if _, err := p.Usage(context.Background(), q); err == nil || !strings.Contains(err.Error(), `"block"`) {
		t.Errorf("a block on Azure: %v", err)
	}
	q = scaleSetQuery()
	q.ProviderRef = "vmss-name"
	if _, err := p.Usage(context.Background(), q); err == nil {
		t.Error("a name that is not a resource id was answered")
	}
	noAccount, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AZURE_SUBSCRIPTION_ID", "")
	if _, err := noAccount.Usage(context.Background(), scaleSetQuery()); err == nil {
		t.Error("usage without an account answered")
	}
}
