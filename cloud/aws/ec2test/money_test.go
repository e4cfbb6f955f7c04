package ec2test

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// setForm is form where a later key replaces an earlier one, so a test
// can override fleetForm's defaults.
func setForm(kv ...string) url.Values {
	f := url.Values{"Version": {"2016-11-15"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

func fleetForm(kv ...string) url.Values {
	return setForm(append([]string{"Action", "CreateFleet",
		"LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId", "lt-1",
		"LaunchTemplateConfigs.1.Overrides.1.InstanceType", "g6.xlarge",
		"TargetCapacitySpecification.TotalTargetCapacity", "2"}, kv...)...)
}

// The fake refuses what the API reference says a fleet type does not take,
// and lists an instant fleet only by id.
func TestFakeFleetsFollowTheAPIReference(t *testing.T) {
	now := time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC)
	s := New(Generate(1, []string{"us-east-1"}, now.Add(-time.Hour), now, 10*time.Minute)...)
	s.Now = func() time.Time { return now }
	srv := s.Start()
	defer srv.Close()
	later := now.Add(time.Hour).Format(time.RFC3339)
	for name, tc := range map[string]struct {
		form url.Values
		code string
	}{
		"instant with ValidUntil":        {fleetForm("Type", "instant", "ValidUntil", later), "InvalidParameterValue"},
		"request tagging instances":      {fleetForm("Type", "request", "TagSpecification.1.ResourceType", "instance", "TagSpecification.1.Tag.1.Key", "k", "TagSpecification.1.Tag.1.Value", "v"), "InvalidParameterValue"},
		"reserved tag key":               {fleetForm("Type", "instant", "TagSpecification.1.ResourceType", "fleet", "TagSpecification.1.Tag.1.Key", "aws:x", "TagSpecification.1.Tag.1.Value", "v"), "InvalidParameterValue"},
		"ValidUntil in the past":         {fleetForm("Type", "request", "ValidUntil", now.Add(-time.Hour).Format(time.RFC3339)), "InvalidParameterValue"},
		"target over the fleet quota":    {fleetForm("Type", "instant", "TargetCapacitySpecification.TotalTargetCapacity", "10001"), "TargetCapacityLimitExceededException"},
		"ValidUntil before ValidFrom":    {fleetForm("Type", "request", "ValidFrom", later, "ValidUntil", now.Add(30*time.Minute).Format(time.RFC3339)), "InvalidParameterValue"},
		"purchase of an unseen offering": {setForm("Action", "PurchaseCapacityBlock", "CapacityBlockOfferingId", "cb-0", "InstancePlatform", "Linux/UNIX"), "InvalidParameterValue"},
	} {
		t.Run(name, func(t *testing.T) {
			if status, body := post(t, srv.URL, tc.form, "us-east-1"); status != 400 || !strings.Contains(body, "<Code>"+tc.code+"</Code>") {
				t.Errorf("%d %s, want 400 %s", status, body, tc.code)
			}
		})
	}
	if len(s.Fleets()) != 0 {
		t.Fatalf("refused requests made fleets: %+v", s.Fleets())
	}
	status, body := post(t, srv.URL, fleetForm("Type", "instant"), "us-east-1")
	if status != 200 || !strings.Contains(body, "<fleetInstanceSet>") {
		t.Fatalf("instant fleet: %d %s", status, body)
	}
	id := s.Fleets()[0].ID
	if _, body := post(t, srv.URL, setForm("Action", "DescribeFleets"), "us-east-1"); strings.Contains(body, id) {
		t.Errorf("an instant fleet listed without its id: %s", body)
	}
	if _, body := post(t, srv.URL, setForm("Action", "DescribeFleets", "FleetId.1", id), "us-east-1"); !strings.Contains(body, id) {
		t.Errorf("an instant fleet not listed by its id: %s", body)
	}
	status, body = post(t, srv.URL, fleetForm("Type", "request", "ValidFrom", later), "us-east-1")
	if status != 200 || strings.Contains(body, "fleetInstanceSet") {
		t.Errorf("request fleet: %d %s; want its id alone", status, body)
	}
	if _, body := post(t, srv.URL, setForm("Action", "DescribeFleets"), "us-east-1"); !strings.Contains(body, "<activityStatus>pending_fulfillment</activityStatus>") || strings.Contains(body, "<instanceIds>") {
		t.Errorf("a fleet before its ValidFrom: %s", body)
	}
}

// A capacity block before its start reads 0 instances, with the count in
// AWS's tag (EC2 User Guide, "View Capacity Blocks").
func TestFakeCapacityBlockCountsBeforeItsStart(t *testing.T) {
	now := time.Date(2026, 6, 10, 0, 0, 0, 0, time.UTC)
	s := New(Generate(1, []string{"us-east-1"}, now.Add(-time.Hour), now, 10*time.Minute)...)
	clock := now
	s.Now = func() time.Time { return clock }
	srv := s.Start()
	defer srv.Close()
	s.AddReservation(Reservation{ID: "cr-1", Region: "us-east-1", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Count: 4,
		Start: now.Add(time.Hour), End: now.Add(25 * time.Hour), Created: now, State: "scheduled"})
	_, body := post(t, srv.URL, setForm("Action", "DescribeCapacityReservations"), "us-east-1")
	for _, want := range []string{"<totalInstanceCount>0</totalInstanceCount>", "<state>scheduled</state>",
		"<key>" + TagRequestedQuantity + "</key><value>4</value>", "<reservationType>capacity-block</reservationType>"} {
		if !strings.Contains(body, want) {
			t.Errorf("before its start: no %s in %s", want, body)
		}
	}
	s.Edit(func() { clock = now.Add(2 * time.Hour) })
	_, body = post(t, srv.URL, setForm("Action", "DescribeCapacityReservations"), "us-east-1")
	if !strings.Contains(body, "<totalInstanceCount>4</totalInstanceCount>") || !strings.Contains(body, "<state>active</state>") {
		t.Errorf("within its window: %s", body)
	}
}
