package azure

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

func a100Offerings(t *testing.T, p *Provider, q domain.OfferingQuery) []domain.Offering {
	t.Helper()
	offs, err := p.FindOfferings(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

func TestFindOfferings(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	q := domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 24 * time.Hour, Regions: []string{"eastus"}}
	offs := a100Offerings(t, p, q)
	// NC24ads in zones 1-3, NC96ads in zones 1-2 (zone 3 is restricted).
	if len(offs) != 5 {
		t.Fatalf("%d offerings %+v, want 5", len(offs), offs)
	}
	cheapest := offs[0]
	if cheapest.InstanceType != "Standard_NC24ads_A100_v4" || cheapest.InstanceCount != 2 || !strings.HasPrefix(cheapest.ID, OfferingPrefix) {
		t.Errorf("cheapest = %+v", cheapest)
	}
	if want := 3.673 * 2 * 24; math.Abs(cheapest.UpfrontUSD-want) > 1e-9 || cheapest.Currency != "USD" {
		t.Errorf("cost = %v, want on-demand × instances × hours = %v", cheapest.UpfrontUSD, want)
	}
	if want := 3.673 * 2; math.Abs(cheapest.HourlyUSD-want) > 1e-9 {
		t.Errorf("hourly = %v, want on-demand × instances = %v", cheapest.HourlyUSD, want)
	}
	if !strings.Contains(cheapest.Note, "starts when it is made (Azure cannot schedule it) and bills $7.35 an hour") || !strings.Contains(cheapest.Note, "until it is deleted") {
		t.Errorf("note = %q, want the billing terms said", cheapest.Note)
	}
	if !cheapest.Start.Equal(testNow) || cheapest.DurationHours() != 24 || !cheapest.StartsOnPurchase || cheapest.Kind != domain.KindReservation {
		t.Errorf("window %v-%v, want now for 24h, starting on purchase", cheapest.Start, cheapest.End)
	}
	for _, o := range offs {
		if o.InstanceType == "Standard_NC96ads_A100_v4" && o.Zone == "3" {
			t.Errorf("offered a restricted zone: %+v", o)
		}
	}
	// The same terms make the same id; other terms another.
	again := a100Offerings(t, p, q)
	if again[0].ID != cheapest.ID {
		t.Errorf("id not stable: %s then %s", cheapest.ID, again[0].ID)
	}
	if offs[1].ID == cheapest.ID {
		t.Errorf("two offerings share id %s", cheapest.ID)
	}
	// GPUs round up to whole instances.
	byGPU := q
	byGPU.Instances, byGPU.GPUs = 0, 6
	gpuOffs := a100Offerings(t, p, byGPU)
	if len(gpuOffs) == 0 {
		t.Fatal("no offerings for 6 GPUs")
	}
	for _, o := range gpuOffs {
		if want := map[string]int{"Standard_NC24ads_A100_v4": 6, "Standard_NC96ads_A100_v4": 2}[o.InstanceType]; o.InstanceCount != want {
			t.Errorf("%s: %d instances for 6 GPUs, want %d", o.InstanceType, o.InstanceCount, want)
		}
	}
	for _, bad := range []domain.OfferingQuery{
		{GPU: "A100", Instances: 1},
		{GPU: "A100", Instances: 1, Duration: 90 * time.Minute},
		{GPU: "A100", Duration: time.Hour},
	} {
		if _, err := p.FindOfferings(context.Background(), bad); !errors.Is(err, domain.ErrInvalidQuery) {
			t.Errorf("%+v: err = %v, want an invalid query", bad, err)
		}
	}
}

// TestAzureOfferingsKeepTheirOwnFilters: a reservation
// starts when it is made, so it is offered only when the asked start range
// includes now, for exactly the asked duration, its total in UpfrontUSD
// and its rate in HourlyUSD. Before, a search for 48 h starting in three
// days listed rows starting now and lasting 74.6 h.
func TestAzureOfferingsKeepTheirOwnFilters(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	ctx := context.Background()
	// The search, three days ahead: nothing can start then.
	later := domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 48 * time.Hour,
		StartAfter: at("2026-12-02T09:00:00Z"), StartBefore: at("2026-12-02T12:00:00Z"), Regions: []string{"eastus", "westeurope"}}
	offs, err := p.FindOfferings(ctx, later)
	if !errors.Is(err, domain.ErrInvalidQuery) || len(offs) != 0 || !strings.Contains(err.Error(), "start when they are made") || !strings.Contains(err.Error(), "--start-after 2026-12-02T09:00Z") {
		t.Fatalf("future window: %d offerings, err %v; want none and a refusal saying why", len(offs), err)
	}
	past := later
	past.StartAfter, past.StartBefore = time.Time{}, testNow.Add(-time.Hour)
	if _, err := p.FindOfferings(ctx, past); !errors.Is(err, domain.ErrInvalidQuery) || !strings.Contains(err.Error(), "has passed") {
		t.Errorf("past window: err = %v", err)
	}
	// A range around now: every row inside it, 48 h long.
	around := later
	around.StartAfter, around.StartBefore = testNow.Add(-30*time.Second), testNow.Add(3*time.Hour)
	offs, err = p.FindOfferings(ctx, around)
	if err != nil || len(offs) == 0 {
		t.Fatalf("window around now: %d offerings, %v", len(offs), err)
	}
	for _, o := range offs {
		if o.Start.Before(around.StartAfter) || o.Start.After(around.StartBefore) {
			t.Errorf("%s starts %v, outside [%v, %v]", o.ID, o.Start, around.StartAfter, around.StartBefore)
		}
		if o.DurationHours() != 48 {
			t.Errorf("%s lasts %v h, want the asked 48", o.ID, o.DurationHours())
		}
		if o.HourlyUSD <= 0 || math.Abs(o.UpfrontUSD-o.HourlyUSD*48) > 1e-6 {
			t.Errorf("%s: total $%v, hourly $%v: want the total for 48 h and the hourly rate apart", o.ID, o.UpfrontUSD, o.HourlyUSD)
		}
	}
	// A range opening within this minute moves the start into it.
	late := around
	late.StartAfter = testNow.Add(-1 * time.Second)
	f2 := newFakeARM(t)
	opt := f2.options()
	opt.Now = func() time.Time { return testNow.Add(20 * time.Second) }
	q := newTestProvider(t, opt)
	offs, err = q.FindOfferings(ctx, late)
	if err != nil || len(offs) == 0 || offs[0].Start.Before(late.StartAfter) {
		t.Fatalf("start range opening this minute: %+v, %v", offs, err)
	}
}

// TestUnreservableSizesAreNotOffered: Azure takes capacity reservations
// only for sizes whose CapacityReservationSupported capability is true
// (the documentation lists ND-series and NCads H100 v5 among those that
// are not). The H100 sizes of the recorded answer say false: none is
// offered, and booking one is refused before any PUT.
func TestUnreservableSizesAreNotOffered(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	offs, err := p.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"eastus", "westeurope"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		t.Errorf("offered %s in %s zone %s: Azure does not reserve it", o.InstanceType, o.Region, o.Zone)
	}
	o := domain.Offering{ID: "azcr-0123456789abcdef", Provider: "azure", Region: "eastus", Zone: "1",
		InstanceType: "Standard_NC40ads_H100_v5", InstanceCount: 1, Start: testNow, End: testNow.Add(time.Hour)}
	for _, dry := range []bool{true, false} {
		_, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "led-1", DryRun: dry})
		if !errors.Is(err, domain.ErrDeclined) || !strings.Contains(err.Error(), "does not take capacity reservations for Standard_NC40ads_H100_v5") {
			t.Errorf("dry %v: err = %v", dry, err)
		}
	}
	if n := f.putCount(""); n != 0 {
		t.Errorf("%d PUTs for an unreservable size", n)
	}
}

func TestBookReservation(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	offs := a100Offerings(t, p, domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 24 * time.Hour, Regions: []string{"eastus"}})
	var off domain.Offering
	for _, o := range offs {
		if o.InstanceType == "Standard_NC24ads_A100_v4" && o.Zone == "2" {
			off = o
		}
	}
	req := domain.BookRequest{Offering: off, Ref: "led-42", After: testNow.Add(-time.Minute), Actor: "alice@host"}

	// Nothing booked yet: reconciliation finds nothing (the group is missing).
	if b, err := p.FindBooking(context.Background(), req); err != nil || b != nil {
		t.Fatalf("FindBooking before booking = %+v, %v", b, err)
	}

	dry := req
	dry.DryRun = true
	b, err := p.Book(context.Background(), dry)
	if err != nil {
		t.Fatal(err)
	}
	if !b.DryRun || !strings.HasPrefix(b.Message, NoDryRunMessage) || !strings.Contains(b.Message, "standardNCADSA100v4Family 0+48 of 96") {
		t.Errorf("dry run = %+v", b)
	}
	if n := f.putCount(""); n != 0 {
		t.Fatalf("dry run made %d PUTs", n)
	}

	b, err = p.Book(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantRef := "/subscriptions/" + testSub + "/resourceGroups/rg-gpu/providers/Microsoft.Compute/capacityReservationGroups/gpumarket-eastus-z2/capacityReservations/gpumarket-led-42"
	if b.ProviderRef != wantRef || b.State != "active" || b.InstanceCount != 2 || b.Zone != "2" || b.CostUSD != off.UpfrontUSD ||
		!b.Start.Equal(testNow) || !b.End.Equal(testNow.Add(24*time.Hour)) {
		t.Errorf("booking = %+v, want %s active from now for 24h", b, wantRef)
	}
	if !strings.Contains(b.Message, "until it is deleted") {
		t.Errorf("message %q does not say the reservation bills until deleted", b.Message)
	}
	if g, r := f.putCount("/capacityreservationgroups/gpumarket-eastus-z2"), f.putCount("/capacityreservations/gpumarket-led-42"); g != 1 || r != 1 {
		t.Errorf("PUTs: group %d, reservation %d, want 1 and 1", g, r)
	}
	res := f.resources[strings.ToLower(wantRef)]
	sku := res["sku"].(map[string]any)
	if sku["name"] != "Standard_NC24ads_A100_v4" || sku["capacity"] != 2.0 || res["zones"].([]any)[0] != "2" {
		t.Errorf("reservation body = %v", res)
	}
	if tags := res["tags"].(map[string]any); tags[TagRef] != "led-42" || tags[TagOffering] != off.ID || tags[TagActor] != "alice@host" ||
		tags[TagTool] != "gpumarket" || tags[TagManaged] != "gpumarket" || tags[TagEnd] != "2026-11-30T12:00:00Z" || tags[TagCost] != "176.30" {
		t.Errorf("tags = %v", tags)
	}

	// Reconciliation finds it by the ref, and not for another ref.
	found, err := p.FindBooking(context.Background(), req)
	if err != nil || found == nil || found.ProviderRef != wantRef || found.State != "active" {
		t.Fatalf("FindBooking = %+v, %v", found, err)
	}
	// Azure keeps no cost: the ledger's row gets the offering's.
	if found.CostUSD != off.UpfrontUSD || found.End.Sub(found.Start) != off.End.Sub(off.Start) {
		t.Errorf("FindBooking cost %v over %v, want the offering's %v over %v", found.CostUSD, found.End.Sub(found.Start), off.UpfrontUSD, off.End.Sub(off.Start))
	}
	other := req
	other.Ref = "led-43"
	if found, err := p.FindBooking(context.Background(), other); err != nil || found != nil {
		t.Errorf("FindBooking(other ref) = %+v, %v", found, err)
	}
	// Without a ref, the terms and time match.
	noRef := req
	noRef.Ref = ""
	if found, err := p.FindBooking(context.Background(), noRef); err != nil || found == nil {
		t.Errorf("FindBooking(no ref) = %+v, %v", found, err)
	}
	noRef.After = testNow.Add(time.Minute)
	if found, err := p.FindBooking(context.Background(), noRef); err != nil || found != nil {
		t.Errorf("FindBooking(no ref, made before After) = %+v, %v", found, err)
	}

	// A retry with the same ref finds the reservation it made and
	// answers with it: no second PUT, still one reservation.
	again, err := p.Book(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.ProviderRef != wantRef || !strings.Contains(again.Message, "nothing was bought again") {
		t.Errorf("retry = %+v", again)
	}
	if r := f.putCount("/capacityreservations/gpumarket-led-42"); r != 1 {
		t.Errorf("%d reservation PUTs after a retry, want 1", r)
	}
	n := 0
	for k := range f.resources {
		if strings.Contains(k, "/capacityreservations/") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d reservations after a retried booking, want 1", n)
	}

	// Deleting ends it; deleting again is no error.
	if err := p.DeleteFleet(context.Background(), "eastus", wantRef); err != nil {
		t.Fatal(err)
	}
	if f.resources[strings.ToLower(wantRef)] != nil {
		t.Errorf("reservation still there after delete")
	}
	if err := p.DeleteBooking(context.Background(), wantRef); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if err := p.DeleteBooking(context.Background(), "/subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/y"); err == nil {
		t.Errorf("DeleteBooking accepted a scale set id")
	}
}

func TestBookRefusals(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	base := domain.Offering{ID: "azcr-0123456789abcdef", Provider: "azure", Region: "eastus", Zone: "1",
		InstanceType: "Standard_NC96ads_A100_v4", InstanceCount: 1, Start: testNow, End: testNow.Add(time.Hour)}
	for _, tc := range []struct {
		name string
		edit func(*domain.Offering)
		want string
	}{
		{"restricted zone", func(o *domain.Offering) { o.Zone = "3" }, "not offered to this subscription in eastus zone 3"},
		{"missing zone", func(o *domain.Offering) { o.Zone = "4" }, "not offered in eastus zone 4"},
		{"restricted region", func(o *domain.Offering) { o.InstanceType = "Standard_ND96isr_H100_v5" }, "not offered to this subscription in eastus"},
		{"quota", func(o *domain.Offering) { o.InstanceCount = 2 }, "quota standardNCADSA100v4Family in eastus: 0 of 96 vCPUs used, 192 more needed"},
		{"unknown size", func(o *domain.Offering) { o.InstanceType = "Standard_D2s_v3" }, "not a GPU size offered in eastus"},
		{"no window", func(o *domain.Offering) { o.End = o.Start }, "a window"},
		{"foreign id", func(o *domain.Offering) { o.ID = "cb-0123" }, `want an id azcr-`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.edit(&o)
			for _, dry := range []bool{true, false} {
				_, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "led-1", DryRun: dry})
				if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, domain.ErrDeclined) {
					t.Errorf("dry %v: err = %v, want %q, declined", dry, err, tc.want)
				}
			}
		})
	}
	if n := f.putCount(""); n != 0 {
		t.Errorf("%d PUTs for refused bookings", n)
	}
	opt := f.options()
	opt.ResourceGroup = ""
	p = newTestProvider(t, opt)
	if _, err := p.Book(context.Background(), domain.BookRequest{Offering: base}); err == nil || !strings.Contains(err.Error(), "azure.resource_group") {
		t.Errorf("no resource group: %v", err)
	}
}

func TestActionsWithoutAccount(t *testing.T) {
	t.Setenv("AZURE_SUBSCRIPTION_ID", "")
	f := newFakeARM(t)
	opt := f.options()
	opt.SubscriptionID = ""
	p := newTestProvider(t, opt)
	ctx := context.Background()
	_, e1 := p.FindOfferings(ctx, domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: time.Hour})
	_, e2 := p.Book(ctx, domain.BookRequest{})
	_, e3 := p.LaunchFleet(ctx, domain.FleetSpec{})
	e4 := p.DeleteFleet(ctx, "eastus", "x")
	for i, err := range []error{e1, e2, e3, e4} {
		if !errors.Is(err, errNoAccount) || !strings.Contains(err.Error(), "signed-in account") {
			t.Errorf("action %d: err = %v, want the signed-in account error", i, err)
		}
	}
}

func fleetOptions(f *fakeARM) Options {
	opt := f.options()
	opt.ImageID = "Canonical:ubuntu-24_04-lts:server:latest"
	opt.SubnetID = "/subscriptions/" + testSub + "/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/vnet/subnets/gpu"
	opt.AdminUsername = "azureuser"
	opt.SSHPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake gpumarket"
	return opt
}

func TestLaunchFleet(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, fleetOptions(f))
	ctx := context.Background()
	spec := domain.FleetSpec{
		Provider: "azure", Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4", "standard_nc24ads_a100_v4"},
		Zones: []string{"1", "2"}, TargetCapacity: 4, OnDemandBase: 1, Strategy: domain.StrategyLowestPrice, ClientToken: "led-7",
		Actor: "bob@host",
	}
	dry := spec
	dry.DryRun = true
	fl, err := p.LaunchFleet(ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	if !fl.DryRun || !strings.HasPrefix(fl.Message, NoDryRunMessage) || f.putCount("") != 0 {
		t.Errorf("dry run = %+v, %d PUTs", fl, f.putCount(""))
	}

	fl, err = p.LaunchFleet(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	wantID := "/subscriptions/" + testSub + "/resourceGroups/rg-gpu/providers/Microsoft.Compute/virtualMachineScaleSets/gpumarket-led-7"
	if want := 3.673 + 3*0.7346; math.Abs(fl.EstimatedUSDh-want) > 1e-9 {
		t.Errorf("estimate = %v, want one on-demand and three spot A100s = %v", fl.EstimatedUSDh, want)
	}
	if fl.ID != wantID || fl.State != "active" || fl.Target != 4 {
		t.Errorf("fleet = %+v", fl)
	}
	var body struct {
		SKU struct {
			Name     string
			Capacity int
		} `json:"sku"`
		Zones      []string `json:"zones"`
		Properties struct {
			OrchestrationMode string `json:"orchestrationMode"`
			PriorityMixPolicy struct {
				Base  int `json:"baseRegularPriorityCount"`
				Above int `json:"regularPriorityPercentageAboveBase"`
			} `json:"priorityMixPolicy"`
			SKUProfile *struct{} `json:"skuProfile"`
			VM         struct {
				Priority       string `json:"priority"`
				EvictionPolicy string `json:"evictionPolicy"`
				BillingProfile struct {
					MaxPrice float64 `json:"maxPrice"`
				} `json:"billingProfile"`
				StorageProfile struct {
					ImageReference map[string]string `json:"imageReference"`
				} `json:"storageProfile"`
				OSProfile struct {
					AdminUsername string `json:"adminUsername"`
				} `json:"osProfile"`
			} `json:"virtualMachineProfile"`
		} `json:"properties"`
		Tags map[string]string `json:"tags"`
	}
	raw, _ := json.Marshal(f.resource(wantID))
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	pr := body.Properties
	// The size named twice counts once: a plain scale set of that size,
	// no instance mix (Azure takes none for GPU sizes).
	if body.SKU.Name != "Standard_NC24ads_A100_v4" || body.SKU.Capacity != 4 || len(body.Zones) != 2 ||
		pr.OrchestrationMode != "Flexible" || pr.PriorityMixPolicy.Base != 1 || pr.PriorityMixPolicy.Above != 0 ||
		pr.SKUProfile != nil ||
		body.Tags[TagRef] != "led-7" || body.Tags[TagActor] != "bob@host" || body.Tags[TagTool] != "gpumarket" || body.Tags[TagManaged] != "gpumarket" ||
		pr.VM.Priority != "Spot" || pr.VM.EvictionPolicy != "Delete" || pr.VM.BillingProfile.MaxPrice != -1 ||
		pr.VM.StorageProfile.ImageReference["publisher"] != "Canonical" || pr.VM.OSProfile.AdminUsername != "azureuser" {
		t.Errorf("scale set body = %s", raw)
	}

	got, err := p.DescribeFleet(ctx, "eastus", fl.ID)
	if err != nil || got.Instances != 4 || got.Target != 4 || got.State != "active" {
		t.Errorf("DescribeFleet = %+v, %v", got, err)
	}
	if err := p.DeleteFleet(ctx, "eastus", fl.ID); err != nil {
		t.Fatal(err)
	}
	got, err = p.DescribeFleet(ctx, "eastus", fl.ID)
	if err != nil || got.State != "deleted" {
		t.Errorf("after delete: %+v, %v", got, err)
	}
	if err := p.DeleteFleet(ctx, "eastus", fl.ID); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

func TestLaunchFleetRefusals(t *testing.T) {
	f := newFakeARM(t)
	opt := f.options() // no image, subnet, user or key
	p := newTestProvider(t, opt)
	spec := domain.FleetSpec{Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4"}, TargetCapacity: 2}
	_, err := p.LaunchFleet(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "azure.image_id, azure.subnet_id, azure.admin_username, azure.ssh_public_key") {
		t.Errorf("missing config: %v", err)
	}
	p = newTestProvider(t, fleetOptions(f))
	for _, tc := range []struct {
		name string
		edit func(*domain.FleetSpec)
		want string
	}{
		{"strategy", func(s *domain.FleetSpec) { s.Strategy = domain.StrategyDiversified }, `strategy "diversified" is not available on Azure`},
		{"base over target", func(s *domain.FleetSpec) { s.OnDemandBase = 3 }, "base from 0 to the target"},
		{"restricted zone", func(s *domain.FleetSpec) {
			s.InstanceTypes = []string{"Standard_NC96ads_A100_v4"}
			s.Zones = []string{"3"}
		}, "zone 3"},
		{"aws region", func(s *domain.FleetSpec) { s.Region = "us-east-1" }, "want an Azure region"},
		{"several sizes", func(s *domain.FleetSpec) {
			s.InstanceTypes = []string{"Standard_NC24ads_A100_v4", "Standard_NC96ads_A100_v4"}
		}, "launch one fleet per size"},
		{"no size", func(s *domain.FleetSpec) { s.InstanceTypes = []string{" ", ""} }, "want one Azure GPU VM size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec
			tc.edit(&s)
			if _, err := p.LaunchFleet(context.Background(), s); err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, domain.ErrDeclined) {
				t.Errorf("err = %v, want %q, declined", err, tc.want)
			}
		})
	}
	bad := fleetOptions(f)
	bad.ImageID = "ubuntu"
	p = newTestProvider(t, bad)
	if _, err := p.LaunchFleet(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "publisher:offer:sku:version") {
		t.Errorf("bad image: %v", err)
	}
	if n := f.putCount(""); n != 0 {
		t.Errorf("%d PUTs for refused launches", n)
	}
}

func TestResourceName(t *testing.T) {
	for in, want := range map[string]string{
		"led-42":                "gpumarket-led-42",
		"01J/ab cd":             "gpumarket-01J-ab-cd",
		strings.Repeat("x", 80): "",
	} {
		got := resourceName(in, "fallback")
		if want != "" && got != want {
			t.Errorf("resourceName(%q) = %q, want %q", in, got, want)
		}
		if len(got) > 64 {
			t.Errorf("resourceName(%q) is %d long", in, len(got))
		}
	}
	if a, b := resourceName(strings.Repeat("x", 80), ""), resourceName(strings.Repeat("x", 81), ""); a == b {
		t.Errorf("long refs collide: %s", a)
	}
}

// The ledger records a definitive "no" as failed and anything else as
// unknown; the provider's errors must say which.
func TestBookOutcomeClassification(t *testing.T) {
	off := domain.Offering{ID: "azcr-0123456789abcdef", Provider: "azure", Region: "eastus", Zone: "2",
		InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 1, Start: testNow, End: testNow.Add(time.Hour)}
	for _, tc := range []struct {
		name     string
		status   int
		failLRO  bool
		declined bool
		want     string
	}{
		{"bad request", 400, false, true, "InvalidParameter"},
		{"conflict", 409, false, true, "Conflict"},
		{"server fault", 500, false, false, "InternalServerError"},
		{"operation failed", 0, true, true, "AllocationFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeARM(t)
			f.putStatus, f.failLRO = tc.status, tc.failLRO
			p := newTestProvider(t, f.options())
			_, err := p.Book(context.Background(), domain.BookRequest{Offering: off, Ref: "led-9"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if errors.Is(err, domain.ErrDeclined) != tc.declined {
				t.Errorf("declined = %v, want %v (%v)", !tc.declined, tc.declined, err)
			}
		})
	}
}

// TestBookGroupFailureIsDeclined: when the reservation group cannot be
// made, the reservation PUT — the only call that spends — is never sent,
// so nothing was bought whatever the group's answer: the ledger records
// it failed rather than leave it unknown for good (no reservation will
// ever be found for it).
func TestBookGroupFailureIsDeclined(t *testing.T) {
	off := domain.Offering{ID: "azcr-0123456789abcdef", Provider: "azure", Region: "eastus", Zone: "2",
		InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 1, Start: testNow, End: testNow.Add(time.Hour)}
	f := newFakeARM(t)
	f.groupStatus = http.StatusServiceUnavailable
	p := newTestProvider(t, f.options())
	_, err := p.Book(context.Background(), domain.BookRequest{Offering: off, Ref: "led-9"})
	if err == nil || !errors.Is(err, domain.ErrDeclined) {
		t.Fatalf("err = %v, want a declined error", err)
	}
	if n := f.putCount("/gpumarket-led-9"); n != 0 {
		t.Fatalf("%d reservation PUTs sent after the group failed", n)
	}
}

// TestBookConflictAfterRetryIsNotDeclined: azcore retries the
// reservation PUT after a 5xx; if the first PUT did make the reservation,
// the retry may meet a 409 Conflict. That is no "no": the reservation
// exists and bills, so the outcome must be left for reconciliation (which
// finds it by its tag), never recorded failed and forgotten. A 409 for a
// reservation that does not exist stays a refusal.
func TestBookConflictAfterRetryIsNotDeclined(t *testing.T) {
	off := domain.Offering{ID: "azcr-0123456789abcdef", Provider: "azure", Region: "eastus", Zone: "2",
		InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 1, Start: testNow, End: testNow.Add(time.Hour)}
	f := newFakeARM(t)
	f.madeThen = []int{http.StatusInternalServerError, http.StatusConflict}
	p := newTestProvider(t, f.options())
	_, err := p.Book(context.Background(), domain.BookRequest{Offering: off, Ref: "led-9"})
	if err == nil || errors.Is(err, domain.ErrDeclined) {
		t.Fatalf("err = %v: a conflict over a reservation that exists must not be a refusal", err)
	}
	found, ferr := p.FindBooking(context.Background(), domain.BookRequest{Offering: off, Ref: "led-9"})
	if ferr != nil || found == nil || found.ProviderRef == "" {
		t.Fatalf("reconciliation should find it: %+v, %v", found, ferr)
	}

	g := newFakeARM(t)
	g.putStatus = http.StatusConflict
	q := newTestProvider(t, g.options())
	if _, err := q.Book(context.Background(), domain.BookRequest{Offering: off, Ref: "led-10"}); !errors.Is(err, domain.ErrDeclined) {
		t.Fatalf("conflict, nothing made: %v, want declined", err)
	}
}

func TestFindFleet(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, fleetOptions(f))
	ctx := context.Background()
	if got, err := p.FindFleet(ctx, "eastus", "led-8"); err != nil || got != nil {
		t.Fatalf("before launch: %+v, %v", got, err)
	}
	spec := domain.FleetSpec{Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4"}, TargetCapacity: 2, ClientToken: "led-8"}
	fl, err := p.LaunchFleet(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.FindFleet(ctx, "eastus", "led-8")
	if err != nil || got == nil || got.ID != fl.ID || got.Instances != 2 {
		t.Errorf("FindFleet = %+v, %v, want %s", got, err, fl.ID)
	}
	if got, err := p.FindFleet(ctx, "eastus", "led-other"); err != nil || got != nil {
		t.Errorf("other token: %+v, %v", got, err)
	}
	if f.putCount("virtualmachinescalesets/gpumarket-led-8") != 1 {
		t.Errorf("PUTs = %d, want 1", f.putCount("virtualmachinescalesets/gpumarket-led-8"))
	}
}

// TestFindOfferingsWarnsPerRegion: a region whose
// ResourceSKUs call failed was logged and dropped, so `offerings` said
// nothing of it. The answering region's offerings come back with an error
// naming the failed one (domain.RegionErrors, which the search warns
// of); with every region failing it is an error.
func TestFindOfferingsWarnsPerRegion(t *testing.T) {
	f := newFakeARM(t)
	f.failSKURegion = "westeurope"
	p := newTestProvider(t, f.options())
	q := domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"eastus", "westeurope"}}
	offs, err := p.FindOfferings(context.Background(), q)
	var re domain.RegionErrors
	if !errors.As(err, &re) || len(re) != 1 || re["westeurope"] == nil {
		t.Fatalf("error %v (%T): want one naming westeurope", err, err)
	}
	if len(offs) == 0 {
		t.Fatal("no offerings from eastus")
	}
	for _, o := range offs {
		if o.Region != "eastus" {
			t.Errorf("offering in %s", o.Region)
		}
	}
	q.Regions = []string{"westeurope"}
	if offs, err := p.FindOfferings(context.Background(), q); err == nil || errors.As(err, &re) || len(offs) != 0 {
		t.Fatalf("every region failed: %d offerings, %v (%T)", len(offs), err, err)
	}
}

// TestDeleteBookingInAnotherSubscription: a reservation booked in another
// subscription than the one signed in to (azure.subscription_id changed
// since) is not deleted here, where Azure answers 404 — which reads as
// "already gone", and the ledger would say ended a reservation that still
// bills. The delete is refused, naming both subscriptions, and nothing is
// sent.
func TestDeleteBookingInAnotherSubscription(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	var calls atomic.Int32
	f.hook = func(r *http.Request) {
		if r.Method == http.MethodDelete {
			calls.Add(1)
		}
	}
	other := "00000000-1111-2222-3333-444444444444"
	ref := "/subscriptions/" + other + "/resourceGroups/rg-gpu/providers/Microsoft.Compute/capacityReservationGroups/g/capacityReservations/gpumarket-led-42"
	err := p.DeleteBooking(context.Background(), ref)
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), testSub) {
		t.Errorf("delete of a reservation in subscription %s: %v, want a refusal naming both subscriptions", other, err)
	}
	if calls.Load() != 0 {
		t.Errorf("%d DELETEs sent to this subscription", calls.Load())
	}
}
