package ec2test

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// The money side of the fake: capacity-block offerings and purchases,
// capacity reservations, EC2 Fleets and the instances they launch. Every
// answer follows the EC2 API model (aws-sdk-go-v2/service/ec2, its
// deserializers name each element) and the documented examples named at
// each handler; testdata/ec2/README.md lists the recorded answers that
// tests share.

// Tags AWS itself puts on a capacity block: before the block starts its
// instance counts read 0, and the count bought is only in the first
// ("View Capacity Blocks", EC2 User Guide; the reservation AWS
// ParallelCluster's tests record shows both tags and TotalInstanceCount 0).
const (
	TagRequestedQuantity = "aws:ec2capacityreservation:incrementalRequestedQuantity"
	TagReservationType   = "aws:ec2capacityreservation:capacityReservationType"
	// TagFleetID is the tag EC2 Fleet puts on every instance it launches.
	TagFleetID = "aws:ec2:fleet-id"
)

// Reservation is a capacity reservation: one made by PurchaseCapacityBlock,
// or one a test adds (AddReservation) as another buyer's look-alike.
type Reservation struct {
	ID           string
	Region       string
	InstanceType string
	Zone         string
	Count        int
	Start, End   time.Time
	Created      time.Time
	// State is the reservation's state. PurchaseCapacityBlock sets
	// payment-pending; once the server's PaymentDelay has passed it is
	// shown paid, and a paid block is shown scheduled, active or expired
	// by the clock. Any other documented state (payment-failed,
	// cancelling, unavailable, …) is shown as it is (SetReservationState).
	State string
	// Tags are the buyer's tags (TagSpecifications); AWS's own are added
	// to every answer.
	Tags       map[string]string
	OfferingID string
}

// FleetRecord is a fleet made by CreateFleet.
type FleetRecord struct {
	ID          string
	Region      string
	Type        string
	ClientToken string
	// State is "active" until DeleteFleets; what DescribeFleets shows
	// also follows ValidFrom and ValidUntil (see fleetView).
	State     string
	Target    int
	OnDemand  int
	Strategy  string
	Overrides []url.Values
	// Instances are the ids the fleet launched (at once for an instant
	// fleet; a request or maintain fleet shows them only from ValidFrom).
	Instances []string
	Lifecycle string
	Template  string
	Created   time.Time
	// ValidFrom and ValidUntil are the fleet's schedule (zero: none).
	ValidFrom, ValidUntil time.Time
	// TerminateAtEnd is TerminateInstancesWithExpiration.
	TerminateAtEnd bool
	// Tags are the fleet's tags; InstanceTags those put on its instances
	// (TagSpecifications of resource type fleet and instance).
	Tags, InstanceTags map[string]string
	// Terminated is set once DeleteFleets terminated the instances.
	Terminated bool
	// Gone are instances terminated one by one: by Interrupt (AWS
	// reclaiming spot capacity) or by TerminateInstances.
	Gone map[string]bool
	// Noticed are the spot instances given an interruption notice, and
	// when (Notice): they run two minutes more, then are gone.
	Noticed map[string]time.Time
}

// Interrupt reclaims n of a fleet's running instances, as AWS interrupts
// spot capacity; a request or instant fleet does not replace them. It
// returns how many were reclaimed.
func (s *Server) Interrupt(fleetID string, n int) int {
	return s.reclaim(fleetID, n, func(fl *FleetRecord, id string) bool {
		if fl.Gone == nil {
			fl.Gone = map[string]bool{}
		}
		fl.Gone[id] = true
		if isSpot(fl, id) {
			s.notice(fl, id, s.now().Add(-NoticeLead)) // it ran out just now
		}
		return true
	})
}

// Reservations returns copies of the capacity reservations bought so far.
func (s *Server) Reservations() []Reservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Reservation
	for _, r := range s.reservations {
		c := *r
		c.State = s.reservationState(r)
		out = append(out, c)
	}
	return out
}

// AddReservation adds a capacity reservation the server did not sell: a
// look-alike bought by someone else, or one a test puts in a given state.
func (s *Server) AddReservation(r Reservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Tags == nil {
		r.Tags = map[string]string{}
	}
	if r.ID == "" {
		r.ID = fmt.Sprintf("cr-%017x", 0xc0000+len(s.reservations)+1)
	}
	s.reservations = append(s.reservations, &r)
}

// SetReservationState puts a reservation in a state (any of the API's
// CapacityReservationState values), as AWS would.
func (s *Server) SetReservationState(id, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reservations {
		if r.ID == id {
			r.State = state
			return true
		}
	}
	return false
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

// SoldBlockCounts are the instance counts capacity blocks are sold in.
var SoldBlockCounts = []string{"1", "2", "4", "8", "16", "32", "64"}

// describeCapacityBlockOfferings answers as the EC2 User Guide ("Find and
// purchase Capacity Blocks") says AWS does: the blocks of the asked length,
// and beside them blocks of other lengths that end at the same time of day
// (one a little shorter, one a little longer, starting at odd times) — the
// answer aws-samples' "Capacity Block for ML with AWS Batch" example shows
// for a 24 h query: 24 h from 11:30, 19 h and 43 h from 16:13
// (testdata/ec2/describe-capacity-block-offerings-24h.xml). Here every
// block within a day of the asked length is offered. Optional members an
// offering lists in Omit are left out, as the model allows.
func (s *Server) describeCapacityBlockOfferings(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	hours, herr := strconv.Atoi(f.Get("CapacityDurationHours"))
	if herr != nil {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter CapacityDurationHours"}
	}
	if !domain.CapacityBlockTerms.ValidHours(hours) {
		return nil, badParam("CapacityDurationHours %d is not a supported duration", hours)
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
	// The API reference: "You must select one of the following options …
	// For instance count 1, 2, 4, 8, 16, 32, or 64 instances"; a count EC2
	// does not sell is refused in its words for InstanceCount ("1001 is an
	// invalid value for InstanceCount. InstanceCount must be between 1 and
	// 1000", CreateCapacityReservation in boto/boto3#2962).
	count, cerr := strconv.Atoi(f.Get("InstanceCount"))
	if cerr != nil || !contains(SoldBlockCounts, strconv.Itoa(count)) {
		return nil, badParam("%s is an invalid value for InstanceCount. InstanceCount must be one of %s.",
			f.Get("InstanceCount"), strings.Join(SoldBlockCounts, ", "))
	}
	from, hasFrom, err := timeParam(f, "StartDateRange")
	if err != nil {
		return nil, err
	}
	to, hasTo, err := timeParam(f, "EndDateRange")
	if err != nil {
		return nil, err
	}
	want := time.Duration(hours) * time.Hour
	var sel []Offering
	for _, o := range rd.Offerings {
		l := o.Length()
		end := o.Start.Add(l)
		if (typ != "" && o.InstanceType != typ) || l <= want-24*time.Hour || l >= want+24*time.Hour ||
			(hasFrom && o.Start.Before(from)) || (hasTo && end.After(to)) {
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
		out = append(out, offeringNode(o, count))
	}
	return document("DescribeCapacityBlockOfferings", reqID, withToken([]node{items("capacityBlockOfferingSet", out)}, tok)...), nil
}

func offeringNode(o Offering, count int) node {
	omit := map[string]bool{}
	for _, k := range o.Omit {
		omit[k] = true
	}
	fee := strconv.FormatFloat(o.UpfrontUSDPerInstance*float64(count), 'f', -1, 64)
	if o.FeeText != "" {
		fee = o.FeeText
	}
	members := []node{
		tx("capacityBlockOfferingId", o.ID), tx("instanceType", o.InstanceType), tx("availabilityZone", o.Zone),
		num("instanceCount", count), tm("startDate", o.Start), tm("endDate", o.Start.Add(o.Length())),
		num("capacityBlockDurationHours", o.Hours), num("capacityBlockDurationMinutes", o.Minutes),
		tx("upfrontFee", fee), tx("currencyCode", "USD"), tx("tenancy", "default"),
	}
	var kept []node
	for _, m := range members {
		// AWS leaves the minutes out of a block of whole hours.
		if omit[m.name] || (m.name == "capacityBlockDurationMinutes" && o.Minutes == 0) {
			continue
		}
		kept = append(kept, m)
	}
	return el("", kept...)
}

// purchaseCapacityBlock buys an offering issued by a search and still on
// sale. Its answer, like AWS's, shows the new reservation payment-pending;
// the buyer's TagSpecifications are kept and shown with AWS's own tags.
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
	tags, terr := tagSpecs(f, "capacity-reservation")
	if terr != nil {
		return nil, terr
	}
	if err := dryRun(f); err != nil {
		return nil, err
	}
	o := iss.offering
	res := &Reservation{ID: fmt.Sprintf("cr-%017x", 0xa0000+len(s.reservations)+1), Region: rd.Name, InstanceType: o.InstanceType,
		Zone: o.Zone, Count: iss.count, Start: o.Start, End: o.Start.Add(o.Length()),
		Created: s.now().UTC(), State: "payment-pending", Tags: tags["capacity-reservation"], OfferingID: id}
	if res.Tags == nil {
		res.Tags = map[string]string{}
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
	return document("PurchaseCapacityBlock", reqID, s.reservationNode("capacityReservation", res, rd, "payment-pending")), nil
}

// tagSpecs reads TagSpecification.N.ResourceType / .Tag.M.Key / .Value
// into tags by resource type; a resource type not in allowed is refused,
// as EC2 refuses tags it cannot put on what the call makes.
func tagSpecs(f url.Values, allowed ...string) (map[string]map[string]string, *apiError) {
	out := map[string]map[string]string{}
	for i := 1; ; i++ {
		p := "TagSpecification." + strconv.Itoa(i) + "."
		rt := f.Get(p + "ResourceType")
		if rt == "" && f.Get(p+"Tag.1.Key") == "" {
			return out, nil
		}
		if !contains(allowed, rt) {
			return nil, badParam("TagSpecification.%d: resource type %q cannot be tagged by this call (want one of %s)", i, rt, strings.Join(allowed, ", "))
		}
		if out[rt] == nil {
			out[rt] = map[string]string{}
		}
		for j := 1; ; j++ {
			k := f.Get(p + "Tag." + strconv.Itoa(j) + ".Key")
			if k == "" {
				break
			}
			v := f.Get(p + "Tag." + strconv.Itoa(j) + ".Value")
			if strings.HasPrefix(strings.ToLower(k), "aws:") {
				return nil, badParam("Tag keys starting with 'aws:' are reserved for internal use")
			}
			if len(k) > 128 || len(v) > 256 {
				return nil, badParam("Tag %q: keys hold up to 128 characters and values up to 256", k)
			}
			out[rt][k] = v
		}
	}
}

func (s *Server) onSale(rd *Region, id string) bool {
	for _, o := range rd.Offerings {
		if o.ID == id {
			return true
		}
	}
	return false
}

// reservationState is the state AWS shows for a reservation now.
func (s *Server) reservationState(r *Reservation) string {
	now := s.now()
	switch r.State {
	case "payment-pending":
		if now.Sub(r.Created) < s.PaymentDelay {
			return "payment-pending"
		}
		fallthrough
	case "scheduled", "active", "expired":
		switch {
		case now.Before(r.Start):
			return "scheduled"
		case now.Before(r.End):
			return "active"
		}
		return "expired"
	}
	return r.State
}

func tagNodes(tags map[string]string) []node {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []node
	for _, k := range keys {
		out = append(out, el("", tx("key", k), tx("value", tags[k])))
	}
	return out
}

// reservationNode renders a capacity-block reservation the way
// DescribeCapacityReservations shows one (the AWS CLI's
// describe-capacity-reservations example, with the capacity-block members
// of the model): before the block is active its instance counts read 0
// and the count bought is in AWS's incrementalRequestedQuantity tag.
func (s *Server) reservationNode(name string, r *Reservation, rd *Region, state string) node {
	tags := map[string]string{TagRequestedQuantity: strconv.Itoa(r.Count), TagReservationType: "capacity-block"}
	for k, v := range r.Tags {
		tags[k] = v
	}
	zoneID := ""
	for _, z := range rd.Zones {
		if z.Name == r.Zone {
			zoneID = z.ID
		}
	}
	total, avail := 0, 0
	if state == "active" {
		total, avail = r.Count, r.Count
	}
	return el(name, tx("capacityReservationId", r.ID), tx("ownerId", "123456789012"),
		tx("capacityReservationArn", "arn:aws:ec2:"+r.Region+":123456789012:capacity-reservation/"+r.ID),
		tx("availabilityZoneId", zoneID), tx("instanceType", r.InstanceType), tx("instancePlatform", "Linux/UNIX"),
		tx("availabilityZone", r.Zone), tx("tenancy", "default"),
		num("totalInstanceCount", total), num("availableInstanceCount", avail), tx("ebsOptimized", "true"), tx("state", state),
		tm("startDate", r.Start), tm("endDate", r.End), tx("endDateType", "limited"), tx("instanceMatchCriteria", "targeted"),
		tm("createDate", r.Created), items("tagSet", tagNodes(tags)), items("capacityAllocationSet", nil),
		tx("reservationType", "capacity-block"))
}

// matchTags applies the tag:KEY and tag-key filters of EC2's Describe
// calls to a resource's tags.
func matchTags(flt map[string][]string, tags map[string]string) bool {
	for name, vals := range flt {
		switch {
		case strings.HasPrefix(name, "tag:"):
			v, ok := tags[strings.TrimPrefix(name, "tag:")]
			if !ok || !contains(vals, v) {
				return false
			}
		case name == "tag-key":
			found := false
			for _, k := range vals {
				_, ok := tags[k]
				found = found || ok
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// capacityReservationFilters are the filters the model lists for
// DescribeCapacityReservations; it lists no reservation-type and no tag
// filter, so the fake refuses them as EC2 refuses a filter it does not know.
var capacityReservationFilters = []string{"instance-type", "owner-id", "instance-platform", "availability-zone",
	"tenancy", "outpost-arn", "state", "start-date", "end-date", "end-date-type", "instance-match-criteria", "placement-group-arn"}

// describeCapacityReservations lists the region's reservations, filtered
// by id and by the model's filters (of which instance-type,
// availability-zone and state are applied), paged.
func (s *Server) describeCapacityReservations(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	if err := onlyFilters(f, capacityReservationFilters...); err != nil {
		return nil, err
	}
	ids := list(f, "CapacityReservationId")
	flt := filters(f)
	type shown struct {
		r     *Reservation
		state string
	}
	var sel []shown
	for _, r := range s.reservations {
		if r.Region != rd.Name || (len(ids) > 0 && !contains(ids, r.ID)) {
			continue
		}
		state := s.reservationState(r)
		if v, ok := flt["instance-type"]; ok && !contains(v, r.InstanceType) {
			continue
		}
		if v, ok := flt["availability-zone"]; ok && !contains(v, r.Zone) {
			continue
		}
		if v, ok := flt["state"]; ok && !contains(v, state) {
			continue
		}
		sel = append(sel, shown{r, state})
	}
	lo, hi, tok, err := s.page(f, len(sel), 1000, 1, 1000)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, x := range sel[lo:hi] {
		out = append(out, s.reservationNode("", x.r, rd, x.state))
	}
	return document("DescribeCapacityReservations", reqID, withToken([]node{items("capacityReservationSet", out)}, tok)...), nil
}

// createFleet makes an EC2 Fleet (the AWS CLI's create-fleet examples):
// an instant fleet launches at once and answers with its instances; a
// request or maintain fleet answers with its id alone and launches from
// ValidFrom until ValidUntil (see fleetView). The parameters the API
// reference says an instant fleet does not take (ValidFrom, ValidUntil,
// TerminateInstancesWithExpiration) and the tags it says a request or
// maintain fleet cannot put on instances are refused.
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
	// "Quotas for EC2 Fleet and Spot Fleet": target capacity per fleet.
	if total > 10000 {
		return nil, &apiError{http.StatusBadRequest, "TargetCapacityLimitExceededException", "The target capacity " + strconv.Itoa(total) + " exceeds the limit of 10000 per fleet"}
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
	typ := f.Get("Type")
	if typ == "" {
		typ = "maintain"
	}
	from, hasFrom, perr := timeParam(f, "ValidFrom")
	if perr != nil {
		return nil, perr
	}
	until, hasUntil, perr := timeParam(f, "ValidUntil")
	if perr != nil {
		return nil, perr
	}
	terminate := f.Get("TerminateInstancesWithExpiration") == "true"
	allowed := []string{"fleet"}
	if typ == "instant" {
		if hasFrom || hasUntil || f.Get("TerminateInstancesWithExpiration") != "" {
			return nil, badParam("ValidFrom, ValidUntil and TerminateInstancesWithExpiration are not supported for fleets of type instant")
		}
		allowed = append(allowed, "instance", "volume", "network-interface")
	}
	now := s.now()
	if hasUntil && !until.After(now) {
		return nil, badParam("ValidUntil %s is in the past", until.UTC().Format(time.RFC3339))
	}
	if hasFrom && hasUntil && !until.After(from) {
		return nil, badParam("ValidUntil %s is not after ValidFrom %s", until.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
	}
	tags, terr := tagSpecs(f, allowed...)
	if terr != nil {
		return nil, terr
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
		Type: typ, ClientToken: token, State: "active", Target: total, OnDemand: od,
		Strategy: f.Get("SpotOptions.AllocationStrategy"), Overrides: overrides, Template: tmpl, Lifecycle: "spot",
		Created: now.UTC(), ValidFrom: from, ValidUntil: until, TerminateAtEnd: terminate,
		Tags: tags["fleet"], InstanceTags: tags["instance"]}
	for i := 0; i < total; i++ {
		fl.Instances = append(fl.Instances, fmt.Sprintf("i-%017x", 0xb0000000+len(s.fleets)*0x100000+i))
	}
	s.fleets = append(s.fleets, fl)
	return s.createFleetAnswer(fl, reqID), nil
}

// createFleetAnswer: an instant fleet's answer lists its instances (and
// the errors of the pools it could not fill); the API reference says both
// are "supported only for fleets of type instant", so a request or
// maintain fleet answers with its id alone.
func (s *Server) createFleetAnswer(fl *FleetRecord, reqID string) []byte {
	if fl.Type != "instant" {
		return document("CreateFleet", reqID, tx("fleetId", fl.ID))
	}
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

// fleetView is what AWS shows of a fleet now: its state, activity and
// running instances. A request or maintain fleet launches nothing before
// ValidFrom (active, pending_fulfillment), runs its instances until
// ValidUntil, and then expires: deleted, its instances terminated when
// TerminateInstancesWithExpiration was set, left running otherwise.
func (s *Server) fleetView(fl *FleetRecord) (state, activity string, running []string) {
	state, activity, running = s.fleetStage(fl)
	var live []string
	for _, id := range running {
		if !fl.Gone[id] && !s.noticeEnded(fl, id) {
			live = append(live, id)
		}
	}
	return state, activity, live
}

// fleetStage is fleetView before instances terminated one by one.
func (s *Server) fleetStage(fl *FleetRecord) (state, activity string, running []string) {
	now := s.now()
	switch {
	case strings.HasPrefix(fl.State, "deleted"):
		if fl.Terminated {
			return fl.State, "fulfilled", nil
		}
		return fl.State, "fulfilled", fl.Instances
	case fl.Type == "instant":
		return "active", "fulfilled", fl.Instances
	case !fl.ValidFrom.IsZero() && now.Before(fl.ValidFrom):
		return "active", "pending_fulfillment", nil
	case !fl.ValidUntil.IsZero() && !now.Before(fl.ValidUntil):
		if fl.TerminateAtEnd {
			return "deleted_terminating", "fulfilled", nil
		}
		return "deleted_running", "fulfilled", fl.Instances
	}
	return "active", "fulfilled", fl.Instances
}

// describeFleets follows the AWS CLI's describe-fleets example. As the API
// reference says, a fleet of type instant is listed only when its id is
// asked for.
func (s *Server) describeFleets(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	// The model's filters for DescribeFleets.
	if err := onlyFilters(f, "activity-status", "excess-capacity-termination-policy", "fleet-state", "replace-unhealthy-instances", "type"); err != nil {
		return nil, err
	}
	ids := list(f, "FleetId")
	flt := filters(f)
	var sel []*FleetRecord
	for _, fl := range s.fleets {
		if fl.Region != rd.Name || (len(ids) > 0 && !contains(ids, fl.ID)) || (len(ids) == 0 && fl.Type == "instant") {
			continue
		}
		state, _, _ := s.fleetView(fl)
		if v, ok := flt["fleet-state"]; ok && !contains(v, strings.ReplaceAll(state, "_", "-")) {
			continue
		}
		if v, ok := flt["type"]; ok && !contains(v, fl.Type) {
			continue
		}
		sel = append(sel, fl)
	}
	if len(ids) > 0 && len(sel) == 0 {
		return nil, &apiError{http.StatusBadRequest, "InvalidFleetId.NotFound", "The fleet ID '" + ids[0] + "' does not exist"}
	}
	lo, hi, tok, err := s.page(f, len(sel), 1000, 1, 1000)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, fl := range sel[lo:hi] {
		out = append(out, s.fleetNode(fl))
	}
	return document("DescribeFleets", reqID, withToken([]node{items("fleetSet", out)}, tok)...), nil
}

// fleetNode renders a fleet as DescribeFleets does. Its fleetInstanceSet
// is filled for instant fleets only: the model's FleetData.Instances is
// "Valid only when Type is set to instant"; a request or maintain fleet's
// running instances are in fulfilledCapacity and DescribeFleetInstances.
func (s *Server) fleetNode(fl *FleetRecord) node {
	state, activity, running := s.fleetView(fl)
	var insts []node
	if len(running) > 0 && fl.Type == "instant" {
		var idn []node
		for _, id := range running {
			idn = append(idn, tx("", id))
		}
		insts = append(insts, el("", items("instanceIds", idn), tx("instanceType", fl.Overrides[0].Get("InstanceType")), tx("lifecycle", fl.Lifecycle)))
	}
	spec := el("launchTemplateSpecification", tx("launchTemplateId", fl.Template), tx("version", "$Default"))
	if !strings.HasPrefix(fl.Template, "lt-") {
		spec = el("launchTemplateSpecification", tx("launchTemplateName", fl.Template), tx("version", "$Default"))
	}
	var ovs []node
	for _, o := range fl.Overrides {
		kids := []node{tx("instanceType", o.Get("InstanceType"))}
		if z := o.Get("AvailabilityZone"); z != "" {
			kids = append(kids, tx("availabilityZone", z))
		}
		if p := o.Get("MaxPrice"); p != "" {
			kids = append(kids, tx("maxPrice", p))
		}
		ovs = append(ovs, el("", kids...))
	}
	kids := []node{tx("activityStatus", activity), tm("createTime", fl.Created), tx("fleetId", fl.ID), tx("fleetState", state),
		tx("clientToken", fl.ClientToken), tx("excessCapacityTerminationPolicy", "termination"),
		usd("fulfilledCapacity", float64(len(running))), usd("fulfilledOnDemandCapacity", float64(min(len(running), fl.OnDemand))),
		items("launchTemplateConfigs", []node{el("", spec, items("overrides", ovs))}),
		el("targetCapacitySpecification", num("totalTargetCapacity", fl.Target), num("onDemandTargetCapacity", fl.OnDemand),
			num("spotTargetCapacity", fl.Target-fl.OnDemand), tx("defaultTargetCapacityType", "spot")),
		tx("terminateInstancesWithExpiration", strconv.FormatBool(fl.TerminateAtEnd)), tx("type", fl.Type)}
	if !fl.ValidFrom.IsZero() {
		kids = append(kids, tm("validFrom", fl.ValidFrom))
	}
	if !fl.ValidUntil.IsZero() {
		kids = append(kids, tm("validUntil", fl.ValidUntil))
	}
	kids = append(kids, tx("replaceUnhealthyInstances", "false"),
		el("spotOptions", tx("allocationStrategy", fl.Strategy), tx("instanceInterruptionBehavior", "terminate")),
		items("tagSet", tagNodes(fl.Tags)), items("errorSet", nil), items("fleetInstanceSet", insts))
	return el("", kids...)
}

// MaxInstantDelete is the most running instances an instant fleet may
// have for DeleteFleets to delete it: the model says "For fleets with more
// than 1000 instances, the deletion request might fail … first terminate
// most of the instances manually, leaving 1000 or fewer". The fake always
// fails above it.
const MaxInstantDelete = 1000

// deleteFleets follows the AWS CLI's delete-fleets examples (with and
// without --terminate-instances) and the model's restrictions: up to 25
// instant and 100 request or maintain fleets per call ("If you exceed the
// specified number of fleets to delete, no fleets are deleted"), and an
// instant fleet of more than MaxInstantDelete running instances refused.
func (s *Server) deleteFleets(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	terminate := f.Get("TerminateInstances") == "true"
	ids := list(f, "FleetId")
	instant, other := 0, 0
	for _, id := range ids {
		if fl := s.findFleet(rd.Name, id); fl != nil && fl.Type == "instant" {
			instant++
		} else {
			other++
		}
	}
	if instant > 25 || other > 100 {
		return nil, badParam("You can delete up to 25 fleets of type instant and 100 of type maintain or request in a single request")
	}
	var ok, bad []node
	for _, id := range ids {
		fl := s.findFleet(rd.Name, id)
		var running []string
		if fl != nil {
			_, _, running = s.fleetView(fl)
		}
		switch {
		case fl == nil:
			bad = append(bad, el("", tx("fleetId", id), el("error", tx("code", "fleetIdDoesNotExist"), tx("message", "The fleet ID does not exist"))))
		case fl.Type == "instant" && !terminate:
			bad = append(bad, el("", tx("fleetId", id), el("error", tx("code", "unexpectedError"), tx("message", "Instant fleets can only be deleted with TerminateInstances true"))))
		case fl.Type == "instant" && len(running) > MaxInstantDelete:
			bad = append(bad, el("", tx("fleetId", id), el("error", tx("code", "unexpectedError"),
				tx("message", fmt.Sprintf("The fleet has %d instances; terminate all but %d before deleting it", len(running), MaxInstantDelete)))))
		default:
			prev, _, _ := s.fleetView(fl)
			fl.State = "deleted_running"
			if terminate {
				fl.State = "deleted_terminating"
				fl.Terminated = true
			}
			ok = append(ok, el("", tx("fleetId", id), tx("currentFleetState", fl.State), tx("previousFleetState", prev)))
		}
	}
	return document("DeleteFleets", reqID, items("successfulFleetDeletionSet", ok), items("unsuccessfulFleetDeletionSet", bad)), nil
}

// PrivateDNSName is the private DNS name EC2 gives an instance (the
// AWS CLI's describe-instances example: ip-10-0-0-157.us-east-2.compute.internal;
// us-east-1's end in ec2.internal), made from its id here. It is the
// host name the CloudWatch agent reports by default.
func PrivateDNSName(region, id string) string {
	n, _ := strconv.ParseUint(strings.TrimPrefix(id, "i-"), 16, 64)
	suffix := region + ".compute.internal"
	if region == "us-east-1" {
		suffix = "ec2.internal"
	}
	return fmt.Sprintf("ip-10-%d-%d-%d.%s", n>>16&0xff, n>>8&0xff, n&0xff, suffix)
}

// describeFleetInstances follows the AWS CLI's describe-fleet-instances
// example: the fleet's running instances in activeInstanceSet, paged.
// The model: "Currently, DescribeFleetInstances does not support fleets
// of type instant. Instead, use DescribeFleets"; its one filter is
// instance-type.
func (s *Server) describeFleetInstances(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	if err := onlyFilters(f, "instance-type"); err != nil {
		return nil, err
	}
	id := f.Get("FleetId")
	fl := s.findFleet(rd.Name, id)
	switch {
	case fl == nil:
		return nil, &apiError{http.StatusBadRequest, "InvalidFleetId.NotFound", "The fleet ID '" + id + "' does not exist"}
	case fl.Type == "instant":
		return nil, badParam("DescribeFleetInstances does not support fleets of type instant; use DescribeFleets")
	}
	_, _, running := s.fleetView(fl)
	typ := fl.Overrides[0].Get("InstanceType")
	if v, ok := filters(f)["instance-type"]; ok && !contains(v, typ) {
		running = nil
	}
	lo, hi, tok, err := s.page(f, len(running), 1000, 1, 1000)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, iid := range running[lo:hi] {
		out = append(out, el("", tx("instanceId", iid), tx("instanceType", typ),
			tx("spotInstanceRequestId", spotRequestID(iid)), tx("instanceHealth", "healthy")))
	}
	return document("DescribeFleetInstances", reqID, withToken([]node{items("activeInstanceSet", out), tx("fleetId", fl.ID)}, tok)...), nil
}

// terminateInstances follows the AWS CLI's terminate-instances example.
// The model: "Up to 1000 instance IDs", and "If you specify multiple
// instances and the request fails (for example, because of a single
// incorrect instance ID), none of the instances are terminated."
func (s *Server) terminateInstances(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	ids := list(f, "InstanceId")
	if len(ids) == 0 || len(ids) > 1000 {
		return nil, badParam("InstanceId: %d given; want 1 to 1000", len(ids))
	}
	owner := map[string]*FleetRecord{}
	for _, fl := range s.fleets {
		if fl.Region != rd.Name {
			continue
		}
		for _, iid := range fl.Instances {
			owner[iid] = fl
		}
	}
	for _, iid := range ids {
		if owner[iid] == nil {
			return nil, &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", "The instance ID '" + iid + "' does not exist"}
		}
	}
	var out []node
	for _, iid := range ids {
		fl := owner[iid]
		_, _, running := s.fleetView(fl)
		prev, prevName := 48, "terminated"
		if contains(running, iid) {
			prev, prevName = 16, "running"
		}
		if fl.Gone == nil {
			fl.Gone = map[string]bool{}
		}
		fl.Gone[iid] = true
		out = append(out, el("", tx("instanceId", iid), el("currentState", num("code", 32), tx("name", "shutting-down")),
			el("previousState", num("code", prev), tx("name", prevName))))
	}
	return document("TerminateInstances", reqID, items("instancesSet", out)), nil
}

// describeInstances lists the instances the region's fleets launched, with
// the tags EC2 Fleet puts on them (aws:ec2:fleet-id, and an instant
// fleet's instance TagSpecifications), filtered by tag:KEY, tag-key and
// instance-state-name, paged. Terminated instances stay listed, as AWS
// lists them for a while.
func (s *Server) describeInstances(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	ids := list(f, "InstanceId")
	flt := filters(f)
	type inst struct {
		fl      *FleetRecord
		id      string
		running bool
	}
	var sel []inst
	for _, fl := range s.fleets {
		if fl.Region != rd.Name {
			continue
		}
		_, _, running := s.fleetView(fl)
		live := map[string]bool{}
		for _, id := range running {
			live[id] = true
		}
		launched := fl.Type == "instant" || len(running) > 0 || fl.Terminated || (!fl.ValidUntil.IsZero() && !s.now().Before(fl.ValidUntil))
		if !launched {
			continue
		}
		tags := map[string]string{TagFleetID: fl.ID}
		for k, v := range fl.InstanceTags {
			tags[k] = v
		}
		for _, id := range fl.Instances {
			state := "terminated"
			if live[id] {
				state = "running"
			}
			if (len(ids) > 0 && !contains(ids, id)) || !matchTags(flt, tags) {
				continue
			}
			if v, ok := flt["instance-state-name"]; ok && !contains(v, state) {
				continue
			}
			sel = append(sel, inst{fl, id, live[id]})
		}
	}
	lo, hi, tok, err := s.page(f, len(sel), 1000, 5, 1000)
	if err != nil {
		return nil, err
	}
	var res []node
	for _, x := range sel[lo:hi] {
		tags := map[string]string{TagFleetID: x.fl.ID}
		for k, v := range x.fl.InstanceTags {
			tags[k] = v
		}
		code, name := 48, "terminated"
		if x.running {
			code, name = 16, "running"
		}
		in := el("", tx("instanceId", x.id), tx("instanceType", x.fl.Overrides[0].Get("InstanceType")),
			tx("privateDnsName", PrivateDNSName(rd.Name, x.id)),
			el("placement", tx("availabilityZone", x.fl.Overrides[0].Get("AvailabilityZone"))),
			el("instanceState", num("code", code), tx("name", name)), tm("launchTime", x.fl.Created))
		if isSpot(x.fl, x.id) {
			// An on-demand instance has no instanceLifecycle; a spot one
			// names its request (the model's Instance).
			in.kids = append(in.kids, tx("instanceLifecycle", x.fl.Lifecycle), tx("spotInstanceRequestId", spotRequestID(x.id)))
		}
		in.kids = append(in.kids, items("tagSet", tagNodes(tags)))
		res = append(res, el("", tx("reservationId", "r-"+strings.TrimPrefix(x.id, "i-")), tx("ownerId", "123456789012"),
			items("instancesSet", []node{in})))
	}
	return document("DescribeInstances", reqID, withToken([]node{items("reservationSet", res)}, tok)...), nil
}
