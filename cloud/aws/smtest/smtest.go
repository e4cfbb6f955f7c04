// Package smtest is a local SageMaker endpoint for tests of training
// plans, in the wire protocol aws-sdk-go-v2's SageMaker client speaks:
// AWS JSON 1.1 (POST /, X-Amz-Target: SageMaker.<Operation>, bodies
// application/x-amz-json-1.1, timestamps as epoch seconds, errors as
// {"__type": code, "message": …}), so the real client runs against it.
// Point the SDK at it with BaseEndpoint or AWS_ENDPOINT_URL_SAGEMAKER.
//
// Each handler follows the API reference page of its operation
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_<Op>.html)
// and the model in aws-sdk-go-v2/service/sagemaker (api_op_<Op>.go,
// types/types.go), cited where it decides an answer.
package smtest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Segment is one ReservedCapacityOffering of an offering.
type Segment struct {
	Zone       string
	Start, End time.Time
}

// Offering is a training plan offering the fake sells.
type Offering struct {
	ID           string
	InstanceType string // "ml.p5.48xlarge"
	Count        int
	Target       string // "training-job", "hyperpod-cluster"
	UpfrontFee   string
	Segments     []Segment
}

// Plan is a training plan bought from the fake.
type Plan struct {
	Name, ARN, Region string
	Offering          Offering
	Status            string
	InUse             int
	Tags              map[string]string
}

// Server is the fake. Its fields are set before use and read under mu.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	offerings []Offering
	plans     []*Plan
	throttle  map[string]int // operation → calls left to throttle
	calls     map[string]int
	// LimitExceeded makes CreateTrainingPlan refuse with ResourceLimitExceeded.
	limitExceeded bool
	// loseCreate makes CreateTrainingPlan buy and then drop the connection.
	loseCreate bool
	// PageSize bounds ListTrainingPlans' pages (default 2, to page in tests).
	pageSize int
	// Searches are the SearchTrainingPlanOfferings bodies received.
	searches []map[string]any
}

// New starts a fake selling the offerings.
func New(offerings ...Offering) *Server {
	s := &Server{offerings: offerings, throttle: map[string]int{}, calls: map[string]int{}, pageSize: 2}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Throttle makes the next n calls of op answer ThrottlingException.
func (s *Server) Throttle(op string, n int) { s.mu.Lock(); s.throttle[op] = n; s.mu.Unlock() }

// RefuseCreate makes CreateTrainingPlan answer ResourceLimitExceeded.
func (s *Server) RefuseCreate(on bool) { s.mu.Lock(); s.limitExceeded = on; s.mu.Unlock() }

// LoseCreate makes CreateTrainingPlan buy, then close the connection unanswered.
func (s *Server) LoseCreate(on bool) { s.mu.Lock(); s.loseCreate = on; s.mu.Unlock() }

// Calls returns how many requests of op reached the fake.
func (s *Server) Calls(op string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.calls[op] }

// Searches returns the SearchTrainingPlanOfferings requests received.
func (s *Server) Searches() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.searches...)
}

// Plans returns copies of the plans bought.
func (s *Server) Plans() []Plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Plan
	for _, p := range s.plans {
		out = append(out, *p)
	}
	return out
}

// SetPlan changes a bought plan's status and in-use count, as SageMaker moves it.
func (s *Server) SetPlan(name, status string, inUse int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.plans {
		if p.Name == name {
			p.Status, p.InUse = status, inUse
		}
	}
}

// AddPlan records a plan bought elsewhere (by another process, or before a lost answer).
func (s *Server) AddPlan(p Plan) { s.mu.Lock(); s.plans = append(s.plans, &p); s.mu.Unlock() }

// regionOf reads the region from SigV4's credential scope (…/date/region/sagemaker/aws4_request).
var scope = regexp.MustCompile(`Credential=[^/]+/\d+/([a-z0-9-]+)/sagemaker/`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "SageMaker.")
	if r.Method != http.MethodPost || !ok {
		writeErr(w, http.StatusBadRequest, "UnknownOperationException", "want POST with X-Amz-Target SageMaker.<Operation>")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		writeErr(w, http.StatusBadRequest, "SerializationException", "Content-Type "+ct+", want application/x-amz-json-1.1")
		return
	}
	region := "us-east-1"
	if m := scope.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		region = m[1]
	}
	var in map[string]any
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeErr(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	// CommonErrors: ThrottlingException, "the request was denied due to
	// request throttling" (HTTP 400).
	if s.throttle[op] > 0 {
		s.throttle[op]--
		writeErr(w, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		return
	}
	switch op {
	case "SearchTrainingPlanOfferings":
		s.search(w, in)
	case "CreateTrainingPlan":
		s.create(w, region, in)
	case "DescribeTrainingPlan":
		s.describe(w, region, in)
	case "ListTrainingPlans":
		s.list(w, region, in)
	case "ListTags":
		s.listTags(w, in)
	default:
		writeErr(w, http.StatusBadRequest, "UnknownOperationException", "this fake answers training plan operations only: "+op)
	}
}

// search follows API_SearchTrainingPlanOfferings: offerings of the
// InstanceType and InstanceCount asked for, for the TargetResources asked
// for ("Training plans are specific to their target resource"), whose
// reserved capacity starts after StartTimeAfter and ends before
// EndTimeBefore; TrainingPlanOfferings is required in the answer, so no
// match is an empty list, not an error. DurationHours is the total of the
// segments ("The number of whole hours in the total duration").
func (s *Server) search(w http.ResponseWriter, in map[string]any) {
	s.searches = append(s.searches, in)
	typ, _ := in["InstanceType"].(string)
	count := num(in["InstanceCount"])
	after, before := when(in["StartTimeAfter"]), when(in["EndTimeBefore"])
	targets := strs(in["TargetResources"])
	out := []map[string]any{}
	for _, o := range s.offerings {
		if (typ != "" && o.InstanceType != typ) || (count > 0 && o.Count != int(count)) || (len(targets) > 0 && !contains(targets, o.Target)) {
			continue
		}
		if (!after.IsZero() && o.Segments[0].Start.Before(after)) || (!before.IsZero() && o.Segments[len(o.Segments)-1].End.After(before)) {
			continue
		}
		out = append(out, offeringJSON(o, in))
	}
	writeJSON(w, map[string]any{"TrainingPlanOfferings": out})
}

func offeringJSON(o Offering, in map[string]any) map[string]any {
	var segs []map[string]any
	var total time.Duration
	for _, sg := range o.Segments {
		d := sg.End.Sub(sg.Start)
		total += d
		segs = append(segs, map[string]any{"InstanceType": o.InstanceType, "InstanceCount": o.Count, "AvailabilityZone": sg.Zone,
			"DurationHours": int64(d / time.Hour), "DurationMinutes": int64(d%time.Hour) / int64(time.Minute),
			"StartTime": epoch(sg.Start), "EndTime": epoch(sg.End), "ReservedCapacityType": "Instance"})
	}
	x := map[string]any{"TrainingPlanOfferingId": o.ID, "TargetResources": []string{o.Target}, "UpfrontFee": o.UpfrontFee,
		"CurrencyCode": "USD", "DurationHours": int64(total / time.Hour), "DurationMinutes": int64(total%time.Hour) / int64(time.Minute),
		"ReservedCapacityOfferings": segs}
	if v, ok := in["StartTimeAfter"]; ok {
		x["RequestedStartTimeAfter"] = v
	}
	if v, ok := in["EndTimeBefore"]; ok {
		x["RequestedEndTimeBefore"] = v
	}
	return x
}

// create follows API_CreateTrainingPlan: TrainingPlanName and
// TrainingPlanOfferingId are required; the answer is the plan's ARN.
// Errors: ResourceLimitExceeded ("You have exceeded an SageMaker resource
// limit"), ResourceNotFound (an offering it does not know), ResourceInUse
// (a name already taken).
func (s *Server) create(w http.ResponseWriter, region string, in map[string]any) {
	name, _ := in["TrainingPlanName"].(string)
	id, _ := in["TrainingPlanOfferingId"].(string)
	if !validName.MatchString(name) || id == "" {
		writeErr(w, http.StatusBadRequest, "ValidationException", "TrainingPlanName and TrainingPlanOfferingId are required; the name matches "+validName.String())
		return
	}
	if s.limitExceeded {
		writeErr(w, http.StatusBadRequest, "ResourceLimitExceeded", "You have exceeded an SageMaker resource limit: training plans in "+region)
		return
	}
	for _, p := range s.plans {
		if p.Name == name && p.Region == region {
			writeErr(w, http.StatusBadRequest, "ResourceInUse", "Training plan "+name+" already exists")
			return
		}
	}
	var off *Offering
	for i := range s.offerings {
		if s.offerings[i].ID == id {
			off = &s.offerings[i]
		}
	}
	if off == nil {
		writeErr(w, http.StatusBadRequest, "ResourceNotFound", "Training plan offering "+id+" not found")
		return
	}
	tags := map[string]string{}
	for _, t := range anyList(in["Tags"]) {
		m, _ := t.(map[string]any)
		k, _ := m["Key"].(string)
		v, _ := m["Value"].(string)
		tags[k] = v
	}
	p := &Plan{Name: name, ARN: fmt.Sprintf("arn:aws:sagemaker:%s:123456789012:training-plan/%s", region, name), Region: region,
		Offering: *off, Status: "Pending", Tags: tags}
	s.plans = append(s.plans, p)
	// An offering bought is no longer offered.
	kept := s.offerings[:0]
	for _, o := range s.offerings {
		if o.ID != id {
			kept = append(kept, o)
		}
	}
	s.offerings = kept
	if s.loseCreate {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
	}
	writeJSON(w, map[string]any{"TrainingPlanArn": p.ARN})
}

// validName is the model's pattern of TrainingPlanName.
var validName = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}$`)

// summary is a plan as API_TrainingPlanSummary and DescribeTrainingPlan
// show it: Status, the times, counts and each ReservedCapacitySummary.
func summary(p *Plan) map[string]any {
	o := p.Offering
	var rcs []map[string]any
	var total time.Duration
	for i, sg := range o.Segments {
		d := sg.End.Sub(sg.Start)
		total += d
		rcs = append(rcs, map[string]any{"ReservedCapacityArn": fmt.Sprintf("%s/rc-%d", p.ARN, i), "InstanceType": o.InstanceType,
			"TotalInstanceCount": o.Count, "Status": "Scheduled", "AvailabilityZone": sg.Zone, "DurationHours": int64(d / time.Hour),
			"StartTime": epoch(sg.Start), "EndTime": epoch(sg.End)})
	}
	x := map[string]any{"TrainingPlanArn": p.ARN, "TrainingPlanName": p.Name, "Status": p.Status,
		"StartTime": epoch(o.Segments[0].Start), "EndTime": epoch(o.Segments[len(o.Segments)-1].End),
		"DurationHours": int64(total / time.Hour), "UpfrontFee": o.UpfrontFee, "CurrencyCode": "USD",
		"TotalInstanceCount": o.Count, "AvailableInstanceCount": o.Count - p.InUse, "InUseInstanceCount": p.InUse,
		"TargetResources": []string{o.Target}, "ReservedCapacitySummaries": rcs}
	if p.Status == "Failed" {
		x["StatusMessage"] = "Payment failed"
	}
	return x
}

// describe follows API_DescribeTrainingPlan: the plan by name; an
// unknown name is ResourceNotFound.
func (s *Server) describe(w http.ResponseWriter, region string, in map[string]any) {
	name, _ := in["TrainingPlanName"].(string)
	for _, p := range s.plans {
		if p.Name == name && p.Region == region {
			writeJSON(w, summary(p))
			return
		}
	}
	writeErr(w, http.StatusBadRequest, "ResourceNotFound", "Training plan "+name+" not found")
}

// list follows API_ListTrainingPlans: TrainingPlanSummaries of at most
// MaxResults (here the fake's page size when smaller), and NextToken "to
// continue pagination if more results are available"; Filters by Status.
func (s *Server) list(w http.ResponseWriter, region string, in map[string]any) {
	var mine []*Plan
	for _, p := range s.plans {
		if p.Region != region {
			continue
		}
		ok := true
		for _, f := range anyList(in["Filters"]) {
			m, _ := f.(map[string]any)
			if m["Name"] == "Status" && m["Value"] != p.Status {
				ok = false
			}
		}
		if ok {
			mine = append(mine, p)
		}
	}
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].Name < mine[j].Name })
	from := 0
	if tok, _ := in["NextToken"].(string); tok != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, "page-"))
		if err != nil || n < 0 || n > len(mine) {
			writeErr(w, http.StatusBadRequest, "ValidationException", "invalid NextToken "+tok)
			return
		}
		from = n
	}
	size := s.pageSize
	if m := int(num(in["MaxResults"])); m > 0 && m < size {
		size = m
	}
	to := min(from+size, len(mine))
	out := map[string]any{}
	var sums []map[string]any
	for _, p := range mine[from:to] {
		sums = append(sums, summary(p))
	}
	out["TrainingPlanSummaries"] = append([]map[string]any{}, sums...)
	if to < len(mine) {
		out["NextToken"] = fmt.Sprintf("page-%d", to)
	}
	writeJSON(w, out)
}

// listTags follows API_ListTags: the Tags of the ResourceArn.
func (s *Server) listTags(w http.ResponseWriter, in map[string]any) {
	arn, _ := in["ResourceArn"].(string)
	for _, p := range s.plans {
		if p.ARN == arn {
			keys := make([]string, 0, len(p.Tags))
			for k := range p.Tags {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			tags := []map[string]string{}
			for _, k := range keys {
				tags = append(tags, map[string]string{"Key": k, "Value": p.Tags[k]})
			}
			writeJSON(w, map[string]any{"Tags": tags})
			return
		}
	}
	writeErr(w, http.StatusBadRequest, "ResourceNotFound", "no resource "+arn)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", code)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}

func epoch(t time.Time) float64 { return float64(t.Unix()) }

func when(v any) time.Time {
	f := num(v)
	if f == 0 {
		return time.Time{}
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

func num(v any) float64 { f, _ := v.(float64); return f }

func anyList(v any) []any { l, _ := v.([]any); return l }

func strs(v any) []string {
	var out []string
	for _, x := range anyList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
