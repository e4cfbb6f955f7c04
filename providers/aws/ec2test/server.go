// Package ec2test is a local EC2 endpoint for tests: it speaks the EC2 Query
// protocol (form-encoded POST, XML answers in the 2016-11-15 namespace,
// <Response><Errors> errors with the real HTTP status) and the Price List
// API's awsJson1_1, so the real aws-sdk-go-v2 clients, pointed at it with
// BaseEndpoint, exercise their signing, paging, retries and parsing. It
// serves generated data (see Generate), pages with NextToken, injects
// throttling, errors, malformed answers and lost answers per action and
// region, honours DryRun, keeps purchased capacity reservations and fleets,
// and records every call.
package ec2test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Call is one request the server answered (or refused).
type Call struct {
	Action string
	Region string
	Params url.Values
	// Faulted is set when a Fault answered the call.
	Faulted bool
}

// Fault makes the server misbehave for matching calls.
type Fault struct {
	// Action and Region select the calls ("" matches any).
	Action, Region string
	// Times is how many matching calls of each region fail; 0 means all.
	Times int
	// Status and Code/Message make an EC2 error answer (503
	// RequestLimitExceeded, say).
	Status        int
	Code, Message string
	// Body, when set (or when Raw is), is sent as the answer instead:
	// malformed XML, an empty answer.
	Body string
	Raw  bool
	// Drop closes the connection without an answer.
	Drop bool
	// AfterApply performs the action before failing: the work is done
	// but its answer is lost.
	AfterApply bool
}

// Throttle is the fault AWS answers when a caller calls too fast.
func Throttle(action, region string, times int) Fault {
	return Fault{Action: action, Region: region, Times: times, Status: http.StatusServiceUnavailable,
		Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
}

// Server is the fake endpoint. Set its fields before serving; they are
// guarded by the server's lock afterwards.
type Server struct {
	// MaxPage caps every page below what the caller asked (0: no cap), so
	// small data still pages.
	MaxPage int
	// DenyPlacementScores answers GetSpotPlacementScores with
	// UnauthorizedOperation, as for a caller without the permission.
	DenyPlacementScores bool
	// LaunchTemplates, when not empty, are the only templates CreateFleet
	// accepts (by id or name).
	LaunchTemplates []string
	// Now is the clock for creation dates (default time.Now).
	Now func() time.Time
	// PaymentDelay is how long a purchased capacity block stays
	// payment-pending before AWS shows it paid (0: paid at once; the
	// purchase's own answer always says payment-pending, as AWS's does).
	PaymentDelay time.Duration

	mu        sync.Mutex
	regions   map[string]*Region
	order     []string
	faults    []Fault
	faultHits map[int]map[string]int
	calls     []Call
	issued    map[string]issuedOffering
	// selections caches the sorted history a query selects, so paging
	// through a million points does not sort them again for every page.
	selections   map[string][]int
	reservations []*Reservation
	fleets       []*FleetRecord
	seq          int
}

type issuedOffering struct {
	offering Offering
	count    int
}

// New makes a server over the regions' data.
func New(regions ...*Region) *Server {
	s := &Server{regions: map[string]*Region{}, faultHits: map[int]map[string]int{}, issued: map[string]issuedOffering{}}
	for _, r := range regions {
		s.regions[r.Name] = r
		s.order = append(s.order, r.Name)
	}
	return s
}

// Edit runs fn under the server's lock, for a test that changes the data
// (Region) while serving: a re-priced or withdrawn offering, say.
func (s *Server) Edit(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn()
}

// Start serves on a loopback httptest server; close it when done.
func (s *Server) Start() *httptest.Server { return httptest.NewServer(s) }

// AddFault adds a misbehaviour.
func (s *Server) AddFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// ClearFaults removes every misbehaviour.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.faultHits = map[int]map[string]int{}
}

// Calls returns a copy of the calls so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Count counts the calls of an action ("" any) in a region ("" any).
func (s *Server) Count(action, region string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if (action == "" || c.Action == action) && (region == "" || c.Region == region) {
			n++
		}
	}
	return n
}

// Region returns a region's data for a test to change (under no lock:
// change it before serving, or within Edit).
func (s *Server) Region(name string) *Region { return s.regions[name] }

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// signedRegion reads the region from a SigV4 Authorization header's
// credential scope: Credential=AKID/20250601/us-east-1/ec2/aws4_request.
func signedRegion(h http.Header) string {
	a := h.Get("Authorization")
	i := strings.Index(a, "Credential=")
	if i < 0 {
		return ""
	}
	scope := a[i+len("Credential="):]
	if j := strings.IndexAny(scope, ", "); j >= 0 {
		scope = scope[:j]
	}
	parts := strings.Split(scope, "/")
	if len(parts) < 5 {
		return ""
	}
	return parts[2]
}

// apiError is an EC2 error answer.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func badParam(format string, a ...any) *apiError {
	return &apiError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf(format, a...)}
}

// ServeHTTP answers one EC2 Query or Price List request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.servePricing(w, r, target)
		return
	}
	if r.Method != http.MethodPost {
		s.writeError(w, &apiError{http.StatusBadRequest, "InvalidAction", "EC2 wants POST, got " + r.Method}, "")
		return
	}
	if err := r.ParseForm(); err != nil {
		s.writeError(w, &apiError{http.StatusBadRequest, "MalformedQueryString", err.Error()}, "")
		return
	}
	form := r.PostForm
	action := form.Get("Action")
	region := signedRegion(r.Header)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	reqID := fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq)
	s.calls = append(s.calls, Call{Action: action, Region: region, Params: form})
	if form.Get("Version") != "2016-11-15" {
		s.writeError(w, &apiError{http.StatusBadRequest, "InvalidParameterValue", "unsupported Version " + form.Get("Version")}, reqID)
		return
	}
	if region == "" {
		s.writeError(w, &apiError{http.StatusBadRequest, "AuthFailure", "no SigV4 credential scope in the Authorization header"}, reqID)
		return
	}
	fault, faulty := s.matchFault(action, region)
	s.calls[len(s.calls)-1].Faulted = faulty
	if faulty && !fault.AfterApply {
		s.writeFault(w, fault, reqID)
		return
	}
	body, err := s.dispatch(action, region, form, reqID)
	if faulty {
		s.writeFault(w, fault, reqID)
		return
	}
	if err != nil {
		s.writeError(w, err, reqID)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func (s *Server) matchFault(action, region string) (Fault, bool) {
	for i, f := range s.faults {
		if (f.Action != "" && f.Action != action) || (f.Region != "" && f.Region != region) {
			continue
		}
		hits := s.faultHits[i]
		if hits == nil {
			hits = map[string]int{}
			s.faultHits[i] = hits
		}
		if f.Times > 0 && hits[region] >= f.Times {
			continue
		}
		hits[region]++
		return f, true
	}
	return Fault{}, false
}

func (s *Server) writeFault(w http.ResponseWriter, f Fault, reqID string) {
	switch {
	case f.Drop:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		w.WriteHeader(http.StatusBadGateway)
	case f.Raw || f.Body != "":
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(f.Body))
	default:
		s.writeError(w, &apiError{f.Status, f.Code, f.Message}, reqID)
	}
}

func (s *Server) writeError(w http.ResponseWriter, e *apiError, reqID string) {
	if e.status == 0 {
		e.status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write(errorDocument(e.code, e.message, reqID))
}

func (s *Server) dispatch(action, region string, f url.Values, reqID string) ([]byte, *apiError) {
	rd := s.regions[region]
	if rd == nil && action != "DescribeRegions" {
		return nil, &apiError{http.StatusUnauthorized, "AuthFailure", "region " + region + " is not enabled for this account"}
	}
	switch action {
	case "DescribeRegions":
		return s.describeRegions(f, reqID)
	case "DescribeInstanceTypes":
		return s.describeInstanceTypes(rd, f, reqID)
	case "DescribeSpotPriceHistory":
		return s.describeSpotPriceHistory(rd, f, reqID)
	case "GetSpotPlacementScores":
		return s.getSpotPlacementScores(f, reqID)
	case "DescribeCapacityBlockOfferings":
		return s.describeCapacityBlockOfferings(rd, f, reqID)
	case "PurchaseCapacityBlock":
		return s.purchaseCapacityBlock(rd, f, reqID)
	case "DescribeCapacityReservations":
		return s.describeCapacityReservations(rd, f, reqID)
	case "CreateFleet":
		return s.createFleet(rd, f, reqID)
	case "DescribeFleets":
		return s.describeFleets(rd, f, reqID)
	case "DeleteFleets":
		return s.deleteFleets(rd, f, reqID)
	case "DescribeInstances":
		return s.describeInstances(rd, f, reqID)
	}
	return nil, &apiError{http.StatusBadRequest, "InvalidAction", "The action " + action + " is not valid for this web service."}
}

// list reads a flattened query list: Name.1, Name.2, …
func list(f url.Values, name string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := f[name+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// filters reads Filter.N.Name / Filter.N.Value.M.
func filters(f url.Values) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		name := f.Get("Filter." + strconv.Itoa(i) + ".Name")
		if name == "" {
			return out
		}
		out[name] = list(f, "Filter."+strconv.Itoa(i)+".Value")
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func dryRun(f url.Values) *apiError {
	if f.Get("DryRun") == "true" {
		return &apiError{http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set."}
	}
	return nil
}

func timeParam(f url.Values, name string) (time.Time, bool, *apiError) {
	v := f.Get(name)
	if v == "" {
		return time.Time{}, false, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, false, badParam("%s: %q is not an ISO 8601 time", name, v)
	}
	return t, true, nil
}

// page cuts n items at the NextToken's offset into a page of at most max
// (capped by MaxPage) and returns the bounds and the next token.
func (s *Server) page(f url.Values, n, def, lo, hi int) (int, int, string, *apiError) {
	max := def
	if v := f.Get("MaxResults"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil || m < lo || m > hi {
			return 0, 0, "", badParam("MaxResults %q: want %d to %d", v, lo, hi)
		}
		max = m
	}
	if s.MaxPage > 0 && max > s.MaxPage {
		max = s.MaxPage
	}
	start := 0
	if tok := f.Get("NextToken"); tok != "" {
		off, err := strconv.Atoi(strings.TrimPrefix(tok, "tok-"))
		if err != nil || !strings.HasPrefix(tok, "tok-") || off < 0 || off > n {
			return 0, 0, "", &apiError{http.StatusBadRequest, "InvalidNextToken", "The specified token is invalid: " + tok}
		}
		start = off
	}
	end := start + max
	if end >= n {
		return start, n, "", nil
	}
	return start, end, "tok-" + strconv.Itoa(end), nil
}

func withToken(members []node, token string) []node {
	if token != "" {
		members = append(members, tx("nextToken", token))
	}
	return members
}

func (s *Server) describeRegions(f url.Values, reqID string) ([]byte, *apiError) {
	var regs []node
	for _, name := range s.order {
		regs = append(regs, el("", tx("regionName", name), tx("regionEndpoint", "ec2."+name+".amazonaws.com"),
			tx("optInStatus", "opt-in-not-required")))
	}
	return document("DescribeRegions", reqID, items("regionInfo", regs)), nil
}

func (s *Server) describeInstanceTypes(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	want := list(f, "InstanceType")
	var sel []InstanceType
	for _, it := range rd.InstanceTypes {
		if len(want) == 0 || contains(want, it.Name) {
			sel = append(sel, it)
		}
	}
	lo, hi, tok, err := s.page(f, len(sel), 100, 5, 100)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, it := range sel[lo:hi] {
		kids := []node{tx("instanceType", it.Name), tx("currentGeneration", "true"),
			el("vCpuInfo", num("defaultVCpus", it.VCPUs)), el("memoryInfo", num("sizeInMiB", it.MemoryMiB)),
			items("supportedUsageClasses", []node{tx("", "on-demand"), tx("", "spot")})}
		if it.GPUCount > 0 {
			kids = append(kids, el("gpuInfo",
				items("gpus", []node{el("", tx("name", it.GPUName), tx("manufacturer", it.GPUMaker), num("count", it.GPUCount),
					el("memoryInfo", num("sizeInMiB", it.GPUMemoryMiB)))}),
				num("totalGpuMemoryInMiB", it.GPUCount*it.GPUMemoryMiB)))
		}
		out = append(out, el("", kids...))
	}
	return document("DescribeInstanceTypes", reqID, withToken([]node{items("instanceTypeSet", out)}, tok)...), nil
}

// describeSpotPriceHistory answers as AWS does: the changes within
// (StartTime, EndTime], newest first, plus for each type and zone the
// change in force at StartTime (the last at or before it).
func (s *Server) describeSpotPriceHistory(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	start, hasStart, err := timeParam(f, "StartTime")
	if err != nil {
		return nil, err
	}
	end, hasEnd, err := timeParam(f, "EndTime")
	if err != nil {
		return nil, err
	}
	if hasStart && hasEnd && end.Before(start) {
		return nil, badParam("EndTime %s is before StartTime %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	}
	types := list(f, "InstanceType")
	products := list(f, "ProductDescription")
	zone := f.Get("AvailabilityZone")
	if len(products) > 0 && !contains(products, "Linux/UNIX") {
		return document("DescribeSpotPriceHistory", reqID, items("spotPriceHistorySet", nil)), nil
	}
	selKey := rd.Name + "|" + strings.Join(types, ",") + "|" + zone + "|" + f.Get("StartTime") + "|" + f.Get("EndTime") + "|" + strconv.Itoa(len(rd.Prices))
	sel, cached := s.selections[selKey]
	if !cached {
		sel = selectHistory(rd, types, zone, start, hasStart, end, hasEnd)
		if s.selections == nil {
			s.selections = map[string][]int{}
		}
		s.selections[selKey] = sel
	}
	lo, hi, tok, err := s.page(f, len(sel), 1000, 5, 1000)
	if err != nil {
		return nil, err
	}
	zoneIDs := map[string]string{}
	for _, z := range rd.Zones {
		zoneIDs[z.Name] = z.ID
	}
	out := make([]node, 0, hi-lo)
	for _, i := range sel[lo:hi] {
		p := rd.Prices[i]
		out = append(out, el("", tx("instanceType", p.InstanceType), tx("productDescription", "Linux/UNIX"),
			tx("spotPrice", strconv.FormatFloat(p.USD, 'f', 6, 64)), tm("timestamp", p.At),
			tx("availabilityZone", p.Zone), tx("availabilityZoneId", zoneIDs[p.Zone])))
	}
	return document("DescribeSpotPriceHistory", reqID, withToken([]node{items("spotPriceHistorySet", out)}, tok)...), nil
}

// selectHistory picks the history entries of a query, newest first.
func selectHistory(rd *Region, types []string, zone string, start time.Time, hasStart bool, end time.Time, hasEnd bool) []int {
	type pz struct{ t, z string }
	before := map[pz]int{}
	var sel []int
	for i, p := range rd.Prices {
		if (len(types) > 0 && !contains(types, p.InstanceType)) || (zone != "" && zone != p.Zone) {
			continue
		}
		if hasEnd && p.At.After(end) {
			continue
		}
		if hasStart && !p.At.After(start) {
			k := pz{p.InstanceType, p.Zone}
			if j, ok := before[k]; !ok || rd.Prices[j].At.Before(p.At) {
				before[k] = i
			}
			continue
		}
		sel = append(sel, i)
	}
	for _, i := range before {
		sel = append(sel, i)
	}
	sort.SliceStable(sel, func(a, b int) bool {
		pa, pb := rd.Prices[sel[a]], rd.Prices[sel[b]]
		if !pa.At.Equal(pb.At) {
			return pa.At.After(pb.At)
		}
		if pa.InstanceType != pb.InstanceType {
			return pa.InstanceType < pb.InstanceType
		}
		return pa.Zone < pb.Zone
	})
	return sel
}

// getSpotPlacementScores scores the set of instance types in each
// requested region (or zone, with SingleAvailabilityZone): the set's score
// is its best member's, as a fleet may use any of them.
func (s *Server) getSpotPlacementScores(f url.Values, reqID string) ([]byte, *apiError) {
	if s.DenyPlacementScores {
		return nil, &apiError{http.StatusForbidden, "UnauthorizedOperation", "You are not authorized to perform this operation. User: arn:aws:iam::123456789012:user/test is not authorized to perform: ec2:GetSpotPlacementScores"}
	}
	if err := dryRun(f); err != nil {
		return nil, err
	}
	types := list(f, "InstanceType")
	if len(types) == 0 {
		return nil, badParam("InstanceType: at least one is required")
	}
	if f.Get("TargetCapacity") == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter TargetCapacity"}
	}
	regions := list(f, "RegionName")
	if len(regions) == 0 {
		regions = s.order
	}
	single := f.Get("SingleAvailabilityZone") == "true"
	var out []node
	for _, name := range regions {
		rd := s.regions[name]
		if rd == nil {
			continue
		}
		best := 0
		for _, z := range rd.Zones {
			score := 0
			for _, t := range types {
				if v := rd.Scores[t][z.ID]; v > score {
					score = v
				}
			}
			if score == 0 {
				continue
			}
			if single {
				out = append(out, el("", tx("region", name), tx("availabilityZoneId", z.ID), num("score", score)))
			}
			if score > best {
				best = score
			}
		}
		if !single && best > 0 {
			out = append(out, el("", tx("region", name), num("score", best)))
		}
	}
	return document("GetSpotPlacementScores", reqID, items("spotPlacementScoreSet", out)), nil
}
