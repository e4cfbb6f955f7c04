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
	case "DescribeInstances":
		return s.describeInstances(rd, f, reqID)
	case "DescribeSpotInstanceRequests":
		return s.describeSpotInstanceRequests(rd, f, reqID)
	case "DescribeFleetInstances":
		return s.describeFleetInstances(rd, f, reqID)
	case "TerminateInstances":
		return s.terminateInstances(rd, f, reqID)
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

// onlyFilters refuses a filter name the call's model does not list, as
// EC2 does: "InvalidParameterValue … The filter 'tag:Name' is invalid"
// (DescribeInstanceStatus in aws/aws-cli#7225, DescribeInstances in
// boto/boto3#1299). A name ending in ":" allows any suffix ("tag:").
func onlyFilters(f url.Values, allowed ...string) *apiError {
	for name := range filters(f) {
		ok := false
		for _, a := range allowed {
			ok = ok || name == a || (strings.HasSuffix(a, ":") && strings.HasPrefix(name, a))
		}
		if !ok {
			return badParam("The filter '%s' is invalid", name)
		}
	}
	return nil
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
