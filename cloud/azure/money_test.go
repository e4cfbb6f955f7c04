package azure

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/gpumarket/gpumarket/domain"
)

const rgPath = "/subscriptions/" + testSub + "/resourceGroups/rg-gpu/providers/Microsoft.Compute"

// offeringOf finds an offering of the size, zone and count in eastus.
func offeringOf(t *testing.T, p *Provider, size, zone string, n int) domain.Offering {
	t.Helper()
	offs := a100Offerings(t, p, domain.OfferingQuery{GPU: "A100", Instances: n, Duration: 24 * time.Hour, Regions: []string{"eastus"}})
	for _, o := range offs {
		if o.InstanceType == size && o.Zone == zone {
			return o
		}
	}
	t.Fatalf("no offering of %d × %s in eastus zone %s among %d", n, size, zone, len(offs))
	return domain.Offering{}
}

func book(t *testing.T, p *Provider, o domain.Offering, ref string) domain.Booking {
	t.Helper()
	b, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: ref, After: testNow.Add(-time.Minute), Actor: "alice@host"})
	if err != nil {
		t.Fatalf("book %s as %s: %v", o.ID, ref, err)
	}
	return b
}

// TestReservationFoundByLookupHasItsStart: the items of a
// reservation list carry provisioningTime and no timeCreated
// (CapacityReservation_ListByReservationGroup.json), so a reservation
// found by lookup had no start, and a ledger row settled from it none
// either.
func TestReservationFoundByLookupHasItsStart(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	o := offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 1)
	b := book(t, p, o, "led-1")
	provisioned := "2026-11-29T12:00:07Z"
	f.edit(b.ProviderRef, func(res map[string]any) {
		res["properties"].(map[string]any)["provisioningTime"] = provisioned
	})
	found, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, Ref: "led-1"})
	if err != nil || found == nil {
		t.Fatalf("FindBooking = %+v, %v", found, err)
	}
	if !found.Start.Equal(at(provisioned)) || !found.End.Equal(b.End) {
		t.Errorf("found %v – %v, want the start from provisioningTime %s and the end gpumarket set, %v", found.Start, found.End, provisioned, b.End)
	}
	// Without a ref the lookup matches on terms and time: a reservation
	// made before the intent is not taken for it.
	noRef := domain.BookRequest{Offering: o, After: at(provisioned).Add(time.Second)}
	if found, err := p.FindBooking(context.Background(), noRef); err != nil || found != nil {
		t.Errorf("made before the intent, found %+v, %v", found, err)
	}
}

// TestDocumentedReservationShapesRead: the recorded list item and Get
// answer (testdata/azure/arm, in the documented examples' shapes) read
// through the SDK's own models: the list item's start comes from
// provisioningTime, the Get's from timeCreated, and a display location
// ("West US") reads as the region.
func TestDocumentedReservationShapesRead(t *testing.T) {
	var list armcompute.CapacityReservationListResult
	if err := json.Unmarshal(readTestdata(t, filepath.Join("arm", "capacityreservations-list.json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Value) != 2 {
		t.Fatalf("%d items", len(list.Value))
	}
	rec := reservationRecord(list.Value[0])
	want := domain.CloudRecord{Kind: domain.KindReservation, Ref: "led-7", Actor: "alice@host", OfferingID: "azcr-0123456789abcdef",
		ProviderRef: deref(list.Value[0].ID), Provider: "azure", Cloud: domain.CloudAzure, Region: "westus", Zone: "1",
		InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 2, Start: at("2026-11-28T09:15:42.1234567Z"), End: at("2026-11-30T09:15:00Z"),
		CostUSD: 352.61, State: "active", CreatedAt: at("2026-11-28T09:15:42.1234567Z")}
	if rec != want {
		t.Errorf("record =\n%+v\nwant\n%+v", rec, want)
	}
	if ours(list.Value[1].Tags) {
		t.Errorf("a user's own reservation (department: HR) read as gpumarket's")
	}
	var got armcompute.CapacityReservation
	if err := json.Unmarshal(readTestdata(t, filepath.Join("arm", "capacityreservation-get.json")), &got); err != nil {
		t.Fatal(err)
	}
	if b := bookingFrom(&got, "westus"); !b.Start.Equal(at("2026-11-28T09:15:42.1234567Z")) {
		t.Errorf("Get start = %v, want timeCreated (provisioningTime is a later change)", b.Start)
	}
}

// TestSecondBookingOfSameSizeAndZoneUsesAnotherGroup: Azure takes one
// reservation of a VM size per zone per group; a second booking of the
// size in the zone goes in a second group, and a booking of another size
// still uses the first.
func TestSecondBookingOfSameSizeAndZoneUsesAnotherGroup(t *testing.T) {
	f := newFakeARM(t)
	f.listPageSize = 1 // every list in pages of one
	p := newTestProvider(t, f.options())
	first := book(t, p, offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 2), "led-1")
	second := book(t, p, offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 1), "led-2")
	other := book(t, p, offeringOf(t, p, "Standard_NC96ads_A100_v4", "2", 1), "led-3")
	third := book(t, p, offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 3), "led-4")
	for _, c := range []struct {
		b     domain.Booking
		group string
	}{{first, "gpumarket-eastus-z2"}, {second, "gpumarket-eastus-z2-2"}, {other, "gpumarket-eastus-z2"}, {third, "gpumarket-eastus-z2-3"}} {
		if !strings.Contains(c.b.ProviderRef, "/capacityReservationGroups/"+c.group+"/") {
			t.Errorf("%s in %s, want group %s", c.b.InstanceType, c.b.ProviderRef, c.group)
		}
	}
	for _, g := range []string{"gpumarket-eastus-z2", "gpumarket-eastus-z2-2", "gpumarket-eastus-z2-3"} {
		if n := f.putCount("/capacityreservationgroups/" + g); n != 1 {
			t.Errorf("group %s PUT %d times, want once", g, n)
		}
		if res := f.resource(rgPath + "/capacityReservationGroups/" + g); res == nil || res["zones"].([]any)[0] != "2" || res["tags"].(map[string]any)[TagManaged] != "gpumarket" {
			t.Errorf("group %s = %v", g, res)
		}
	}
	// The lookup searches every group of the zone.
	found, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 3), Ref: "led-4"})
	if err != nil || found == nil || found.ProviderRef != third.ProviderRef {
		t.Errorf("FindBooking(led-4) = %+v, %v", found, err)
	}
}

// TestBookAnswersWithReservationAlreadyMadeFromOffering: before
// buying, the provider looks for a reservation tagged with the same
// offering; a live one (a lost ledger, another process) is the answer and
// nothing is bought again. A failed one is not: the purchase goes ahead.
func TestBookAnswersWithReservationAlreadyMadeFromOffering(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	o := offeringOf(t, p, "Standard_NC24ads_A100_v4", "1", 2)
	made := book(t, p, o, "led-1")
	puts := f.putCount("")
	again, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "led-9", After: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if again.ProviderRef != made.ProviderRef || again.State != "active" || !strings.Contains(again.Message, `already made from offering `+o.ID+` (for ledger row "led-1")`) {
		t.Errorf("second booking = %+v, want the first reservation", again)
	}
	if again.CostUSD != o.UpfrontUSD {
		t.Errorf("second booking costs %v, want the offering's %v", again.CostUSD, o.UpfrontUSD)
	}
	if f.putCount("") != puts {
		t.Fatalf("the second booking of one offering sent %d PUTs", f.putCount("")-puts)
	}
	dry, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "led-10", DryRun: true})
	if err != nil || !dry.DryRun || dry.ProviderRef != made.ProviderRef {
		t.Errorf("dry run of a bought offering = %+v, %v", dry, err)
	}
	// The first one failed: a new purchase, in another group (the size
	// is taken in the first).
	f.edit(made.ProviderRef, func(res map[string]any) { res["properties"].(map[string]any)["provisioningState"] = "Failed" })
	fresh, err := p.Book(context.Background(), domain.BookRequest{Offering: o, Ref: "led-11", After: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ProviderRef == made.ProviderRef || !strings.Contains(fresh.ProviderRef, "gpumarket-eastus-z1-2/") {
		t.Errorf("after a failed reservation, booking = %+v, want a new one in group 2", fresh)
	}
}

// TestProvisioningStatesMeanWhatTheySay: every provisioning state a
// reservation shows maps onto the ledger: Failed and Canceled are failed
// (nothing is held), never "pending" (which reconciliation reads as still
// being made); Deleting is on its way out; Creating, Updating and
// Migrating are being worked on.
func TestProvisioningStatesMeanWhatTheySay(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	o := offeringOf(t, p, "Standard_NC24ads_A100_v4", "3", 1)
	b := book(t, p, o, "led-1")
	for state, want := range map[string]string{
		"Creating": "pending", "Updating": "pending", "Migrating": "pending", "Succeeded": "active",
		"Failed": "failed", "Canceled": "failed", "Deleting": "deleted",
	} {
		f.edit(b.ProviderRef, func(res map[string]any) { res["properties"].(map[string]any)["provisioningState"] = state })
		found, err := p.FindBooking(context.Background(), domain.BookRequest{Offering: o, Ref: "led-1"})
		if err != nil || found == nil || found.State != want {
			t.Errorf("%s: found %+v, %v; want state %s", state, found, err, want)
		}
	}
}

// TestServerFaultsAreNeverADefiniteNo: a 408 or a 5xx to the
// PUT that spends leaves the outcome unknown (the reservation may exist
// and bill), so the ledger looks it up instead of freeing the offering
// for a second purchase; a 4xx refusal, or an operation that ended Failed
// or Canceled, is a definite "no". The same for a delete.
func TestServerFaultsAreNeverADefiniteNo(t *testing.T) {
	off := domain.Offering{ID: "azcr-0123456789abcdef", Provider: "azure", Region: "eastus", Zone: "2",
		InstanceType: "Standard_NC24ads_A100_v4", InstanceCount: 1, Start: testNow, End: testNow.Add(time.Hour)}
	for _, tc := range []struct {
		status             int
		failLRO, cancelLRO bool
		declined           bool
	}{
		{status: 408}, {status: 429}, {status: 500}, {status: 502}, {status: 503}, {status: 504},
		{status: 400, declined: true}, {status: 409, declined: true},
		{failLRO: true, declined: true}, {cancelLRO: true, declined: true},
	} {
		f := newFakeARM(t)
		f.putStatus, f.failLRO, f.cancelLRO = tc.status, tc.failLRO, tc.cancelLRO
		p := newTestProvider(t, f.options())
		_, err := p.Book(context.Background(), domain.BookRequest{Offering: off, Ref: "led-9"})
		if err == nil {
			t.Fatalf("%+v: booked", tc)
		}
		if got := Descriptor.IsDeclined(err); got != tc.declined {
			t.Errorf("%+v: declined = %v, want %v (%v)", tc, got, tc.declined, err)
		}
	}
	for status, declined := range map[int]bool{408: false, 500: false, 503: false, 400: true} {
		f := newFakeARM(t)
		p := newTestProvider(t, f.options())
		b := book(t, p, offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 1), "led-1")
		f.deleteStatus = status
		err := p.DeleteBooking(context.Background(), b.ProviderRef)
		if err == nil || Descriptor.IsDeclined(err) != declined {
			t.Errorf("delete answered %d: err %v, declined %v, want %v", status, err, Descriptor.IsDeclined(err), declined)
		}
	}
}

// TestReleaseWithVMsAssociatedSaysDisassociate: Azure deletes a
// reservation only when no VM is associated with it. The refusal names
// the VMs and what to do; once they are gone the release goes through.
func TestReleaseWithVMsAssociatedSaysDisassociate(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	b := book(t, p, offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 1), "led-1")
	vm := "/subscriptions/" + testSub + "/resourceGroups/rg-gpu/providers/Microsoft.Compute/virtualMachines/train-0"
	f.edit(b.ProviderRef, func(res map[string]any) {
		res["properties"].(map[string]any)["virtualMachinesAssociated"] = []any{map[string]any{"id": vm}}
	})
	err := p.ReleaseBooking(context.Background(), b)
	if err == nil || !strings.Contains(err.Error(), "1 VM(s) are still associated with it (train-0)") ||
		!strings.Contains(err.Error(), "set its capacity reservation group to none") {
		t.Fatalf("release with a VM associated: %v", err)
	}
	if f.resource(b.ProviderRef) == nil {
		t.Fatal("the reservation is gone though the delete was refused")
	}
	f.edit(b.ProviderRef, func(res map[string]any) { delete(res["properties"].(map[string]any), "virtualMachinesAssociated") })
	if err := p.ReleaseBooking(context.Background(), b); err != nil {
		t.Fatalf("release once disassociated: %v", err)
	}
	if f.resource(b.ProviderRef) != nil {
		t.Error("the reservation still exists after its release")
	}
}

// TestFleetOfSeveralGPUSizesIsRefused: several sizes in one scale set are
// an instance mix, which Azure documents for A, B, D, E and F family sizes
// only; a GPU fleet of several sizes is refused before any PUT, saying
// what to do. The same size named twice (in any case) is one size.
func TestFleetOfSeveralGPUSizesIsRefused(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, fleetOptions(f))
	spec := domain.FleetSpec{Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4", "Standard_NC96ads_A100_v4"}, TargetCapacity: 2, ClientToken: "led-1"}
	for _, dry := range []bool{true, false} {
		spec.DryRun = dry
		_, err := p.LaunchFleet(context.Background(), spec)
		if !errors.Is(err, domain.ErrDeclined) || !strings.Contains(err.Error(), "instance mix, which Azure takes only for A, B, D, E and F family sizes") || !strings.Contains(err.Error(), "launch one fleet per size") {
			t.Errorf("dry %v: %v", dry, err)
		}
	}
	if n := f.putCount(""); n != 0 {
		t.Fatalf("%d PUTs for a refused fleet", n)
	}
	spec.DryRun = false
	spec.InstanceTypes = []string{"Standard_NC24ads_A100_v4", "STANDARD_NC24ADS_A100_V4", "Standard_NC24ads_A100_v4"}
	if _, err := p.LaunchFleet(context.Background(), spec); err != nil {
		t.Fatalf("one size named three times: %v", err)
	}
	res := f.resource(rgPath + "/virtualMachineScaleSets/gpumarket-led-1")
	if sku := res["sku"].(map[string]any); sku["name"] != "Standard_NC24ads_A100_v4" || res["properties"].(map[string]any)["skuProfile"] != nil {
		t.Errorf("scale set sku %v, profile %v: want the one size, no mix", sku, res["properties"].(map[string]any)["skuProfile"])
	}
}

// TestFleetDryRunChecksSpotAndFamilyQuota: spot VMs count against the
// region's separate spot quota (lowPriorityCores), regular VMs against
// their size's family and the region's cores. The dry run checks each,
// for the fleet's own size, and refuses the one that would be exceeded.
func TestFleetDryRunChecksSpotAndFamilyQuota(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, fleetOptions(f))
	spec := domain.FleetSpec{Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4"}, TargetCapacity: 4, OnDemandBase: 1, DryRun: true, ClientToken: "led-1"}
	fl, err := p.LaunchFleet(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quota cores 10+24 of 350", "quota standardNCADSA100v4Family 0+24 of 96", "quota lowPriorityCores 0+72 of 100"} {
		if !strings.Contains(fl.Message, want) {
			t.Errorf("dry run %q does not say %q", fl.Message, want)
		}
	}
	for _, tc := range []struct {
		name       string
		size       string
		target, od int
		want       string
	}{
		{"spot over the spot quota", "Standard_NC24ads_A100_v4", 6, 1, "quota lowPriorityCores in eastus: 0 of 100 vCPUs used, 120 more needed"},
		{"regular over the family quota", "Standard_NC24ads_A100_v4", 5, 5, "quota standardNCADSA100v4Family in eastus: 0 of 96 vCPUs used, 120 more needed"},
		{"another size's family", "Standard_NV36ads_A10_v5", 3, 3, ""},
	} {
		s := spec
		s.InstanceTypes, s.TargetCapacity, s.OnDemandBase = []string{tc.size}, tc.target, tc.od
		fl, err := p.LaunchFleet(context.Background(), s)
		if tc.want == "" {
			// The A10 family has no usage entry here: said, not refused.
			if err != nil || !strings.Contains(fl.Message, "quota StandardNVADSA10v5Family not checked (no usage entry)") {
				t.Errorf("%s: %+v, %v", tc.name, fl, err)
			}
			continue
		}
		if !errors.Is(err, domain.ErrDeclined) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if n := f.putCount(""); n != 0 {
		t.Errorf("%d PUTs in dry runs", n)
	}
}

// TestAzureTagsSpellProvidersTags: the ledger row, actor, tool and
// offering go on every reservation and scale set, under keys Azure takes
// (no ':' '<' '>' '%' '&' '\\' '?' '/'), with no empty value and none over
// 256 characters.
func TestAzureTagsSpellProvidersTags(t *testing.T) {
	long := strings.Repeat("é", 300)
	tags := azureTags("led-1", long, "", map[string]string{TagEnd: "2026-11-30T12:00:00Z", TagCost: ""})
	want := map[string]string{TagManaged: "gpumarket", TagRef: "led-1", TagTool: "gpumarket", TagEnd: "2026-11-30T12:00:00Z"}
	for k, v := range want {
		if tagOf(tags, k) != v {
			t.Errorf("tag %s = %q, want %q", k, tagOf(tags, k), v)
		}
	}
	if a := tagOf(tags, TagActor); len([]rune(a)) > maxTagValue || len(a) > maxTagValue || !strings.HasPrefix(long, a) || a == "" {
		t.Errorf("actor tag of %d bytes, want the actor cut to %d", len(a), maxTagValue)
	}
	for k, v := range tags {
		if strings.ContainsAny(k, ":<>%&\\?/") || v == nil || *v == "" {
			t.Errorf("tag %q = %v: a key Azure refuses or an empty value", k, v)
		}
	}
	if _, ok := tags[TagOffering]; ok {
		t.Error("an empty offering made a tag")
	}
}

// TestListRecordsPagesThroughTaggedResources: the cloud as the
// second record. Every reservation and scale set gpumarket tagged is
// listed, read from its tags, through every page of every list; a user's
// own resources in the same places are not.
func TestListRecordsPagesThroughTaggedResources(t *testing.T) {
	f := newFakeARM(t)
	f.listPageSize = 1
	p := newTestProvider(t, fleetOptions(f))
	ctx := context.Background()
	o1 := offeringOf(t, p, "Standard_NC24ads_A100_v4", "1", 2)
	b1 := book(t, p, o1, "led-1")
	b2 := book(t, p, offeringOf(t, p, "Standard_NC24ads_A100_v4", "1", 1), "led-2")
	b3 := book(t, p, offeringOf(t, p, "Standard_NC96ads_A100_v4", "2", 1), "led-3")
	fl, err := p.LaunchFleet(ctx, domain.FleetSpec{Region: "eastus", InstanceTypes: []string{"Standard_NC24ads_A100_v4"}, Zones: []string{"1"}, TargetCapacity: 2, ClientToken: "led-4", Actor: "bob@host"})
	if err != nil {
		t.Fatal(err)
	}
	f.put(rgPath+"/capacityReservationGroups/gpumarket-eastus-z1/capacityReservations/team", map[string]any{
		"location": "eastus", "sku": map[string]any{"name": "Standard_NC96ads_A100_v4", "capacity": 1}, "zones": []any{"1"},
		"tags": map[string]any{"department": "HR"}, "properties": map[string]any{"provisioningState": "Succeeded", "provisioningTime": testNow.Format(time.RFC3339)},
	})
	f.put(rgPath+"/virtualMachineScaleSets/team-vmss", map[string]any{"location": "eastus", "sku": map[string]any{"name": "Standard_D2s_v3", "capacity": 3},
		"properties": map[string]any{"timeCreated": testNow.Format(time.RFC3339)}})
	recs, err := p.ListRecords(ctx, testNow.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]domain.CloudRecord{}
	for _, r := range recs {
		byRef[r.Ref] = r
	}
	if len(recs) != 4 || len(byRef) != 4 {
		t.Fatalf("%d records %+v, want gpumarket's 3 reservations and 1 scale set", len(recs), recs)
	}
	r1 := byRef["led-1"]
	if r1.Kind != domain.KindReservation || r1.ProviderRef != b1.ProviderRef || r1.OfferingID != o1.ID || r1.Actor != "alice@host" ||
		r1.Region != "eastus" || r1.Zone != "1" || r1.InstanceCount != 2 || !r1.Start.Equal(testNow) || !r1.End.Equal(b1.End) ||
		math.Abs(r1.CostUSD-o1.UpfrontUSD) > 0.005 || r1.State != "active" || r1.Provider != "azure" || r1.Cloud != domain.CloudAzure {
		t.Errorf("led-1 = %+v", r1)
	}
	if byRef["led-2"].ProviderRef != b2.ProviderRef || byRef["led-3"].ProviderRef != b3.ProviderRef {
		t.Errorf("led-2, led-3 = %+v, %+v", byRef["led-2"], byRef["led-3"])
	}
	r4 := byRef["led-4"]
	if r4.Kind != domain.KindFleet || r4.ProviderRef != fl.ID || r4.Actor != "bob@host" || r4.InstanceType != "Standard_NC24ads_A100_v4" ||
		r4.InstanceCount != 2 || r4.Zone != "1" || !math.IsNaN(r4.CostUSD) || !r4.CreatedAt.Equal(testNow) {
		t.Errorf("led-4 = %+v", r4)
	}
	if n := f.count(func() int { return f.listPages["reservations"] }); n < 5 {
		t.Errorf("%d reservation list pages for 5 reservations in pages of one: pages not followed", n)
	}
	if n := f.count(func() int { return f.listPages["scalesets"] }); n < 2 {
		t.Errorf("%d scale set list pages for 2 scale sets in pages of one", n)
	}
	// since: nothing made after the clock.
	later, err := p.ListRecords(ctx, testNow.Add(time.Hour))
	if err != nil || len(later) != 0 {
		t.Errorf("records since a later time = %+v, %v", later, err)
	}
}

// setRetailPrice changes the recorded on-demand Linux list price of a size
// in a region.
func setRetailPrice(t *testing.T, f *fakeARM, region, size string, usd float64) {
	t.Helper()
	n := 0
	for i, raw := range f.prices.Items {
		var it map[string]any
		if err := json.Unmarshal(raw, &it); err != nil {
			t.Fatal(err)
		}
		name, _ := it["skuName"].(string)
		prod, _ := it["productName"].(string)
		if it["armRegionName"] != region || it["armSkuName"] != size || it["type"] != "Consumption" ||
			strings.HasSuffix(name, "Spot") || strings.HasSuffix(name, "Low Priority") || strings.Contains(prod, "Windows") {
			continue
		}
		it["retailPrice"], it["unitPrice"] = usd, usd
		b, _ := json.Marshal(it)
		f.prices.Items[i] = b
		n++
	}
	if n == 0 {
		t.Fatalf("no on-demand meter of %s in %s", size, region)
	}
}

// setCapability changes a capability of a recorded size.
func setCapability(t *testing.T, f *fakeARM, region, size, name, value string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, raw := range f.skus[region] {
		var sku map[string]any
		if err := json.Unmarshal(raw, &sku); err != nil {
			t.Fatal(err)
		}
		if sku["name"] != size {
			continue
		}
		for _, c := range sku["capabilities"].([]any) {
			if c := c.(map[string]any); c["name"] == name {
				c["value"] = value
			}
		}
		f.skus[region][i], _ = json.Marshal(sku)
		return
	}
	t.Fatalf("no size %s in %s", size, region)
}

// TestRefreshOfferingRepricesAndSaysGone: right before a
// purchase the offering is described again from the list price of the
// moment (not the 15-minute cache): same id and window, new total and
// rate. A size no longer reservable, or no longer priced, is gone.
func TestRefreshOfferingRepricesAndSaysGone(t *testing.T) {
	f := newFakeARM(t)
	p := newTestProvider(t, f.options())
	ctx := context.Background()
	o := offeringOf(t, p, "Standard_NC24ads_A100_v4", "2", 2)
	same, err := p.RefreshOffering(ctx, o)
	if err != nil || same.ID != o.ID || same.UpfrontUSD != o.UpfrontUSD || same.HourlyUSD != o.HourlyUSD || !same.Start.Equal(o.Start) || !same.End.Equal(o.End) {
		t.Fatalf("unchanged terms refreshed to %+v, %v", same, err)
	}
	setRetailPrice(t, f, "eastus", "Standard_NC24ads_A100_v4", 11.019)
	fresh, err := p.RefreshOffering(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.ID != o.ID || !fresh.Start.Equal(o.Start) || !fresh.End.Equal(o.End) ||
		math.Abs(fresh.HourlyUSD-11.019*2) > 1e-9 || math.Abs(fresh.UpfrontUSD-11.019*2*24) > 1e-6 || !strings.Contains(fresh.Note, "$22.04 an hour") {
		t.Errorf("repriced offering = %+v, want 2 × $11.019 an hour for 24 h", fresh)
	}
	setCapability(t, f, "eastus", "Standard_NC24ads_A100_v4", "CapacityReservationSupported", "False")
	if _, err := p.RefreshOffering(ctx, o); !errors.Is(err, domain.ErrOfferingGone) || !strings.Contains(err.Error(), "no longer takes capacity reservations") {
		t.Errorf("unreservable: %v", err)
	}
	setCapability(t, f, "eastus", "Standard_NC24ads_A100_v4", "CapacityReservationSupported", "True")
	f.prices.Items = nil
	if _, err := p.RefreshOffering(ctx, o); !errors.Is(err, domain.ErrOfferingGone) || !strings.Contains(err.Error(), "no on-demand list price") {
		t.Errorf("unpriced: %v", err)
	}
	gone := o
	gone.InstanceType = "Standard_NC48ads_A100_v4"
	if _, err := p.RefreshOffering(ctx, gone); !errors.Is(err, domain.ErrOfferingGone) {
		t.Errorf("a size not listed in the region: %v", err)
	}
	f.failSKURegion = "eastus"
	if _, err := p.RefreshOffering(ctx, o); err == nil || errors.Is(err, domain.ErrOfferingGone) {
		t.Errorf("ResourceSKUs failing: %v, want an error that is not 'gone'", err)
	}
	if _, err := p.RefreshOffering(ctx, domain.Offering{ID: "cb-1", Provider: "aws"}); err == nil || errors.Is(err, domain.ErrOfferingGone) {
		t.Errorf("an AWS offering: %v", err)
	}
}
