package ec2test

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// NoticeLead is how long a spot instance runs after its interruption
// notice: "a warning that is issued two minutes before Amazon EC2 stops or
// terminates your Spot Instance" (EC2 User Guide, Spot Instance
// interruption notices).
const NoticeLead = 2 * time.Minute

// Notice gives n of a fleet's running spot instances their interruption
// notice at the server's time, as EC2 does before it takes capacity back:
// they keep running for NoticeLead, then are gone. It returns how many
// were given one.
func (s *Server) Notice(fleetID string, n int) int {
	return s.reclaim(fleetID, n, func(fl *FleetRecord, id string) bool {
		if _, ok := fl.Noticed[id]; ok || !isSpot(fl, id) {
			return false
		}
		s.notice(fl, id, s.now())
		return true
	})
}

// reclaim has take act on up to n of a fleet's running instances, under
// the lock, and returns on how many it did.
func (s *Server) reclaim(fleetID string, n int, take func(fl *FleetRecord, id string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fl := range s.fleets {
		if fl.ID != fleetID {
			continue
		}
		_, _, running := s.fleetView(fl)
		k := 0
		for _, id := range running {
			if k < n && take(fl, id) {
				k++
			}
		}
		return k
	}
	return 0
}

func (s *Server) notice(fl *FleetRecord, id string, at time.Time) {
	if fl.Noticed == nil {
		fl.Noticed = map[string]time.Time{}
	}
	fl.Noticed[id] = at
}

// noticeEnded reports whether an instance's notice ran out: it is gone.
func (s *Server) noticeEnded(fl *FleetRecord, id string) bool {
	at, ok := fl.Noticed[id]
	return ok && !s.now().Before(at.Add(NoticeLead))
}

// isSpot reports whether a fleet's instance is spot: the first OnDemand
// instances of a fleet are its on-demand base.
func isSpot(fl *FleetRecord, id string) bool {
	for i, x := range fl.Instances {
		if x == id {
			return i >= fl.OnDemand
		}
	}
	return false
}

// spotRequestID is the id of the spot request an instance fulfils.
func spotRequestID(instanceID string) string { return "sir-" + strings.TrimPrefix(instanceID, "i-") }

// describeSpotInstanceRequests answers with the requests of the region's
// fleets' spot instances, the elements the SDK's deserializer reads
// (spotInstanceRequestSet of items with state, status {code, updateTime,
// message}, instanceId, launchedAvailabilityZone), filtered by
// instance-id, spot-instance-request-id, state and status-code, paged
// (MaxResults 5 to 1000, as the API reference recommends).
//
// States and codes follow the EC2 User Guide's "Spot request status"
// tables: fulfilled while the instance runs (state active); at an
// interruption of an instance that terminates on one, "the status is
// immediately set to instance-terminated-no-capacity (it is not set to
// marked-for-termination). However, the instance remains in the running
// state for 2 minutes" (state closed for a one-time request); a stop of
// the fleet's own (TerminateInstances, DeleteFleets) is
// instance-terminated-by-user. An id asked for that is not there is
// InvalidSpotInstanceRequestID.NotFound.
func (s *Server) describeSpotInstanceRequests(rd *Region, f url.Values, reqID string) ([]byte, *apiError) {
	if err := dryRun(f); err != nil {
		return nil, err
	}
	if err := onlyFilters(f, "instance-id", "spot-instance-request-id", "state", "status-code"); err != nil {
		return nil, err
	}
	flt := filters(f)
	ids := list(f, "SpotInstanceRequestId")
	type req struct {
		fl               *FleetRecord
		id, iid          string
		state, code, msg string
		updated          time.Time
	}
	var all []req
	for _, fl := range s.fleets {
		if fl.Region != rd.Name {
			continue
		}
		_, _, running := s.fleetView(fl)
		launched := fl.Type == "instant" || len(running) > 0 || fl.Terminated || len(fl.Gone) > 0
		if !launched {
			continue
		}
		for _, iid := range fl.Instances {
			if !isSpot(fl, iid) {
				continue
			}
			r := req{fl: fl, id: spotRequestID(iid), iid: iid, state: "active", code: "fulfilled",
				msg: "Your spot request is fulfilled.", updated: fl.Created}
			noticed, warned := fl.Noticed[iid]
			switch {
			case warned:
				r.state, r.code, r.updated = "closed", "instance-terminated-no-capacity", noticed
				r.msg = "Spot Instance terminated due to no available capacity."
			case !contains(running, iid):
				r.state, r.code, r.msg = "closed", "instance-terminated-by-user", "Spot Instance terminated by user."
			}
			all = append(all, r)
		}
	}
	for _, id := range ids {
		found := false
		for _, r := range all {
			found = found || r.id == id
		}
		if !found {
			return nil, &apiError{http.StatusBadRequest, "InvalidSpotInstanceRequestID.NotFound", "The spot instance request ID '" + id + "' does not exist"}
		}
	}
	var sel []req
	for _, r := range all {
		if len(ids) > 0 && !contains(ids, r.id) {
			continue
		}
		if v, ok := flt["instance-id"]; ok && !contains(v, r.iid) {
			continue
		}
		if v, ok := flt["spot-instance-request-id"]; ok && !contains(v, r.id) {
			continue
		}
		if v, ok := flt["state"]; ok && !contains(v, r.state) {
			continue
		}
		if v, ok := flt["status-code"]; ok && !contains(v, r.code) {
			continue
		}
		sel = append(sel, r)
	}
	lo, hi, tok, err := s.page(f, len(sel), 1000, 5, 1000)
	if err != nil {
		return nil, err
	}
	var out []node
	for _, r := range sel[lo:hi] {
		out = append(out, el("", tx("spotInstanceRequestId", r.id), tx("type", "one-time"), tx("state", r.state),
			el("status", tx("code", r.code), tm("updateTime", r.updated), tx("message", r.msg)),
			tx("instanceId", r.iid), tm("createTime", r.fl.Created), tx("productDescription", "Linux/UNIX"),
			tx("launchedAvailabilityZone", r.fl.Overrides[0].Get("AvailabilityZone")),
			tx("instanceInterruptionBehavior", "terminate")))
	}
	return document("DescribeSpotInstanceRequests", reqID, withToken([]node{items("spotInstanceRequestSet", out)}, tok)...), nil
}
