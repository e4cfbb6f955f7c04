package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/gpumarket/gpumarket/providers/azure/azuretest"
)

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

// fakeARM speaks the ARM JSON of the calls the provider makes:
// ResourceSKUs (paged by nextLink), Resource Graph (paged by $skipToken,
// projecting the recorded SpotResources records the way the provider's
// KQL does), usages, capacity reservation groups and reservations, and
// scale sets, with long-running PUTs answered through Azure-AsyncOperation
// and DELETEs through Location polling. It also serves the Retail Prices
// API under /api/retail/prices.
type fakeARM struct {
	t      testing.TB
	srv    *httptest.Server
	prices *azuretest.PricesServer

	mu            sync.Mutex
	skus          map[string][]json.RawMessage
	history       []spotRecord
	eviction      []spotRecord
	graphPageSize int
	failSKURegion string // ResourceSKUs of this region answer 500
	failGraph     bool
	putStatus     int // when set, reservation and scale set PUTs answer it
	groupStatus   int // when set, reservation group PUTs answer it
	// madeThen answers successive reservation PUTs with these statuses
	// after making the reservation: an answer lost after the work was done.
	madeThen []int
	failLRO  bool // long-running PUTs end Failed
	usage    []map[string]any

	graphQueries []string
	graphPages   int
	skuPages     int
	puts         map[string]int // lower-case path → PUT count
	deletes      map[string]int
	resources    map[string]map[string]any // lower-case path → resource
	ops          map[string]*fakeOp
	nextOp       int
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
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newFakeARM(t testing.TB) *fakeARM {
	t.Helper()
	f := &fakeARM{
		t: t, skus: map[string][]json.RawMessage{}, graphPageSize: 2,
		puts: map[string]int{}, deletes: map[string]int{}, resources: map[string]map[string]any{}, ops: map[string]*fakeOp{},
		usage: []map[string]any{
			{"name": map[string]any{"value": "cores", "localizedValue": "Total Regional vCPUs"}, "currentValue": 10, "limit": 350, "unit": "Count"},
			{"name": map[string]any{"value": "standardNCADSA100v4Family", "localizedValue": "NCADS A100 v4"}, "currentValue": 0, "limit": 96, "unit": "Count"},
		},
	}
	for _, region := range []string{"eastus", "westeurope"} {
		var doc struct {
			Value []json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(readTestdata(t, "skus-"+region+".json"), &doc); err != nil {
			t.Fatal(err)
		}
		f.skus[region] = doc.Value
	}
	if err := json.Unmarshal(readTestdata(t, "spot-price-history.json"), &f.history); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(readTestdata(t, "spot-eviction-rates.json"), &f.eviction); err != nil {
		t.Fatal(err)
	}
	ps, err := azuretest.LoadPrices(filepath.Join("testdata", "retail-items.json"), 5)
	if err != nil {
		t.Fatal(err)
	}
	f.prices = ps
	mux := http.NewServeMux()
	mux.Handle("/api/retail/prices", ps)
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
				Retry:     policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Millisecond},
			},
			DisableRPRegistration: true,
		},
		HTTPClient:    f.srv.Client(),
		Now:           func() time.Time { return testNow },
		RetryBase:     time.Millisecond,
		PollFrequency: time.Millisecond,
	}
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

var (
	reSKUFilter  = regexp.MustCompile(`location eq '([^']*)'`)
	reKQLType    = regexp.MustCompile(`type =~ '([^']*)'`)
	reKQLLoc     = regexp.MustCompile(`location =~ '([^']*)'`)
	reKQLIn      = regexp.MustCompile(`in~ \(([^)]*)\)`)
	reKQLFrom    = regexp.MustCompile(`effectiveDate >= datetime\(([^)]*)\)`)
	reUsages     = regexp.MustCompile(`^/subscriptions/[^/]+/providers/microsoft\.compute/locations/([^/]+)/usages$`)
	reGroup      = regexp.MustCompile(`^/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/capacityreservationgroups/[^/]+$`)
	reResList    = regexp.MustCompile(`^(/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/capacityreservationgroups/[^/]+)/capacityreservations$`)
	reRes        = regexp.MustCompile(`^(/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/capacityreservationgroups/[^/]+)/capacityreservations/[^/]+$`)
	reVMSS       = regexp.MustCompile(`^/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/virtualmachinescalesets/[^/]+$`)
	reVMSSView   = regexp.MustCompile(`^(/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/virtualmachinescalesets/[^/]+)/instanceview$`)
	reOperations = regexp.MustCompile(`^/operations/([^/]+)$`)
)

func (f *fakeARM) serveARM(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer fake-token" {
		armError(w, http.StatusUnauthorized, "AuthenticationFailed", "no bearer token")
		return
	}
	path := strings.ToLower(r.URL.Path)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case path == "/subscriptions/"+testSub+"/providers/microsoft.compute/skus" && r.Method == http.MethodGet:
		f.serveSKUs(w, r)
	case path == "/providers/microsoft.resourcegraph/resources" && r.Method == http.MethodPost:
		f.serveGraph(w, r)
	case reUsages.MatchString(path):
		writeJSON(w, 200, map[string]any{"value": f.usage})
	case reOperations.MatchString(path):
		f.serveOperation(w, r, reOperations.FindStringSubmatch(path)[1])
	case reGroup.MatchString(path) && r.Method == http.MethodPut:
		f.puts[path]++
		if f.groupStatus != 0 {
			armError(w, f.groupStatus, "InternalServerError", "faked failure")
			return
		}
		res := f.store(path, r, "Microsoft.Compute/capacityReservationGroups", "Succeeded")
		writeJSON(w, 200, res)
	case reResList.MatchString(path) && r.Method == http.MethodGet:
		group := reResList.FindStringSubmatch(path)[1]
		if f.resources[group] == nil {
			armError(w, 404, "ResourceNotFound", "no group")
			return
		}
		var list []map[string]any
		var keys []string
		for k := range f.resources {
			if strings.HasPrefix(k, group+"/capacityreservations/") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			list = append(list, f.resources[k])
		}
		writeJSON(w, 200, map[string]any{"value": list})
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
			armError(w, status, map[int]string{409: "Conflict", 500: "InternalServerError", 502: "BadGateway"}[status], "faked answer after the reservation was made")
			return
		}
		if f.putStatus != 0 {
			armError(w, f.putStatus, map[int]string{400: "InvalidParameter", 409: "Conflict", 500: "InternalServerError"}[f.putStatus], "faked failure")
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
		writeJSON(w, 201, res)
	case (reRes.MatchString(path) || reVMSS.MatchString(path)) && r.Method == http.MethodGet:
		res := f.resources[path]
		if res == nil {
			armError(w, 404, "ResourceNotFound", "not found")
			return
		}
		writeJSON(w, 200, res)
	case reVMSSView.MatchString(path) && r.Method == http.MethodGet:
		res := f.resources[reVMSSView.FindStringSubmatch(path)[1]]
		if res == nil {
			armError(w, 404, "ResourceNotFound", "not found")
			return
		}
		n := res["sku"].(map[string]any)["capacity"]
		writeJSON(w, 200, map[string]any{"virtualMachine": map[string]any{"statusesSummary": []any{
			map[string]any{"code": "ProvisioningState/succeeded", "count": n},
		}}})
	case (reRes.MatchString(path) || reVMSS.MatchString(path)) && r.Method == http.MethodDelete:
		f.deletes[path]++
		if f.resources[path] == nil {
			armError(w, 404, "ResourceNotFound", "not found")
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

// store keeps a PUT's body as the resource, with ARM's read-only fields.
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
	props["timeCreated"] = testNow.Format(time.RFC3339)
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
	if f.failLRO {
		if res := f.resources[op.path]; res != nil {
			res["properties"].(map[string]any)["provisioningState"] = "Failed"
		}
		writeJSON(w, 200, map[string]any{"status": "Failed", "error": map[string]any{"code": "AllocationFailed", "message": "no capacity for Standard_NC24ads_A100_v4 in zone 2"}})
		return
	}
	if res := f.resources[op.path]; res != nil {
		res["properties"].(map[string]any)["provisioningState"] = "Succeeded"
	}
	writeJSON(w, 200, map[string]any{"status": "Succeeded"})
}

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

// serveGraph answers a Resource Graph query over the recorded records,
// doing what the provider's KQL asks (type, location, size list, Linux,
// the live poll's expansion and time filter) and paging by $skipToken.
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
	sizes := map[string]bool{}
	for _, s := range strings.Split(in[1], ",") {
		sizes[strings.ToLower(strings.Trim(strings.TrimSpace(s), "'"))] = true
	}
	var recs []spotRecord
	switch typ[1] {
	case typePriceHistory:
		recs = f.history
	case typeEvictionRate:
		recs = f.eviction
	}
	var rows []map[string]any
	for _, rec := range recs {
		if !strings.EqualFold(rec.Location, loc[1]) || !sizes[strings.ToLower(rec.SKU.Name)] {
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
	if end < len(rows) {
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

// Short names for the SDK types the tests spell often.
type (
	policyTokenOptions = policy.TokenRequestOptions
	tokenType          = azcore.AccessToken
	jsonRaw            = json.RawMessage
)
