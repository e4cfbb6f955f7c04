package gcptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/api/compute/v1"
)

// page cuts a list of n items: the page the request's pageToken names,
// at most the fake's PageSize or the request's own size parameter, and
// the nextPageToken of the rest ("" on the last page). A token the fake
// did not give is a 400, as Compute Engine answers an invalid pageToken.
func (s *Server) page(w http.ResponseWriter, r *http.Request, n int, sizeParam string) (from, to int, next string, ok bool) {
	size := s.opt.PageSize
	if v, err := strconv.Atoi(r.URL.Query().Get(sizeParam)); err == nil && v > 0 && v < size {
		size = v
	}
	if t := r.URL.Query().Get("pageToken"); t != "" {
		v, err := strconv.Atoi(strings.TrimPrefix(t, "page-"))
		if err != nil || !strings.HasPrefix(t, "page-") || v < 0 || v > n {
			writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid value for field 'pageToken': '" + t + "'."})
			return 0, 0, "", false
		}
		from = v
	}
	to = min(from+size, n)
	if to < n {
		next = fmt.Sprintf("page-%d", to)
	}
	return from, to, next, true
}

// nameFilter reads the regular-expression form of a list filter, the one
// field it may name: `name eq "RE2"` (compute-api.json, the filter
// parameter: "The literal value is interpreted as a regular expression
// using GoogleRE2 library syntax. The literal value must match the entire
// field.").
func nameFilter(w http.ResponseWriter, f string) (*regexp.Regexp, bool) {
	if f == "" {
		return regexp.MustCompile(".*"), true
	}
	m := regexp.MustCompile(`^name eq "(.*)"$`).FindStringSubmatch(f)
	if m == nil {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid list filter expression '" + f + "'."})
		return nil, false
	}
	re, err := regexp.Compile("^(?:" + m[1] + ")$")
	if err != nil {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid regular expression in filter."})
		return nil, false
	}
	return re, true
}

// eqFilter reads the AIP-160 form `field = "value"` of a list filter.
func eqFilter(f, field string) (string, bool) {
	m := regexp.MustCompile(`^` + regexp.QuoteMeta(field) + ` = "([^"]*)"$`).FindStringSubmatch(f)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// scoped is one entry of an aggregated list: its scope and item.
type scoped[T any] struct {
	scope string
	item  T
}

// perZone is every zone's names that re matches, each made an item of the zone's scope.
func perZone[T any](s *Server, re *regexp.Regexp, names func(Zone) []string, item func(z Zone, name string) T) []scoped[T] {
	var all []scoped[T]
	for _, z := range s.opt.Zones {
		for _, name := range names(z) {
			if re.MatchString(name) {
				all = append(all, scoped[T]{"zones/" + z.Name, item(z, name)})
			}
		}
	}
	return all
}

// aggregatedPage pages an aggregated list and groups the page by scope, each
// scope's items in the API's scoped list.
func aggregatedPage[T, L any](s *Server, w http.ResponseWriter, r *http.Request, all []scoped[T], list func([]T) L) (map[string]L, string, bool) {
	from, to, next, ok := s.page(w, r, len(all), "maxResults")
	if !ok {
		return nil, "", false
	}
	byScope := map[string][]T{}
	for _, e := range all[from:to] {
		byScope[e.scope] = append(byScope[e.scope], e.item)
	}
	items := map[string]L{}
	for k, v := range byScope {
		items[k] = list(v)
	}
	return items, next, true
}

// listPage sorts a list by name and cuts the request's page of it.
func listPage[T any](s *Server, w http.ResponseWriter, r *http.Request, all []T, name func(T) string) ([]T, string, bool) {
	sort.Slice(all, func(i, j int) bool { return name(all[i]) < name(all[j]) })
	from, to, next, ok := s.page(w, r, len(all), "maxResults")
	if !ok {
		return nil, "", false
	}
	return all[from:to], next, true
}

// machineTypes serves machineTypes.aggregatedList
// (MachineTypeAggregatedList: "items": {"zones/us-central1-a":
// {"machineTypes": [...]}} and "nextPageToken"), every zone's types
// flattened, filtered and paged by maxResults.
func (s *Server) machineTypes(w http.ResponseWriter, r *http.Request) {
	re, ok := nameFilter(w, r.URL.Query().Get("filter"))
	if !ok {
		return
	}
	all := perZone(s, re, func(z Zone) []string { return z.MachineTypes }, func(z Zone, name string) *compute.MachineType {
		mt := *machineTypes[name]
		mt.Zone = z.Name
		mt.SelfLink = s.URL + "/compute/v1/projects/" + Project + "/zones/" + z.Name + "/machineTypes/" + name
		return &mt
	})
	items, next, ok := aggregatedPage(s, w, r, all, func(v []*compute.MachineType) compute.MachineTypesScopedList {
		return compute.MachineTypesScopedList{MachineTypes: v}
	})
	if !ok {
		return
	}
	writeJSON(w, compute.MachineTypeAggregatedList{Kind: "compute#machineTypeAggregatedList", Items: items, NextPageToken: next})
}

// acceleratorTypes serves acceleratorTypes.aggregatedList
// (AcceleratorTypeAggregatedList), as machineTypes.
func (s *Server) acceleratorTypes(w http.ResponseWriter, r *http.Request) {
	re, ok := nameFilter(w, r.URL.Query().Get("filter"))
	if !ok {
		return
	}
	all := perZone(s, re, func(z Zone) []string { return z.Accelerators }, func(z Zone, name string) *compute.AcceleratorType {
		return &compute.AcceleratorType{Kind: "compute#acceleratorType", Name: name, Zone: z.Name, MaximumCardsPerInstance: 8, Description: name}
	})
	items, next, ok := aggregatedPage(s, w, r, all, func(v []*compute.AcceleratorType) compute.AcceleratorTypesScopedList {
		return compute.AcceleratorTypesScopedList{AcceleratorTypes: v}
	})
	if !ok {
		return
	}
	writeJSON(w, compute.AcceleratorTypeAggregatedList{Kind: "compute#acceleratorTypeAggregatedList", Items: items, NextPageToken: next})
}

// calendarMode serves advice.calendarMode ("Advise how, where and when to
// create the requested amount of instances with specified accelerators,
// within the specified time and location limits"): for the one spec
// (FutureResourcesSpec; "Currently only one value is allowed in this
// map") it recommends windows starting at 00:00 UTC in the start range,
// in a zone whose capacity holds the count beside the future
// reservations already there; zones that cannot are in otherLocations
// with NO_CAPACITY. A window lasts from minDuration to maxDuration
// (FlexibleTimeRange: "a flexible time range with flexible start time
// and duration"; gcloud's example asks --duration-range=min=7d,max=14d):
// the fake recommends the longest, in whole days, the zone holds; a
// minimum over the maximum is "a contradictory time range that cannot be
// matched by any Interval. This causes a validation error."
func (s *Server) calendarMode(w http.ResponseWriter, r *http.Request, region string) {
	var req compute.CalendarModeAdviceRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.FutureResourcesSpecs) != 1 {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "futureResourcesSpecs: exactly one spec is allowed."})
		return
	}
	var key string
	var spec compute.FutureResourcesSpec
	for k, v := range req.FutureResourcesSpecs {
		key, spec = k, v
	}
	sku, tr := spec.TargetResources, spec.TimeRangeSpec
	if sku == nil || sku.SpecificSkuResources == nil || tr == nil {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "targetResources.specificSkuResources and timeRangeSpec are required."})
		return
	}
	from, err1 := time.Parse(time.RFC3339, tr.StartTimeNotEarlierThan)
	to, err2 := time.Parse(time.RFC3339, tr.StartTimeNotLaterThan)
	minDur, err3 := time.ParseDuration(tr.MinDuration)
	maxDur, err4 := time.ParseDuration(tr.MaxDuration)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || minDur > maxDur {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "timeRangeSpec: want RFC 3339 start bounds and durations such as \"172800s\", minDuration not over maxDuration."})
		return
	}
	want := sku.SpecificSkuResources.InstanceCount
	resp := compute.CalendarModeAdviceResponse{}
	start := from.UTC().Truncate(24 * time.Hour)
	if start.Before(from) {
		start = start.Add(24 * time.Hour)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ; !start.After(to) && len(resp.Recommendations) < 3; start = start.Add(24 * time.Hour) {
		rec := compute.FutureResourcesRecommendation{StartTime: start.Format(time.RFC3339),
			RecommendationType: "FUTURE_RESERVATION", OtherLocations: map[string]compute.FutureResourcesRecommendationOtherLocation{}}
		for _, z := range s.opt.Zones {
			if !strings.HasPrefix(z.Name, region+"-") || !allowed(spec.LocationPolicy, z.Name) {
				continue
			}
			free, dur := int64(0), maxDur
			for ; dur >= minDur; dur -= 24 * time.Hour {
				if free = int64(z.CalendarCapacity[sku.SpecificSkuResources.MachineType]) - s.heldLocked(z.Name, sku.SpecificSkuResources.MachineType, start, start.Add(dur)); free >= want {
					break
				}
			}
			if rec.Location == "" && free >= want {
				rec.Location, rec.EndTime = "zones/"+z.Name, start.Add(dur).Format(time.RFC3339)
				rec.RecommendationId = fmt.Sprintf("%08x-0000-4000-8000-%012x", start.Unix(), len(s.ops))
				continue
			}
			rec.OtherLocations["zones/"+z.Name] = compute.FutureResourcesRecommendationOtherLocation{Status: "NO_CAPACITY",
				Details: fmt.Sprintf("%d of %d VMs of %s available", max(free, 0), want, sku.SpecificSkuResources.MachineType)}
		}
		if rec.Location != "" {
			resp.Recommendations = append(resp.Recommendations, &compute.CalendarModeRecommendation{
				RecommendationsPerSpec: map[string]compute.FutureResourcesRecommendation{key: rec}})
		}
	}
	writeJSON(w, resp)
}

// allowed follows FutureResourcesSpecLocationPolicy.locations: "If a
// zone is not specified in this map, it is ALLOWed."
func allowed(lp *compute.FutureResourcesSpecLocationPolicy, zone string) bool {
	if lp == nil {
		return true
	}
	l, ok := lp.Locations["zones/"+zone]
	return !ok || l.Preference != "DENY"
}

// heldLocked counts the VMs of a type future reservations hold in a zone
// over a window.
func (s *Server) heldLocked(zone, typ string, from, to time.Time) int64 {
	var n int64
	for _, fr := range s.frs {
		if path.Base(fr.Zone) != zone || fr.SpecificSkuProperties.InstanceProperties.MachineType != typ || fr.Status.ProcurementStatus == "DECLINED" {
			continue
		}
		a, _ := time.Parse(time.RFC3339, fr.TimeWindow.StartTime)
		b, _ := time.Parse(time.RFC3339, fr.TimeWindow.EndTime)
		if a.Before(to) && from.Before(b) {
			n += fr.SpecificSkuProperties.TotalCount
		}
	}
	return n
}

// newOpLocked starts an operation, PENDING (Operation.status: "[Output
// Only] The status of the operation, which can be one of the following:
// PENDING, RUNNING, or DONE"). A requestId already seen returns its
// operation: "the server will know to ignore the request if it has
// already been completed".
func (s *Server) newOpLocked(r *http.Request, scope, where, opType, target string) (*compute.Operation, bool) {
	rid := r.URL.Query().Get("requestId")
	if name, ok := s.byReq[rid]; ok && rid != "" {
		return s.ops[name], false
	}
	s.nOps++
	op := &compute.Operation{Kind: "compute#operation", Name: fmt.Sprintf("operation-%d-%06d", s.opt.Now().Unix(), s.nOps),
		OperationType: opType, Status: "PENDING", TargetLink: target, ClientOperationId: rid,
		InsertTime: s.opt.Now().UTC().Format(time.RFC3339), Progress: 0, User: "gpumarket@" + Project + ".iam.gserviceaccount.com"}
	link := s.URL + "/compute/v1/projects/" + Project + "/" + scope + "/" + where
	if scope == "zones" {
		op.Zone = link
	} else {
		op.Region = link
	}
	op.SelfLink = link + "/operations/" + op.Name
	s.ops[op.Name] = op
	if rid != "" {
		s.byReq[rid] = op.Name
	}
	return op, true
}

// finishLocked reports whether an operation succeeds; when a failure was
// asked for its call, the operation will end in that error ("error":
// {"errors": [{"code", "message"}]} with httpErrorStatusCode).
func (s *Server) finishLocked(op *compute.Operation, call string) bool {
	if f, ok := s.failOp[call]; ok {
		delete(s.failOp, call)
		s.outcome[op.Name] = &compute.Operation{Error: &compute.OperationError{Errors: []*compute.OperationErrorErrors{{Code: f.code, Message: f.msg}}},
			HttpErrorStatusCode: 400, HttpErrorMessage: "BAD REQUEST"}
		return false
	}
	return true
}

// getOp serves zoneOperations.get and regionOperations.get: PENDING
// until asked, RUNNING from the first poll, DONE at the OpPolls-th poll;
// only then does it carry its error or results (Operation.error: "If
// errors are generated during processing of the operation, this field
// will be populated"; httpErrorStatusCode: "If the operation fails").
func (s *Server) getOp(w http.ResponseWriter, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op, ok := s.ops[name]
	if !ok {
		writeError(w, apiError{code: 404, reason: "notFound", status: "NOT_FOUND", msg: "The resource 'operations/" + name + "' was not found"})
		return
	}
	s.opPolls[name]++
	now := s.opt.Now().UTC().Format(time.RFC3339)
	switch {
	case op.Status == "DONE":
	case s.opPolls[name] >= s.opt.OpPolls:
		op.Status, op.Progress, op.EndTime = "DONE", 100, now
		if op.StartTime == "" {
			op.StartTime = now
		}
		if o := s.outcome[name]; o != nil {
			op.Error, op.HttpErrorStatusCode, op.HttpErrorMessage = o.Error, o.HttpErrorStatusCode, o.HttpErrorMessage
			op.InstancesBulkInsertOperationMetadata = o.InstancesBulkInsertOperationMetadata
			delete(s.outcome, name)
		}
	default:
		op.Status, op.Progress, op.StartTime = "RUNNING", 50, now
	}
	writeJSON(w, op)
}

// listOps serves zoneOperations.list and regionOperations.list, filtered
// by `operationType = "…"` or `clientOperationId = "…"`, paged.
func (s *Server) listOps(w http.ResponseWriter, r *http.Request, scope, where string) {
	f := r.URL.Query().Get("filter")
	typ, byType := eqFilter(f, "operationType")
	cid, byID := eqFilter(f, "clientOperationId")
	if f != "" && !byType && !byID {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid list filter expression '" + f + "'."})
		return
	}
	s.mu.Lock()
	var all []*compute.Operation
	for _, op := range s.ops {
		link := op.Zone
		if scope == "regions" {
			link = op.Region
		}
		if path.Base(link) != where || byType && op.OperationType != typ || byID && op.ClientOperationId != cid {
			continue
		}
		c := *op
		all = append(all, &c)
	}
	s.mu.Unlock()
	page, next, ok := listPage(s, w, r, all, func(o *compute.Operation) string { return o.Name })
	if ok {
		writeJSON(w, compute.OperationList{Kind: "compute#operationList", Items: page, NextPageToken: next})
	}
}
