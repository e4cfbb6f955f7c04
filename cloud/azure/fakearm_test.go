package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/gpumarket/gpumarket/cloud/azure/azuretest"
)

// testdataDir holds the recorded Azure payloads the fakes serve; its
// README says which documented example each file follows.
var testdataDir = filepath.Join("..", "..", "testdata", "azure")

// retailItemsPath is the recorded Retail Prices items.
var retailItemsPath = filepath.Join(testdataDir, "retailprices", "items.json")

// testNow is the clock of every test: the recorded history is laid out
// around it.
var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const testSub = "00000000-0000-0000-0000-000000000001"

// fakeCredential hands out a token without any identity service.
type fakeCredential struct{ err error }

func (c fakeCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if c.err != nil {
		return azcore.AccessToken{}, c.err
	}
	return azcore.AccessToken{Token: "fake-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// fakeARM speaks the ARM JSON of the calls the provider makes, shaped
// after the documented examples of the Compute and Resource Graph REST
// specs (azure-rest-api-specs, Microsoft.Compute/ComputeRP/stable/2024-11-01
// and later; file names cited at each handler), including what their
// happy path hides:
//
//   - every list pages: ResourceSKUs by nextLink, usages, reservation
//     groups, reservations and scale sets by nextLink with a $skiptoken,
//     Resource Graph by $skipToken;
//   - fields the documents omit: a reservation's timeCreated is shown by
//     a Get only (CapacityReservation_Get.json); a PUT's answer
//     (CapacityReservation_CreateOrUpdate.json) and list items
//     (CapacityReservation_ListByReservationGroup.json) carry
//     provisioningTime alone; usage entries may have no name
//     (Usage_List_MinimumSet_Gen.json); list items name their location
//     in display form ("West US");
//   - provisioning states: Creating, then Succeeded, or Failed / Canceled
//     through the operation (failLRO, cancelLRO), and any state a test
//     sets on a resource;
//   - throttling: 429 with Retry-After (throttleNext), Resource Graph's
//     x-ms-user-quota-remaining / -resets-after on every answer and a 429
//     past its quota (graphQuota);
//   - faults: 5xx and 408 on chosen calls (putStatus, failSKURegion), a
//     reservation's DELETE refused while VMs are associated with it;
//   - a reservation's instance view only with $expand=instanceView, and
//     Azure Monitor's metrics under the same endpoint (monitor).
//
// Long-running PUTs are answered through Azure-AsyncOperation and DELETEs
// through Location polling. It also serves the Retail Prices API under
// /api/retail/prices.
type fakeARM struct {
	t      testing.TB
	srv    *httptest.Server
	prices *azuretest.PricesServer

	mu            sync.Mutex
	skus          map[string][]json.RawMessage
	history       []spotRecord
	eviction      []spotRecord
	graphPageSize int
	listPageSize  int
	failSKURegion string // ResourceSKUs of this region answer 500
	failGraph     bool
	putStatus     int // when set, reservation and scale set PUTs answer it
	groupStatus   int // when set, reservation group PUTs answer it
	// madeThen answers successive reservation PUTs with these statuses
	// after making the reservation: an answer lost after the work was done.
	madeThen  []int
	failLRO   bool // long-running PUTs end Failed
	cancelLRO bool // long-running PUTs end Canceled
	// deleteStatus, when set, answers reservation and scale set DELETEs.
	deleteStatus int
	// hook, when set, sees every ARM request before the fake's lock is
	// taken: tests hold requests there to see which are in flight at once.
	hook func(r *http.Request)
	// latency is added to every answer, ARM's and Retail Prices' (set it
	// before the first request).
	latency time.Duration
	usage   []map[string]any
	// throttleNext answers the next ARM requests (not Resource Graph)
	// 429 with Retry-After: 1.
	throttleNext int
	// monitor, when set, answers Azure Monitor's metrics calls, which go
	// to the ARM endpoint like any other ARM read.
	monitor *fakeMonitor
	// graphQuota, when set, is Resource Graph's per-user quota of
	// queries per graphWindow; 0 means unlimited (the headers still
	// come).
	graphQuota   int
	graphWindow  time.Duration
	graphUsed    int
	graphResetAt time.Time

	graphQueries []string
	graphPages   int
	graph429     int
	throttled    int
	skuPages     int
	listPages    map[string]int // list kind → pages served
	puts         map[string]int // lower-case path → PUT count
	deletes      map[string]int
	resources    map[string]map[string]any // lower-case path → resource
	// evicted are a scale set's spot VMs Azure took back, by lower-case
	// scale set path and VM index: "deleting" while being deleted (policy
	// Delete), "gone" once deleted.
	evicted map[string]map[int]string
	ops     map[string]*fakeOp
	nextOp  int
}

type fakeOp struct {
	polls int    // InProgress answers left
	path  string // resource made or deleted
	del   bool
}

type spotRecord struct {
	Type     string `json:"type"`
	Location string `json:"location"`
	SKU      struct {
		Name string `json:"name"`
	} `json:"sku"`
	Properties struct {
		OSType       string            `json:"osType"`
		EvictionRate string            `json:"evictionRate"`
		SpotPrices   []json.RawMessage `json:"spotPrices"`
	} `json:"properties"`
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newFakeARM(t testing.TB) *fakeARM {
	t.Helper()
	f := &fakeARM{
		t: t, skus: map[string][]json.RawMessage{}, graphPageSize: 2, listPageSize: 2, graphWindow: 5 * time.Second,
		listPages: map[string]int{}, puts: map[string]int{}, deletes: map[string]int{}, resources: map[string]map[string]any{}, evicted: map[string]map[int]string{}, ops: map[string]*fakeOp{},
		usage: []map[string]any{
			{"name": map[string]any{"value": "cores", "localizedValue": "Total Regional vCPUs"}, "currentValue": 10, "limit": 350, "unit": "Count"},
			{"unit": "Count", "currentValue": 17, "limit": 19, "name": map[string]any{}},
			{"name": map[string]any{"value": "lowPriorityCores", "localizedValue": "Total Regional Low-priority vCPUs"}, "currentValue": 0, "limit": 100, "unit": "Count"},
			{"name": map[string]any{"value": "standardNCADSA100v4Family", "localizedValue": "Standard NCADS_A100_v4 Family vCPUs"}, "currentValue": 0, "limit": 96, "unit": "Count"},
			{"name": map[string]any{"value": "standardNCadsH100v5Family", "localizedValue": "Standard NCadsH100v5 Family vCPUs"}, "currentValue": 0, "limit": 80, "unit": "Count"},
		},
	}
	for _, region := range []string{"eastus", "westeurope"} {
		var doc struct {
			Value []json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(readTestdata(t, filepath.Join("arm", "resourceskus-"+region+".json")), &doc); err != nil {
			t.Fatal(err)
		}
		f.skus[region] = doc.Value
	}
	if err := json.Unmarshal(readTestdata(t, filepath.Join("resourcegraph", "spot-price-history.json")), &f.history); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(readTestdata(t, filepath.Join("resourcegraph", "spot-eviction-rates.json")), &f.eviction); err != nil {
		t.Fatal(err)
	}
	ps, err := azuretest.LoadPrices(retailItemsPath, 5)
	if err != nil {
		t.Fatal(err)
	}
	f.prices = ps
	mux := http.NewServeMux()
	mux.Handle("/api/retail/prices", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(f.latency)
		ps.ServeHTTP(w, r)
	}))
	mux.HandleFunc("/", f.serveARM)
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// options point a provider at the fake, signed in with a fake credential.
func (f *fakeARM) options() Options {
	return Options{
		SubscriptionID: testSub, ResourceGroup: "rg-gpu",
		PricesURL:  f.srv.URL + "/api/retail/prices",
		Regions:    []string{"eastus", "westeurope"},
		Credential: fakeCredential{},
		ClientOptions: &arm.ClientOptions{
			ClientOptions: policy.ClientOptions{
				Cloud: cloud.Configuration{
					ActiveDirectoryAuthorityHost: f.srv.URL + "/",
					Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
						cloud.ResourceManager: {Endpoint: f.srv.URL, Audience: "https://management.azure.com"},
					},
				},
				Transport: f.srv.Client(),
				Retry:     policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Second},
			},
			DisableRPRegistration: true,
		},
		HTTPClient:    f.srv.Client(),
		Now:           func() time.Time { return testNow },
		RetryBase:     time.Millisecond,
		PollFrequency: time.Millisecond,
	}
}

// resource returns a copy of the stored resource at path (nil if none).
func (f *fakeARM) resource(path string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return clone(f.resources[strings.ToLower(path)])
}

// edit changes a stored resource under the fake's lock.
func (f *fakeARM) edit(path string, change func(res map[string]any)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.resources[strings.ToLower(path)]
	if res == nil {
		f.t.Fatalf("no resource %s to edit", path)
	}
	change(res)
}

// put stores a resource as a test made it (one not made through the
// provider: a user's own reservation in a group, say).
func (f *fakeARM) put(path string, res map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res["id"] = path
	res["name"] = path[strings.LastIndex(path, "/")+1:]
	f.resources[strings.ToLower(path)] = res
}

// clone copies a resource two levels deep (the resource and its
// properties), enough for answers to drop fields without touching it.
func clone(res map[string]any) map[string]any {
	if res == nil {
		return nil
	}
	out := maps.Clone(res)
	if props, ok := res["properties"].(map[string]any); ok {
		out["properties"] = maps.Clone(props)
	}
	return out
}

func armError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var statusCodes = map[int]string{
	400: "InvalidParameter", 408: "RequestTimeout", 409: "Conflict", 429: "TooManyRequests",
	500: "InternalServerError", 502: "BadGateway", 503: "ServiceUnavailable", 504: "GatewayTimeout",
}

const (
	rePrefix = `^/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/`
)

var (
	reSKUFilter = regexp.MustCompile(`location eq '([^']*)'`)
	reKQLType   = regexp.MustCompile(`type =~ '([^']*)'`)
	reKQLLoc    = regexp.MustCompile(`location in~ \(([^)]*)\)`)
	reKQLIn     = regexp.MustCompile(`sku\.name\) in~ \(([^)]*)\)`)
	reKQLFrom   = regexp.MustCompile(`effectiveDate >= datetime\(([^)]*)\)`)
	// reKQLLimit finds a limit, take or sample operator (or clause).
	reKQLLimit   = regexp.MustCompile(`(?i)\b(limit|take|sample)\s+\d+`)
	reUsages     = regexp.MustCompile(`^/subscriptions/[^/]+/providers/microsoft\.compute/locations/([^/]+)/usages$`)
	reGroupList  = regexp.MustCompile(rePrefix + `capacityreservationgroups$`)
	reGroup      = regexp.MustCompile(rePrefix + `capacityreservationgroups/[^/]+$`)
	reResList    = regexp.MustCompile(`^(` + rePrefix[1:] + `capacityreservationgroups/[^/]+)/capacityreservations$`)
	reRes        = regexp.MustCompile(`^(` + rePrefix[1:] + `capacityreservationgroups/[^/]+)/capacityreservations/[^/]+$`)
	reVMSSList   = regexp.MustCompile(rePrefix + `virtualmachinescalesets$`)
	reVMSS       = regexp.MustCompile(rePrefix + `virtualmachinescalesets/[^/]+$`)
	reVMSSView   = regexp.MustCompile(`^(` + rePrefix[1:] + `virtualmachinescalesets/[^/]+)/instanceview$`)
	reVMList     = regexp.MustCompile(rePrefix + `virtualmachines$`)
	reVMSSFilter = regexp.MustCompile(`^'virtualMachineScaleSet/id' eq '([^']+)'$`)
	reOperations = regexp.MustCompile(`^/operations/([^/]+)$`)
)

func (f *fakeARM) serveARM(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer fake-token" {
		armError(w, http.StatusUnauthorized, "AuthenticationFailed", "no bearer token")
		return
	}
	time.Sleep(f.latency)
	if f.hook != nil {
		f.hook(r)
	}
	path := strings.ToLower(r.URL.Path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if path == "/providers/microsoft.resourcegraph/resources" && r.Method == http.MethodPost {
		f.serveGraph(w, r)
		return
	}
	if f.throttleNext > 0 && !reOperations.MatchString(path) {
		// ARM's answer to a principal over its subscription's bucket
		// (request-limits-and-throttling: "HTTP status code 429 ...
		// Retry-After").
		f.throttleNext--
		f.throttled++
		w.Header().Set("Retry-After", "1")
		armError(w, http.StatusTooManyRequests, "SubscriptionRequestsThrottled", "Number of 'read' requests for subscription exceeded the limit")
		return
	}
	if f.monitor != nil && strings.HasSuffix(path, "/providers/microsoft.insights/metrics") {
		f.monitor.ServeHTTP(w, r)
		return
	}
	switch {
	case path == "/subscriptions/"+testSub+"/providers/microsoft.compute/skus" && r.Method == http.MethodGet:
		f.serveSKUs(w, r)
	case reUsages.MatchString(path):
		// Usage_List_MaximumSet_Gen.json pages by nextLink.
		items := make([]map[string]any, len(f.usage))
		copy(items, f.usage)
		f.pageOf(w, r, "usages", items)
	case reOperations.MatchString(path):
		f.serveOperation(w, r, reOperations.FindStringSubmatch(path)[1])
	case reGroupList.MatchString(path) && r.Method == http.MethodGet:
		// CapacityReservationGroup_ListByResourceGroup.json: display
		// location, the reservations' ids, no zones.
		prefix := path + "/"
		var items []map[string]any
		for _, k := range f.sortedKeys() {
			if rest, ok := strings.CutPrefix(k, prefix); ok && !strings.Contains(rest, "/") {
				g := clone(f.resources[k])
				g["location"] = displayLocation(g["location"])
				delete(g, "zones")
				var ids []any
				for _, rk := range f.sortedKeys() {
					if strings.HasPrefix(rk, k+"/capacityreservations/") {
						ids = append(ids, map[string]any{"id": f.resources[rk]["id"]})
					}
				}
				g["properties"].(map[string]any)["capacityReservations"] = ids
				items = append(items, g)
			}
		}
		f.pageOf(w, r, "groups", items)
	case reGroup.MatchString(path) && r.Method == http.MethodPut:
		// CapacityReservationGroup_CreateOrUpdate.json: a plain 200/201.
		f.puts[path]++
		if f.groupStatus != 0 {
			armError(w, f.groupStatus, statusCodes[f.groupStatus], "faked failure")
			return
		}
		res := f.store(path, r, "Microsoft.Compute/capacityReservationGroups", "")
		for _, k := range []string{"provisioningState", "provisioningTime", "timeCreated"} {
			delete(res["properties"].(map[string]any), k)
		}
		writeJSON(w, 200, res)
	case reResList.MatchString(path) && r.Method == http.MethodGet:
		// CapacityReservation_ListByReservationGroup.json: no timeCreated,
		// display location.
		group := reResList.FindStringSubmatch(path)[1]
		if f.resources[group] == nil {
			armError(w, 404, "ResourceNotFound", "The Resource 'Microsoft.Compute/capacityReservationGroups/"+group[strings.LastIndex(group, "/")+1:]+"' under resource group 'rg-gpu' was not found.")
			return
		}
		var items []map[string]any
		for _, k := range f.sortedKeys() {
			if strings.HasPrefix(k, group+"/capacityreservations/") {
				items = append(items, listView(f.resources[k]))
			}
		}
		f.pageOf(w, r, "reservations", items)
	case reVMSSList.MatchString(path) && r.Method == http.MethodGet:
		// VirtualMachineScaleSet_List_MinimumSet_Gen.json / _MaximumSet_Gen.json.
		prefix := path + "/"
		var items []map[string]any
		for _, k := range f.sortedKeys() {
			if rest, ok := strings.CutPrefix(k, prefix); ok && !strings.Contains(rest, "/") {
				items = append(items, clone(f.resources[k]))
			}
		}
		f.pageOf(w, r, "scalesets", items)
	case (reRes.MatchString(path) || reVMSS.MatchString(path)) && r.Method == http.MethodPut:
		if reRes.MatchString(path) && f.resources[reRes.FindStringSubmatch(path)[1]] == nil {
			armError(w, 404, "ParentResourceNotFound", "group missing")
			return
		}
		f.puts[path]++
		if len(f.madeThen) > 0 && reRes.MatchString(path) {
			status := f.madeThen[0]
			f.madeThen = f.madeThen[1:]
			f.store(path, r, "Microsoft.Compute/capacityReservationGroups/capacityReservations", "Succeeded")
			armError(w, status, statusCodes[status], "faked answer after the reservation was made")
			return
		}
		if f.putStatus != 0 {
			armError(w, f.putStatus, statusCodes[f.putStatus], "faked failure")
			return
		}
		typ := "Microsoft.Compute/virtualMachineScaleSets"
		if reRes.MatchString(path) {
			typ = "Microsoft.Compute/capacityReservationGroups/capacityReservations"
		}
		res := f.store(path, r, typ, "Creating")
		f.nextOp++
		op := strconv.Itoa(f.nextOp)
		f.ops[op] = &fakeOp{polls: 1, path: path}
		w.Header().Set("Azure-AsyncOperation", f.srv.URL+"/operations/"+op)
		w.Header().Set("Retry-After-Ms", "1")
		// CapacityReservation_CreateOrUpdate.json answers 201 with
		// provisioningState Creating and provisioningTime, no timeCreated.
		writeJSON(w, 201, putView(res))
	case (reRes.MatchString(path) || reVMSS.MatchString(path)) && r.Method == http.MethodGet:
		res := f.resources[path]
		if res == nil {
			armError(w, 404, "ResourceNotFound", "The Resource '"+r.URL.Path[strings.Index(strings.ToLower(r.URL.Path), "/providers/")+len("/providers/"):]+
				"' under resource group 'rg-gpu' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix")
			return
		}
		// CapacityReservation_Get.json shows timeCreated too, and the
		// instance view only when asked for it ($expand=instanceView).
		out := clone(res)
		if props, ok := out["properties"].(map[string]any); ok && !strings.EqualFold(r.URL.Query().Get("$expand"), "instanceView") {
			delete(props, "instanceView")
		}
		writeJSON(w, 200, out)
	case reVMSSView.MatchString(path) && r.Method == http.MethodGet:
		res := f.resources[reVMSSView.FindStringSubmatch(path)[1]]
		if res == nil {
			armError(w, 404, "ResourceNotFound", "not found")
			return
		}
		n := 0
		for _, vm := range f.scaleSetVMs(reVMSSView.FindStringSubmatch(path)[1]) {
			if vm.state == "" {
				n++
			}
		}
		writeJSON(w, 200, map[string]any{"virtualMachine": map[string]any{"statusesSummary": []any{
			map[string]any{"code": "ProvisioningState/succeeded", "count": n},
		}}})
	case reVMList.MatchString(path) && r.Method == http.MethodGet:
		f.serveVMList(w, r)
	case (reRes.MatchString(path) || reVMSS.MatchString(path)) && r.Method == http.MethodDelete:
		f.deletes[path]++
		if f.deleteStatus != 0 {
			armError(w, f.deleteStatus, statusCodes[f.deleteStatus], "faked failure")
			return
		}
		res := f.resources[path]
		if res == nil {
			// CapacityReservation_Delete_*: 200, 202 or 204; a missing
			// resource is 204 or 404 depending on the service.
			armError(w, 404, "ResourceNotFound", "not found")
			return
		}
		if vms, _ := res["properties"].(map[string]any)["virtualMachinesAssociated"].([]any); len(vms) > 0 {
			// Azure refuses to delete a reservation that VMs are
			// associated with (capacity-reservation-modify: "delete ...
			// after all of the associated VMs are disassociated"). The
			// documents show no example of the error: this is ARM's
			// usual 409 shape.
			armError(w, http.StatusConflict, "OperationNotAllowed", "Capacity reservation cannot be deleted as it has virtual machines associated with it.")
			return
		}
		f.nextOp++
		op := strconv.Itoa(f.nextOp)
		f.ops[op] = &fakeOp{polls: 1, path: path, del: true}
		w.Header().Set("Location", f.srv.URL+"/operations/"+op)
		w.Header().Set("Retry-After-Ms", "1")
		w.WriteHeader(202)
	default:
		armError(w, 404, "NotFound", r.Method+" "+r.URL.Path+" is not faked")
	}
}

func (f *fakeARM) sortedKeys() []string {
	keys := make([]string, 0, len(f.resources))
	for k := range f.resources {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pageOf answers one page of a list as ARM does: "value" and, while more
// remain, an absolute "nextLink" with a $skiptoken, which clients follow
// as given.
func (f *fakeARM) pageOf(w http.ResponseWriter, r *http.Request, kind string, items []map[string]any) {
	skip := 0
	if tok := r.URL.Query().Get("$skiptoken"); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil {
			armError(w, 400, "InvalidSkipToken", "bad $skiptoken")
			return
		}
		skip = n
	}
	f.listPages[kind]++
	end := min(skip+f.listPageSize, len(items))
	page := []map[string]any{}
	if skip < len(items) {
		page = items[skip:end]
	}
	resp := map[string]any{"value": page}
	if end < len(items) {
		q := r.URL.Query()
		q.Set("$skiptoken", strconv.Itoa(end))
		resp["nextLink"] = f.srv.URL + r.URL.Path + "?" + q.Encode()
	}
	writeJSON(w, 200, resp)
}

// displayLocation spells a region as some list answers do ("eastus" →
// "East US"), which a client must read back as the region.
func displayLocation(v any) any {
	s, _ := v.(string)
	switch s {
	case "eastus":
		return "East US"
	case "westeurope":
		return "West Europe"
	}
	return v
}

// listView is a reservation as a list item shows it.
func listView(res map[string]any) map[string]any {
	out := clone(res)
	delete(out["properties"].(map[string]any), "timeCreated")
	out["location"] = displayLocation(out["location"])
	return out
}

// putView is a reservation as a PUT's answer shows it.
func putView(res map[string]any) map[string]any {
	out := clone(res)
	if strings.Contains(strings.ToLower(fmt.Sprint(out["type"])), "capacityreservations") {
		delete(out["properties"].(map[string]any), "timeCreated")
	}
	return out
}

// store keeps a PUT's body as the resource, with ARM's read-only fields.
// A PUT over an existing resource keeps its creation time and moves its
// provisioningTime.
func (f *fakeARM) store(path string, r *http.Request, typ, state string) map[string]any {
	var body map[string]any
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &body); err != nil {
		f.t.Errorf("PUT %s: body is not JSON: %v", path, err)
	}
	orig := r.URL.Path
	body["id"] = orig
	body["name"] = orig[strings.LastIndex(orig, "/")+1:]
	body["type"] = typ
	props, _ := body["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		body["properties"] = props
	}
	props["provisioningState"] = state
	created := testNow.Format(time.RFC3339)
	if old := f.resources[path]; old != nil {
		if c, ok := old["properties"].(map[string]any)["timeCreated"]; ok {
			created = c.(string)
		}
		if vms, ok := old["properties"].(map[string]any)["virtualMachinesAssociated"]; ok {
			props["virtualMachinesAssociated"] = vms
		}
	}
	props["timeCreated"] = created
	props["provisioningTime"] = testNow.Format(time.RFC3339)
	f.resources[path] = body
	return body
}

func (f *fakeARM) serveOperation(w http.ResponseWriter, r *http.Request, id string) {
	op := f.ops[id]
	if op == nil {
		armError(w, 404, "NotFound", "no such operation")
		return
	}
	w.Header().Set("Retry-After-Ms", "1")
	if op.polls > 0 {
		op.polls--
		if op.del {
			w.WriteHeader(202)
			return
		}
		writeJSON(w, 200, map[string]any{"status": "InProgress"})
		return
	}
	if op.del {
		delete(f.resources, op.path)
		w.WriteHeader(204)
		return
	}
	if f.failLRO || f.cancelLRO {
		status, code := "Failed", "AllocationFailed"
		if f.cancelLRO {
			status, code = "Canceled", "OperationCanceled"
		}
		if res := f.resources[op.path]; res != nil {
			res["properties"].(map[string]any)["provisioningState"] = status
		}
		writeJSON(w, 200, map[string]any{"status": status, "error": map[string]any{"code": code, "message": "no capacity for Standard_NC24ads_A100_v4 in zone 2"}})
		return
	}
	if res := f.resources[op.path]; res != nil {
		res["properties"].(map[string]any)["provisioningState"] = "Succeeded"
	}
	writeJSON(w, 200, map[string]any{"status": "Succeeded"})
}

// serveSKUs answers ResourceSKUs - List with a location filter
// (ListAvailableResourceSkusForARegion.json), in two pages.
func (f *fakeARM) serveSKUs(w http.ResponseWriter, r *http.Request) {
	f.skuPages++
	m := reSKUFilter.FindStringSubmatch(r.URL.Query().Get("$filter"))
	if m == nil {
		armError(w, 400, "InvalidFilter", "want a location filter")
		return
	}
	region := m[1]
	if region == f.failSKURegion {
		armError(w, 500, "InternalServerError", "region "+region+" is having a bad day")
		return
	}
	all := f.skus[region]
	half := (len(all) + 1) / 2
	if r.URL.Query().Get("page") == "2" {
		writeJSON(w, 200, map[string]any{"value": all[half:]})
		return
	}
	next := f.srv.URL + r.URL.Path + "?page=2&api-version=2021-07-01&$filter=" + strings.ReplaceAll(r.URL.Query().Get("$filter"), " ", "%20")
	writeJSON(w, 200, map[string]any{"value": all[:half], "nextLink": next})
}

// graphQuotaHeaders counts a Resource Graph query against the user's
// quota and sets the headers every answer carries; it reports false when
// the quota is spent (the answer is then a 429).
func (f *fakeARM) graphQuotaHeaders(w http.ResponseWriter) bool {
	now := time.Now()
	if f.graphResetAt.IsZero() || !now.Before(f.graphResetAt) {
		f.graphUsed, f.graphResetAt = 0, now.Add(f.graphWindow)
	}
	quota := f.graphQuota
	if quota == 0 {
		quota = 1 << 20
	}
	left := time.Until(f.graphResetAt)
	secs := int(left.Seconds() + 0.999)
	reset := fmt.Sprintf("%02d:%02d:%02d", secs/3600, secs/60%60, secs%60)
	w.Header().Set("x-ms-user-quota-resets-after", reset)
	if f.graphUsed >= quota {
		w.Header().Set("x-ms-user-quota-remaining", "0")
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		return false
	}
	f.graphUsed++
	w.Header().Set("x-ms-user-quota-remaining", strconv.Itoa(quota-f.graphUsed))
	return true
}

// serveGraph answers a Resource Graph query over the recorded records,
// doing what the provider's KQL asks (type, location, size list, Linux,
// the live poll's expansion and time filter) and paging by $skipToken
// (ResourcesFirstPageQuery.json and ResourcesNextPageQuery.json of
// Microsoft.ResourceGraph 2024-04-01).
func (f *fakeARM) serveGraph(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query         string   `json:"query"`
		Subscriptions []string `json:"subscriptions"`
		Options       struct {
			SkipToken    string `json:"$skipToken"`
			Top          int    `json:"$top"`
			ResultFormat string `json:"resultFormat"`
		} `json:"options"`
	}
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &req); err != nil {
		armError(w, 400, "BadRequest", err.Error())
		return
	}
	if !f.graphQuotaHeaders(w) {
		f.graph429++
		armError(w, http.StatusTooManyRequests, "RateLimiting", "Please provide below info when asking for support: timestamp = x. Client application has been throttled.")
		return
	}
	if f.failGraph {
		armError(w, 400, "BadRequest", "Please provide below info when asking for support: timestamp = x. Query is invalid.")
		return
	}
	if len(req.Subscriptions) != 1 || req.Subscriptions[0] != testSub || req.Options.ResultFormat != "objectArray" {
		armError(w, 400, "BadRequest", fmt.Sprintf("unexpected scope or format: %v %q", req.Subscriptions, req.Options.ResultFormat))
		return
	}
	f.graphPages++
	if req.Options.SkipToken == "" {
		f.graphQueries = append(f.graphQueries, req.Query)
	}
	typ := reKQLType.FindStringSubmatch(req.Query)
	loc := reKQLLoc.FindStringSubmatch(req.Query)
	in := reKQLIn.FindStringSubmatch(req.Query)
	if typ == nil || loc == nil || in == nil {
		armError(w, 400, "BadRequest", "query is not one the fake knows")
		return
	}
	kqlSet := func(list string) map[string]bool {
		set := map[string]bool{}
		for _, s := range strings.Split(list, ",") {
			set[strings.ToLower(strings.Trim(strings.TrimSpace(s), "'"))] = true
		}
		return set
	}
	sizes, locations := kqlSet(in[1]), kqlSet(loc[1])
	var recs []spotRecord
	switch typ[1] {
	case typePriceHistory:
		recs = f.history
	case typeEvictionRate:
		recs = f.eviction
	}
	var rows []map[string]any
	for _, rec := range recs {
		if !locations[strings.ToLower(rec.Location)] || !sizes[strings.ToLower(rec.SKU.Name)] {
			continue
		}
		if strings.Contains(req.Query, "=~ 'linux'") && !strings.EqualFold(rec.Properties.OSType, "linux") {
			continue
		}
		switch {
		case typ[1] == typeEvictionRate:
			rows = append(rows, map[string]any{"skuName": rec.SKU.Name, "location": rec.Location, "evictionRate": rec.Properties.EvictionRate})
		case strings.Contains(req.Query, "mv-expand"):
			from, err := time.Parse(time.RFC3339, reKQLFrom.FindStringSubmatch(req.Query)[1])
			if err != nil {
				armError(w, 400, "BadRequest", "bad datetime")
				return
			}
			for _, raw := range rec.Properties.SpotPrices {
				var sp struct {
					EffectiveDate time.Time `json:"effectiveDate"`
					PriceUSD      float64   `json:"priceUSD"`
				}
				_ = json.Unmarshal(raw, &sp)
				if !sp.EffectiveDate.Before(from) {
					rows = append(rows, map[string]any{"skuName": rec.SKU.Name, "location": rec.Location,
						"effectiveDate": sp.EffectiveDate.Format(time.RFC3339), "priceUSD": sp.PriceUSD})
				}
			}
		default:
			rows = append(rows, map[string]any{"skuName": rec.SKU.Name, "location": rec.Location, "spotPrices": rec.Properties.SpotPrices})
		}
	}
	skip := 0
	if req.Options.SkipToken != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(req.Options.SkipToken, "tok-"))
		if err != nil {
			armError(w, 400, "BadRequest", "bad $skipToken")
			return
		}
		skip = n
	}
	end := min(skip+f.graphPageSize, len(rows))
	page := []map[string]any{}
	if skip < len(rows) {
		page = rows[skip:end]
	}
	resp := map[string]any{"totalRecords": len(rows), "count": len(page), "resultTruncated": "false", "data": page}
	switch {
	case end < len(rows) && reKQLLimit.MatchString(req.Query):
		// Guidance for pagination: "The response won't contain
		// $skipToken if: The query contains a limit or sample/take
		// operator"; "When resultTruncated is true, the $skipToken
		// property isn't set."
		resp["resultTruncated"] = "true"
	case end < len(rows):
		resp["$skipToken"] = "tok-" + strconv.Itoa(end)
	}
	writeJSON(w, 200, resp)
}

func (f *fakeARM) putCount(suffix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, v := range f.puts {
		if strings.HasSuffix(k, strings.ToLower(suffix)) {
			n += v
		}
	}
	return n
}

// count returns one of the fake's counters under its lock.
func (f *fakeARM) count(read func() int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return read()
}

// Short names for the SDK types the tests spell often.
type (
	policyTokenOptions = policy.TokenRequestOptions
	tokenType          = azcore.AccessToken
	jsonRaw            = json.RawMessage
)
