package gcptest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	billing "google.golang.org/api/cloudbilling/v1"
	"google.golang.org/api/compute/v1"
	monitoring "google.golang.org/api/monitoring/v3"
)

var rfc1035 = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// insertFR serves futureReservations.insert: the reservation is made at
// once (PENDING_APPROVAL while its operation runs, then APPROVED), or
// DECLINED when calendar mode cannot hold its count in its window; a name
// taken answers 409 alreadyExists ("The resource … already exists").
func (s *Server) insertFR(w http.ResponseWriter, r *http.Request, zone string) {
	var fr compute.FutureReservation
	if err := json.NewDecoder(r.Body).Decode(&fr); err != nil || !rfc1035.MatchString(fr.Name) || len(fr.Name) > 63 ||
		fr.SpecificSkuProperties == nil || fr.SpecificSkuProperties.InstanceProperties == nil || fr.TimeWindow == nil {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid value for field 'resource': name (RFC 1035), specificSkuProperties and timeWindow are required."})
		return
	}
	start, err1 := time.Parse(time.RFC3339, fr.TimeWindow.StartTime)
	end, err2 := time.Parse(time.RFC3339, fr.TimeWindow.EndTime)
	if err1 != nil || err2 != nil || !end.After(start) {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid value for field 'resource.timeWindow'."})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := zone + "/" + fr.Name
	target := s.URL + "/compute/v1/projects/" + Project + "/zones/" + zone + "/futureReservations/" + fr.Name
	op, fresh := s.newOpLocked(r, "zones", zone, "insert", target)
	if !fresh {
		writeJSON(w, op)
		return
	}
	if _, taken := s.frs[key]; taken {
		delete(s.ops, op.Name)
		writeError(w, apiError{code: 409, reason: "alreadyExists", status: "ALREADY_EXISTS", msg: fmt.Sprintf("The resource 'projects/%s/zones/%s/futureReservations/%s' already exists", Project, zone, fr.Name)})
		return
	}
	if !s.finishLocked(op, "futureReservations.insert") {
		writeJSON(w, op)
		return
	}
	status := "PENDING_APPROVAL"
	typ := fr.SpecificSkuProperties.InstanceProperties.MachineType
	for _, z := range s.opt.Zones {
		if z.Name == zone && int64(z.CalendarCapacity[typ])-s.heldLocked(zone, typ, start, end) < fr.SpecificSkuProperties.TotalCount {
			status = "DECLINED"
		}
	}
	fr.Kind, fr.Zone, fr.SelfLink = "compute#futureReservation", s.URL+"/compute/v1/projects/"+Project+"/zones/"+zone, target
	fr.Id = uint64(len(s.frs)+1) * 7919
	fr.CreationTimestamp = s.opt.Now().UTC().Format(time.RFC3339)
	fr.Status = &compute.FutureReservationStatus{ProcurementStatus: status}
	s.frs[key] = &fr
	writeJSON(w, op)
}

// getFR serves futureReservations.get; a reservation pending approval is
// APPROVED once read after its operation is done.
func (s *Server) getFR(w http.ResponseWriter, zone, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fr, ok := s.frs[zone+"/"+name]
	if !ok {
		writeError(w, apiError{code: 404, reason: "notFound", status: "NOT_FOUND", msg: fmt.Sprintf("The resource 'projects/%s/zones/%s/futureReservations/%s' was not found", Project, zone, name)})
		return
	}
	if fr.Status.ProcurementStatus == "PENDING_APPROVAL" {
		fr.Status.ProcurementStatus = "APPROVED"
	}
	writeJSON(w, fr)
}

// listFRs serves futureReservations.list (FutureReservationsListResponse),
// paged by maxResults.
func (s *Server) listFRs(w http.ResponseWriter, r *http.Request, zone string) {
	s.mu.Lock()
	var all []*compute.FutureReservation
	for k, fr := range s.frs {
		if strings.HasPrefix(k, zone+"/") {
			c := *fr
			all = append(all, &c)
		}
	}
	s.mu.Unlock()
	page, next, ok := listPage(s, w, r, all, func(f *compute.FutureReservation) string { return f.Name })
	if ok {
		writeJSON(w, compute.FutureReservationsListResponse{Kind: "compute#futureReservationsListResponse", Items: page, NextPageToken: next})
	}
}

// aggregatedFRs serves futureReservations.aggregatedList ("Retrieves an
// aggregated list of future reservations": FutureReservationsAggregatedListResponse,
// "items" keyed by "zones/ZONE" holding {"futureReservations": [...]},
// and "nextPageToken"), filtered by the regular-expression form on name,
// paged by maxResults across zones.
func (s *Server) aggregatedFRs(w http.ResponseWriter, r *http.Request) {
	re, ok := nameFilter(w, r.URL.Query().Get("filter"))
	if !ok {
		return
	}
	s.mu.Lock()
	var all []scoped[*compute.FutureReservation]
	for _, fr := range s.frs {
		if re.MatchString(fr.Name) {
			c := *fr
			all = append(all, scoped[*compute.FutureReservation]{"zones/" + path.Base(fr.Zone), &c})
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].scope+"/"+all[i].item.Name < all[j].scope+"/"+all[j].item.Name })
	items, next, ok := aggregatedPage(s, w, r, all, func(v []*compute.FutureReservation) compute.FutureReservationsScopedList {
		return compute.FutureReservationsScopedList{FutureReservations: v}
	})
	if !ok {
		return
	}
	writeJSON(w, compute.FutureReservationsAggregatedListResponse{Kind: "compute#futureReservationsAggregatedListResponse", Items: items, NextPageToken: next})
}

// bulkInsert serves regionInstances.bulkInsert: it makes up to count VMs
// (at least minCount, else none: "If min_count instances cannot be
// created, then no instances will be created") named by namePattern's
// #### sequence, in the allowed zones that sell the machine type, at most
// each zone's Spot capacity for SPOT VMs. Its operation's
// instancesBulkInsertOperationMetadata says how many were made per zone.
func (s *Server) bulkInsert(w http.ResponseWriter, r *http.Request, region string) {
	var req compute.BulkInsertInstanceResource
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.InstanceProperties == nil || req.Count < 1 || !strings.Contains(req.NamePattern, "#") {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid value for field 'resource': count, namePattern and instanceProperties are required."})
		return
	}
	props := req.InstanceProperties
	if props.Scheduling == nil || props.Scheduling.ProvisioningModel == "SPOT" && props.Scheduling.InstanceTerminationAction == "" {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid value for field 'resource.instanceProperties.scheduling.instanceTerminationAction': Spot VMs need a termination action."})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	op, fresh := s.newOpLocked(r, "regions", region, "bulkInsert", "")
	if !fresh {
		writeJSON(w, op)
		return
	}
	if !s.finishLocked(op, "regionInstances.bulkInsert") {
		writeJSON(w, op)
		return
	}
	status := map[string]compute.BulkInsertOperationStatus{}
	minCount := req.MinCount
	if minCount == 0 {
		minCount = req.Count
	}
	var made []*vm
	for _, z := range s.opt.Zones {
		if !strings.HasPrefix(z.Name, region+"-") || !sells(z, props.MachineType) || !zoneAllowed(req.LocationPolicy, z.Name) {
			continue
		}
		capacity := z.SpotCapacity[props.MachineType]
		if capacity == 0 {
			capacity = 16
		}
		free := int64(capacity) - s.runningLocked(z.Name, props.MachineType)
		n := min(req.Count-int64(len(made)), max(free, 0))
		for i := int64(0); i < n; i++ {
			made = append(made, s.newVMLocked(z.Name, req.NamePattern, props))
		}
		if n > 0 {
			status["zones/"+z.Name] = compute.BulkInsertOperationStatus{CreatedVmCount: n, TargetVmCount: req.Count, Status: "DONE"}
		}
	}
	if int64(len(made)) < minCount {
		for _, v := range made {
			delete(s.vms, v.in.Name)
		}
		s.outcome[op.Name] = &compute.Operation{Error: &compute.OperationError{Errors: []*compute.OperationErrorErrors{{Code: "ZONE_RESOURCE_POOL_EXHAUSTED",
			Message: fmt.Sprintf("The zone does not have enough resources available to fulfill the request. Only %d of the minimum %d VMs could be created.", len(made), minCount)}}},
			HttpErrorStatusCode: 503, HttpErrorMessage: "SERVICE UNAVAILABLE"}
		writeJSON(w, op)
		return
	}
	s.outcome[op.Name] = &compute.Operation{InstancesBulkInsertOperationMetadata: &compute.InstancesBulkInsertOperationMetadata{PerLocationStatus: status}}
	writeJSON(w, op)
}

func sells(z Zone, typ string) bool {
	for _, t := range z.MachineTypes {
		if t == typ {
			return true
		}
	}
	return false
}

// zoneAllowed follows LocationPolicy.locations: a zone with preference
// DENY is not used; with any ALLOW listed, only those are.
func zoneAllowed(lp *compute.LocationPolicy, zone string) bool {
	if lp == nil || len(lp.Locations) == 0 {
		return true
	}
	l, ok := lp.Locations["zones/"+zone]
	return ok && l.Preference != "DENY"
}

func (s *Server) runningLocked(zone, typ string) int64 {
	var n int64
	for _, v := range s.vms {
		if path.Base(v.in.Zone) == zone && path.Base(v.in.MachineType) == typ && v.ended.IsZero() {
			n++
		}
	}
	return n
}

// newVMLocked makes one VM of a bulk insert from its instanceProperties,
// description included ("An optional text description for the instances
// that are created from these properties").
func (s *Server) newVMLocked(zone, pattern string, props *compute.InstanceProperties) *vm {
	i := 1
	name := ""
	for {
		hashes := regexp.MustCompile(`#+`).FindString(pattern)
		name = strings.Replace(pattern, hashes, fmt.Sprintf("%0*d", len(hashes), i), 1)
		if _, taken := s.vms[name]; !taken {
			break
		}
		i++
	}
	now := s.opt.Now().UTC()
	id := uint64(len(s.vms)+1)*104729 + 1
	in := &compute.Instance{Kind: "compute#instance", Name: name, Id: id, Status: "RUNNING",
		Zone:        s.URL + "/compute/v1/projects/" + Project + "/zones/" + zone,
		MachineType: s.URL + "/compute/v1/projects/" + Project + "/zones/" + zone + "/machineTypes/" + props.MachineType,
		Labels:      props.Labels, Scheduling: props.Scheduling, GuestAccelerators: props.GuestAccelerators, Description: props.Description,
		CreationTimestamp: now.Format(time.RFC3339), LastStartTimestamp: now.Format(time.RFC3339)}
	in.SelfLink = in.Zone + "/instances/" + name
	v := &vm{in: in, created: now, id: id}
	s.vms[name] = v
	return v
}

// instances serves instances.aggregatedList filtered by one label
// (`labels.KEY = "VALUE"`, the AIP-160 form on a nested field), paged.
// A deleted VM is no longer listed.
func (s *Server) instances(w http.ResponseWriter, r *http.Request) {
	m := regexp.MustCompile(`^labels\.([a-z0-9_-]+) = "([^"]*)"$`).FindStringSubmatch(r.URL.Query().Get("filter"))
	if m == nil {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "Invalid list filter expression."})
		return
	}
	s.mu.Lock()
	var all []*compute.Instance
	for _, v := range s.vms {
		if v.ended.IsZero() && v.in.Labels[m[1]] == m[2] {
			c := *v.in
			all = append(all, &c)
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	var vms []scoped[*compute.Instance]
	for _, in := range all {
		vms = append(vms, scoped[*compute.Instance]{"zones/" + path.Base(in.Zone), in})
	}
	items, next, ok := aggregatedPage(s, w, r, vms, func(v []*compute.Instance) compute.InstancesScopedList {
		return compute.InstancesScopedList{Instances: v}
	})
	if !ok {
		return
	}
	writeJSON(w, compute.InstanceAggregatedList{Kind: "compute#instanceAggregatedList", Items: items, NextPageToken: next})
}

// deleteVM serves instances.delete: a zonal operation; the VM is gone.
func (s *Server) deleteVM(w http.ResponseWriter, r *http.Request, zone, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[name]
	if !ok || !v.ended.IsZero() || path.Base(v.in.Zone) != zone {
		if rid := r.URL.Query().Get("requestId"); rid != "" && s.byReq[rid] != "" {
			writeJSON(w, s.ops[s.byReq[rid]])
			return
		}
		writeError(w, apiError{code: 404, reason: "notFound", status: "NOT_FOUND", msg: fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' was not found", Project, zone, name)})
		return
	}
	op, _ := s.newOpLocked(r, "zones", zone, "delete", v.in.SelfLink)
	v.ended = s.opt.Now().UTC()
	writeJSON(w, op)
}

// Preempt takes a Spot VM back at its time, as Compute Engine does: the
// VM ends (termination action DELETE) and its zone records a
// compute.instances.preempted operation.
func (s *Server) Preempt(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[name]
	if !ok || !v.ended.IsZero() {
		return fmt.Errorf("no running VM %s", name)
	}
	v.ended = s.opt.Now().UTC()
	s.nOps++
	zone := path.Base(v.in.Zone)
	op := &compute.Operation{Kind: "compute#operation", Name: fmt.Sprintf("systemevent-%d-%06d", v.ended.Unix(), s.nOps),
		OperationType: "compute.instances.preempted", Status: "DONE", TargetLink: v.in.SelfLink, Zone: v.in.Zone,
		InsertTime: v.ended.Format(time.RFC3339), StartTime: v.ended.Format(time.RFC3339), EndTime: v.ended.Format(time.RFC3339),
		StatusMessage: "Instance was preempted.", User: "system"}
	op.SelfLink = s.URL + "/compute/v1/projects/" + Project + "/zones/" + zone + "/operations/" + op.Name
	s.ops[op.Name] = op
	return nil
}

// VM returns a VM the fake made, nil if none.
func (s *Server) VM(name string) *compute.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.vms[name]; ok {
		c := *v.in
		return &c
	}
	return nil
}

// VMs lists the names of the VMs running now.
func (s *Server) VMs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n, v := range s.vms {
		if v.ended.IsZero() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// FutureReservation returns a reservation made in a zone, nil if none.
func (s *Server) FutureReservation(zone, name string) *compute.FutureReservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fr, ok := s.frs[zone+"/"+name]; ok {
		c := *fr
		return &c
	}
	return nil
}

// skus serves services.skus.list of the Compute Engine service
// (ListSkusResponse: "skus", "nextPageToken"), paged by pageSize.
func (s *Server) skus(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/services/6F81-5844-456A/skus") {
		writeError(w, apiError{code: 404, reason: "notFound", status: "NOT_FOUND", msg: "Service not found."})
		return
	}
	if c := r.URL.Query().Get("currencyCode"); c != "" && c != "USD" {
		writeError(w, apiError{code: 400, reason: "invalid", status: "INVALID_ARGUMENT", msg: "The fake prices in USD only."})
		return
	}
	from, to, next, ok := s.page(w, r, len(s.opt.SKUs), "pageSize")
	if !ok {
		return
	}
	writeJSON(w, billing.ListSkusResponse{Skus: s.opt.SKUs[from:to], NextPageToken: next})
}

// timeSeries serves projects.timeSeries.list for the fake's VMs: filter
// `metric.type = "M" AND resource.type = "gce_instance" AND
// metadata.user_labels."K" = "V"`, an interval, an alignment period and a
// per-series aligner; one series per VM (per GPU for the Ops Agent's
// metric, label gpu_number), points newest first as the API returns them,
// paged by pageSize points.
func (s *Server) timeSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m := regexp.MustCompile(`^metric\.type = "([^"]+)" AND resource\.type = "gce_instance" AND metadata\.user_labels\."([^"]+)" = "([^"]*)"$`).FindStringSubmatch(q.Get("filter"))
	from, err1 := time.Parse(time.RFC3339, q.Get("interval.startTime"))
	to, err2 := time.Parse(time.RFC3339, q.Get("interval.endTime"))
	step, err3 := time.ParseDuration(q.Get("aggregation.alignmentPeriod"))
	if m == nil || err1 != nil || err2 != nil || err3 != nil || step < time.Minute {
		writeError(w, apiError{code: 400, reason: "badRequest", status: "INVALID_ARGUMENT", msg: "Field filter, interval or aggregation.alignmentPeriod had an invalid value."})
		return
	}
	metric := m[1]
	s.mu.Lock()
	var all []*monitoring.TimeSeries
	var names []string
	for n := range s.vms {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := s.vms[n]
		if v.in.Labels[m[2]] != m[3] {
			continue
		}
		gpus := 1
		switch metric {
		case "agent.googleapis.com/gpu/utilization":
			if !s.opt.AgentGPU {
				continue
			}
			gpus = 2
		case "compute.googleapis.com/instance/uptime", "compute.googleapis.com/instance/cpu/utilization":
		default:
			continue
		}
		for g := 0; g < gpus; g++ {
			if ts := s.seriesLocked(v, metric, g, from, to, step); len(ts.Points) > 0 {
				all = append(all, ts)
			}
		}
	}
	s.mu.Unlock()
	// pageSize counts points, not series ("If view is set to FULL, this
	// is the maximum number of Points returned"): a series is cut
	// between pages, each page carrying its part of the points.
	n := 0
	for _, ts := range all {
		n += len(ts.Points)
	}
	pf, pt, next, ok := s.page(w, r, n, "pageSize")
	if !ok {
		return
	}
	var out []*monitoring.TimeSeries
	at := 0
	for _, ts := range all {
		a, b := max(pf-at, 0), min(pt-at, len(ts.Points))
		at += len(ts.Points)
		if a < b {
			part := *ts
			part.Points = ts.Points[a:b]
			out = append(out, &part)
		}
	}
	writeJSON(w, monitoring.ListTimeSeriesResponse{TimeSeries: out, NextPageToken: next})
}

// seriesLocked makes one VM's aligned points over [from, to]: seconds up
// per period (uptime, ALIGN_SUM), CPU 0.4 (a fraction), GPU 80 and 90 %
// on its two cards.
func (s *Server) seriesLocked(v *vm, metric string, gpu int, from, to time.Time, step time.Duration) *monitoring.TimeSeries {
	ts := &monitoring.TimeSeries{MetricKind: "GAUGE", ValueType: "DOUBLE",
		Metric:   &monitoring.Metric{Type: metric, Labels: map[string]string{"instance_name": v.in.Name}},
		Resource: &monitoring.MonitoredResource{Type: "gce_instance", Labels: map[string]string{"instance_id": strconv.FormatUint(v.id, 10), "zone": path.Base(v.in.Zone), "project_id": Project}}}
	if metric == "agent.googleapis.com/gpu/utilization" {
		ts.Metric.Labels = map[string]string{"gpu_number": strconv.Itoa(gpu), "model": "NVIDIA H100 80GB HBM3"}
	}
	end := v.ended
	if end.IsZero() {
		end = s.opt.Now().UTC()
	}
	for t := from.Truncate(step); t.Before(to); t = t.Add(step) {
		a, b := t, t.Add(step)
		if v.created.After(a) {
			a = v.created
		}
		if end.Before(b) {
			b = end
		}
		if !b.After(a) || t.Add(step).After(to.Add(step)) {
			continue
		}
		val := 0.4
		switch metric {
		case "compute.googleapis.com/instance/uptime":
			val = math.Round(b.Sub(a).Seconds())
			ts.MetricKind = "DELTA"
		case "agent.googleapis.com/gpu/utilization":
			val = 80 + 10*float64(gpu)
		}
		pt := &monitoring.Point{Interval: &monitoring.TimeInterval{StartTime: t.Format(time.RFC3339), EndTime: t.Add(step).Format(time.RFC3339)},
			Value: &monitoring.TypedValue{DoubleValue: &val}}
		ts.Points = append([]*monitoring.Point{pt}, ts.Points...)
	}
	return ts
}
