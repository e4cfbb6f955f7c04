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
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/providers"
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
	// Hang accepts the request and never answers: the handler waits until
	// the caller gives up (its context ends) or HangFor has passed (0: at
	// most maxHang), as an endpoint behind a stuck proxy does.
	Hang    bool
	HangFor time.Duration
}

// maxHang bounds a Hang fault whose caller never gives up, so that closing
// the httptest server (which waits for its handlers) cannot block forever.
const maxHang = 2 * time.Minute

// Throttle is the fault AWS answers when a caller calls too fast.
func Throttle(action, region string, times int) Fault {
	return Fault{Action: action, Region: region, Times: times, Status: http.StatusServiceUnavailable,
		Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
}

// Reservation is a capacity reservation made by PurchaseCapacityBlock.
type Reservation struct {
	ID           string
	Region       string
	InstanceType string
	Zone         string
	Count        int
	Start, End   time.Time
	Created      time.Time
	State        string
	Tags         map[string]string
	OfferingID   string
}

// FleetRecord is a fleet made by CreateFleet.
type FleetRecord struct {
	ID          string
	Region      string
	Type        string
	ClientToken string
	State       string
	Target      int
	OnDemand    int
	Strategy    string
	Overrides   []url.Values
	Instances   []string
	Lifecycle   string
	Template    string
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
	// Latency is added to every answer (EC2 and the Price List), as the
	// round trip to a real region would: the benchmark of the fan-out
	// runs at 50 ms.
	Latency time.Duration
	// EnforceRateLimits answers RequestLimitExceeded when a region's
	// calls of an action drain AWS's documented token bucket (see
	// ratelimit.go).
	EnforceRateLimits bool

	mu        sync.Mutex
	regions   map[string]*Region
	order     []string
	faults    []Fault
	faultHits map[int]map[string]int
	calls     []Call
	issued    map[string]issuedOffering
	// selections caches the sorted history a query selects, so paging
	// through a million points does not sort them again for every page.
	// It has its own lock: selecting is the slow part of an answer and
	// runs outside mu (the price data never changes once served).
	selMu        sync.Mutex
	selections   map[string][]int
	reservations []*Reservation
	fleets       []*FleetRecord
	seq          int
	buckets      map[bucketKey]*bucket
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

// Reservations returns copies of the capacity reservations bought so far.
func (s *Server) Reservations() []Reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Reservation
	for _, r := range s.reservations {
		out = append(out, *r)
	}
	return out
}

// Fleets returns copies of the fleets made so far.
func (s *Server) Fleets() []FleetRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []FleetRecord
	for _, f := range s.fleets {
		out = append(out, *f)
	}
	return out
}

// Region returns a region's data for a test to change (under no lock:
// change it before serving).
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
	// The body is read before the latency so that net/http watches the
	// connection meanwhile: a caller that gives up ends the wait.
	if body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20)); err == nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.wait(r)
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
	s.seq++
	reqID := fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq)
	s.calls = append(s.calls, Call{Action: action, Region: region, Params: form})
	if form.Get("Version") != "2016-11-15" {
		s.mu.Unlock()
		s.writeError(w, &apiError{http.StatusBadRequest, "InvalidParameterValue", "unsupported Version " + form.Get("Version")}, reqID)
		return
	}
	if region == "" {
		s.mu.Unlock()
		s.writeError(w, &apiError{http.StatusBadRequest, "AuthFailure", "no SigV4 credential scope in the Authorization header"}, reqID)
		return
	}
	fault, faulty := s.matchFault(action, region)
	if !faulty && s.EnforceRateLimits && !s.take(action, region) {
		fault, faulty = Throttle(action, region, 0), true
	}
	s.calls[len(s.calls)-1].Faulted = faulty
	if faulty && fault.Hang {
		s.mu.Unlock()
		hang(r, fault)
		return
	}
	if faulty && !fault.AfterApply {
		s.mu.Unlock()
		s.writeFault(w, fault, reqID)
		return
	}
	if action == "DescribeSpotPriceHistory" && !faulty && s.regions[region] != nil {
		// The history is the bulk of the traffic: it is selected and
		// rendered outside the lock, so that 14 regions' pages are made
		// at once (the price data never changes once served).
		rd, maxPage := s.regions[region], s.MaxPage
		s.mu.Unlock()
		render, err := s.describeSpotPriceHistory(rd, form, reqID, maxPage)
		if err != nil {
			s.writeError(w, err, reqID)
			return
		}
		writeXML(w, render())
		return
	}
	body, err := s.dispatch(action, region, form, reqID)
	s.mu.Unlock()
	if faulty {
		s.writeFault(w, fault, reqID)
		return
	}
	if err != nil {
		s.writeError(w, err, reqID)
		return
	}
	writeXML(w, body)
}

func writeXML(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// wait adds the configured latency before an answer, unless the caller
// gives up first.
func (s *Server) wait(r *http.Request) {
	s.mu.Lock()
	d := s.Latency
	s.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// hang holds a request without answering until its caller gives up.
func hang(r *http.Request, f Fault) {
	d := f.HangFor
	if d <= 0 || d > maxHang {
		d = maxHang
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
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
		render, err := s.describeSpotPriceHistory(rd, f, reqID, s.MaxPage)
		if err != nil {
			return nil, err
		}
		return render(), nil
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
	return pageOf(f, n, def, lo, hi, s.MaxPage)
}

// pageOf is page with the MaxPage read by the caller.
func pageOf(f url.Values, n, def, lo, hi, maxPage int) (int, int, string, *apiError) {
	max := def
	if v := f.Get("MaxResults"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil || m < lo || m > hi {
			return 0, 0, "", badParam("MaxResults %q: want %d to %d", v, lo, hi)
		}
		max = m
	}
	if maxPage > 0 && max > maxPage {
		max = maxPage
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

func (s *Server) describeCapacityBlockOfferings(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	hours, herr := strconv.Atoi(f.Get("CapacityDurationHours"))
	if herr != nil {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter CapacityDurationHours"}
	}
	if !providers.CapacityBlockTerms.ValidHours(hours) {
		return nil, badParam("CapacityDurationHours %d is not a supported duration", hours)
	}
	count, cerr := strconv.Atoi(f.Get("InstanceCount"))
	if most := providers.CapacityBlockTerms.MaxInstances; cerr != nil || count < 1 || count > most {
		return nil, badParam("InstanceCount %q: want 1 to %d", f.Get("InstanceCount"), most)
	}
	typ := f.Get("InstanceType")
	if typ != "" {
		known := false
		for _, it := range rd.InstanceTypes {
			if it.Name == typ {
				known = it.CapacityBlock
			}
		}
		if !known {
			return nil, badParam("The instance type %s is not supported for Capacity Blocks.", typ)
		}
	}
	from, hasFrom, err := timeParam(f, "StartDateRange")
	if err != nil {
		return nil, err
	}
	to, hasTo, err := timeParam(f, "EndDateRange")
	if err != nil {
		return nil, err
	}
	var sel []Offering
	for _, o := range rd.Offerings {
		end := o.Start.Add(time.Duration(o.Hours) * time.Hour)
		if (typ != "" && o.InstanceType != typ) || o.Hours != hours || (hasFrom && o.Start.Before(from)) || (hasTo && end.After(to)) {
			continue
		}
		sel = append(sel, o)
	}
	lo, hi, tok, err := s.page(f, len(sel), 100, 1, 1000)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, o := range sel[lo:hi] {
		s.issued[o.ID] = issuedOffering{offering: o, count: count}
		out = append(out, el("", tx("capacityBlockOfferingId", o.ID), tx("instanceType", o.InstanceType),
			tx("availabilityZone", o.Zone), num("instanceCount", count), tm("startDate", o.Start),
			tm("endDate", o.Start.Add(time.Duration(o.Hours)*time.Hour)), num("capacityBlockDurationHours", o.Hours),
			usd("upfrontFee", o.UpfrontUSDPerInstance*float64(count)), tx("currencyCode", "USD"), tx("tenancy", "default")))
	}
	return document("DescribeCapacityBlockOfferings", reqID, withToken([]node{items("capacityBlockOfferingSet", out)}, tok)...), nil
}

func (s *Server) purchaseCapacityBlock(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	id := f.Get("CapacityBlockOfferingId")
	if id == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter CapacityBlockOfferingId"}
	}
	if f.Get("InstancePlatform") == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstancePlatform"}
	}
	iss, ok := s.issued[id]
	if !ok || !s.onSale(rd, id) {
		return nil, badParam("The capacity block offering %s is not available. Search for offerings again.", id)
	}
	if err := dryRun(f); err != nil {
		return nil, err
	}
	o := iss.offering
	res := &Reservation{ID: fmt.Sprintf("cr-%017x", 0xa0000+len(s.reservations)+1), Region: rd.Name, InstanceType: o.InstanceType,
		Zone: o.Zone, Count: iss.count, Start: o.Start, End: o.Start.Add(time.Duration(o.Hours) * time.Hour),
		Created: s.now().UTC(), State: "payment-pending", Tags: map[string]string{}, OfferingID: id}
	for i := 1; ; i++ {
		k := f.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Key", i))
		if k == "" {
			break
		}
		res.Tags[k] = f.Get(fmt.Sprintf("TagSpecification.1.Tag.%d.Value", i))
	}
	s.reservations = append(s.reservations, res)
	// A block is sold once.
	kept := rd.Offerings[:0]
	for _, x := range rd.Offerings {
		if x.ID != id {
			kept = append(kept, x)
		}
	}
	rd.Offerings = kept
	return document("PurchaseCapacityBlock", reqID, reservationNode("capacityReservation", res, rd)), nil
}

func (s *Server) onSale(rd *Region, id string) bool {
	for _, o := range rd.Offerings {
		if o.ID == id {
			return true
		}
	}
	return false
}

func reservationNode(name string, r *Reservation, rd *Region) node {
	var tags []node
	keys := make([]string, 0, len(r.Tags))
	for k := range r.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		tags = append(tags, el("", tx("key", k), tx("value", r.Tags[k])))
	}
	zoneID := ""
	for _, z := range rd.Zones {
		if z.Name == r.Zone {
			zoneID = z.ID
		}
	}
	n := el(name, tx("capacityReservationId", r.ID), tx("instanceType", r.InstanceType), tx("instancePlatform", "Linux/UNIX"),
		tx("availabilityZone", r.Zone), tx("availabilityZoneId", zoneID), tx("tenancy", "default"),
		num("totalInstanceCount", r.Count), num("availableInstanceCount", r.Count), tx("state", r.State),
		tm("startDate", r.Start), tm("endDate", r.End), tx("endDateType", "limited"), tx("instanceMatchCriteria", "targeted"),
		tm("createDate", r.Created), tx("reservationType", "capacity-block"), items("tagSet", tags))
	return n
}

func (s *Server) describeCapacityReservations(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	ids := list(f, "CapacityReservationId")
	flt := filters(f)
	var sel []*Reservation
	for _, r := range s.reservations {
		if r.Region != rd.Name || (len(ids) > 0 && !contains(ids, r.ID)) {
			continue
		}
		if v, ok := flt["instance-type"]; ok && !contains(v, r.InstanceType) {
			continue
		}
		if v, ok := flt["availability-zone"]; ok && !contains(v, r.Zone) {
			continue
		}
		if v, ok := flt["state"]; ok && !contains(v, r.State) {
			continue
		}
		sel = append(sel, r)
	}
	lo, hi, tok, err := s.page(f, len(sel), 1000, 1, 1000)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, r := range sel[lo:hi] {
		out = append(out, reservationNode("", r, rd))
	}
	return document("DescribeCapacityReservations", reqID, withToken([]node{items("capacityReservationSet", out)}, tok)...), nil
}

func (s *Server) createFleet(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	const lt = "LaunchTemplateConfigs.1.LaunchTemplateSpecification."
	tmpl := f.Get(lt + "LaunchTemplateId")
	if tmpl == "" {
		tmpl = f.Get(lt + "LaunchTemplateName")
	}
	if tmpl == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain a launch template id or name"}
	}
	if len(s.LaunchTemplates) > 0 && !contains(s.LaunchTemplates, tmpl) {
		return nil, &apiError{http.StatusBadRequest, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID " + tmpl + ", does not exist."}
	}
	total, err := strconv.Atoi(f.Get("TargetCapacitySpecification.TotalTargetCapacity"))
	if err != nil || total < 1 {
		return nil, badParam("TotalTargetCapacity %q: want a positive number", f.Get("TargetCapacitySpecification.TotalTargetCapacity"))
	}
	var overrides []url.Values
	for i := 1; ; i++ {
		p := fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.", i)
		if f.Get(p+"InstanceType") == "" {
			break
		}
		o := url.Values{}
		for _, k := range []string{"InstanceType", "AvailabilityZone", "SubnetId", "MaxPrice"} {
			if v := f.Get(p + k); v != "" {
				o.Set(k, v)
			}
		}
		overrides = append(overrides, o)
	}
	if len(overrides) == 0 {
		return nil, badParam("LaunchTemplateConfigs: at least one override with an InstanceType is required by this fake")
	}
	if err := dryRun(f); err != nil {
		return nil, err
	}
	token := f.Get("ClientToken")
	if token != "" {
		for _, fl := range s.fleets {
			if fl.ClientToken == token && fl.Region == rd.Name {
				return s.createFleetAnswer(fl, reqID), nil
			}
		}
	}
	od, _ := strconv.Atoi(f.Get("TargetCapacitySpecification.OnDemandTargetCapacity"))
	fl := &FleetRecord{ID: fmt.Sprintf("fleet-%08x-0000-4000-8000-%012x", len(s.fleets)+1, s.seq), Region: rd.Name,
		Type: f.Get("Type"), ClientToken: token, State: "active", Target: total, OnDemand: od,
		Strategy: f.Get("SpotOptions.AllocationStrategy"), Overrides: overrides, Template: tmpl, Lifecycle: "spot"}
	if fl.Type == "" {
		fl.Type = "maintain"
	}
	for i := 0; i < total; i++ {
		fl.Instances = append(fl.Instances, fmt.Sprintf("i-%017x", 0xb0000+len(s.fleets)*1000+i))
	}
	s.fleets = append(s.fleets, fl)
	return s.createFleetAnswer(fl, reqID), nil
}

func (s *Server) createFleetAnswer(fl *FleetRecord, reqID string) []byte {
	var ids []node
	for _, id := range fl.Instances {
		ids = append(ids, tx("", id))
	}
	o := fl.Overrides[0]
	inst := el("", items("instanceIds", ids), tx("instanceType", o.Get("InstanceType")), tx("lifecycle", fl.Lifecycle),
		tx("availabilityZone", o.Get("AvailabilityZone")))
	return document("CreateFleet", reqID, tx("fleetId", fl.ID), items("errorSet", nil), items("fleetInstanceSet", []node{inst}))
}

func (s *Server) findFleet(region, id string) *FleetRecord {
	for _, fl := range s.fleets {
		if fl.ID == id && fl.Region == region {
			return fl
		}
	}
	return nil
}

func (s *Server) describeFleets(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	ids := list(f, "FleetId")
	var out []node
	for _, fl := range s.fleets {
		if fl.Region != rd.Name || (len(ids) > 0 && !contains(ids, fl.ID)) {
			continue
		}
		var insts []node
		if len(fl.Instances) > 0 {
			var idn []node
			for _, id := range fl.Instances {
				idn = append(idn, tx("", id))
			}
			insts = append(insts, el("", items("instanceIds", idn), tx("instanceType", fl.Overrides[0].Get("InstanceType")), tx("lifecycle", fl.Lifecycle)))
		}
		out = append(out, el("", tx("fleetId", fl.ID), tx("fleetState", fl.State), tx("type", fl.Type), tx("clientToken", fl.ClientToken),
			tx("activityStatus", "fulfilled"), usd("fulfilledCapacity", float64(len(fl.Instances))),
			el("targetCapacitySpecification", num("totalTargetCapacity", fl.Target), num("onDemandTargetCapacity", fl.OnDemand),
				num("spotTargetCapacity", fl.Target-fl.OnDemand), tx("defaultTargetCapacityType", "spot")),
			items("fleetInstanceSet", insts)))
	}
	if len(ids) > 0 && len(out) == 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidFleetId.NotFound", "The fleet ID '" + ids[0] + "' does not exist"}
	}
	return document("DescribeFleets", reqID, items("fleetSet", out)), nil
}

func (s *Server) deleteFleets(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	terminate := f.Get("TerminateInstances") == "true"
	var ok, bad []node
	for _, id := range list(f, "FleetId") {
		fl := s.findFleet(rd.Name, id)
		switch {
		case fl == nil:
			bad = append(bad, el("", tx("fleetId", id), el("error", tx("code", "fleetIdDoesNotExist"), tx("message", "The fleet ID does not exist"))))
		case fl.Type == "instant" && !terminate:
			bad = append(bad, el("", tx("fleetId", id), el("error", tx("code", "unexpectedError"), tx("message", "Instant fleets can only be deleted with TerminateInstances true"))))
		default:
			prev := fl.State
			fl.State = "deleted_running"
			if terminate {
				fl.State = "deleted_terminating"
				fl.Instances = nil
			}
			ok = append(ok, el("", tx("fleetId", id), tx("currentFleetState", fl.State), tx("previousFleetState", prev)))
		}
	}
	return document("DeleteFleets", reqID, items("successfulFleetDeletionSet", ok), items("unsuccessfulFleetDeletionSet", bad)), nil
}
