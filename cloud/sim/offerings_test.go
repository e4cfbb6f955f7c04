package sim

import (
	"context"
	"errors"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

var ctx = context.Background()

func TestOfferingQueryValidation(t *testing.T) {
	m := newAt(1, wed)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name string
		q    domain.OfferingQuery
		err  string // "" = accepted
	}{
		{"one day", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: day}, ""},
		{"14 days", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 14 * day}, ""},
		{"21 days", domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 21 * day}, ""},
		{"182 days", domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 182 * day}, ""},
		{"any GPU by GPUs", domain.OfferingQuery{GPUs: 16, Duration: 2 * day}, ""},
		{"64 instances", domain.OfferingQuery{GPU: "h100", Instances: 64, Duration: day}, ""},
		// Not a capacity-block step, but Azure-style reservations take any
		// whole hours (TestOddDurationsGetReservationsOnly).
		{"36 hours", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 36 * time.Hour}, ""},
		{"15 days", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 15 * day}, ""},
		{"90 minutes", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 90 * time.Minute}, "whole hours"},
		{"189 days", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 189 * day}, "182 days"},
		{"no duration", domain.OfferingQuery{GPU: "H100", Instances: 1}, "capacity blocks: 1 to 14 days in 1-day steps"},
		{"65 instances", domain.OfferingQuery{GPU: "H100", Instances: 65, Duration: day}, "1 to 64 instances"},
		{"no count", domain.OfferingQuery{GPU: "H100", Duration: day}, "number of instances (1-64) or of GPUs"},
		{"negative count", domain.OfferingQuery{GPU: "H100", Instances: -1, Duration: day}, "positive number"},
		{"too many GPUs", domain.OfferingQuery{GPU: "H100", GPUs: 513, Duration: day}, "at most 64 instances"},
		{"GPU without blocks", domain.OfferingQuery{GPU: "L4", Instances: 1, Duration: day}, "blocks of H100, H200, A100"},
		{"unknown GPU", domain.OfferingQuery{GPU: "B300", Instances: 1, Duration: day}, "want one of H200, H100"},
		{"start too far", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: day, StartAfter: wed.Add(60 * day)}, "within 8 weeks"},
		{"window reversed", domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: day, StartAfter: wed.Add(3 * day), StartBefore: wed.Add(day)}, "earlier than start after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.FindOfferings(ctx, tc.q)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q does not say %q", err, tc.err)
			}
		})
	}
}

func TestOfferingTerms(t *testing.T) {
	m := newAt(1, wed)
	after, before := wed.Add(24*time.Hour), wed.Add(20*24*time.Hour)
	for _, tc := range []struct {
		name string
		q    domain.OfferingQuery
		n    func(o domain.Offering) int
	}{
		{"H100 by instances", domain.OfferingQuery{GPU: "H100", Instances: 4, Duration: 2 * 24 * time.Hour, StartAfter: after, StartBefore: before},
			func(domain.Offering) int { return 4 }},
		{"A100 by GPUs", domain.OfferingQuery{GPU: "A100", GPUs: 12, Duration: 7 * 24 * time.Hour, StartAfter: after, StartBefore: before},
			func(o domain.Offering) int { return int(math.Ceil(12 / o.GPU.Count)) }},
		{"H200 for 28 days", domain.OfferingQuery{GPU: "H200", Instances: 1, Duration: 28 * 24 * time.Hour, StartAfter: after, StartBefore: before},
			func(domain.Offering) int { return 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offers, err := m.FindOfferings(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(offers) == 0 {
				t.Fatal("no offerings")
			}
			clouds := map[domain.Cloud]bool{}
			for i, o := range offers {
				clouds[o.Cloud] = true
				want, _ := domain.NormalizeGPUModel(tc.q.GPU)
				if o.GPU.Model != want || o.InstanceCount != tc.n(o) || !o.Simulated || o.Provider != "sim" || o.Currency != "USD" {
					t.Errorf("%s: %+v, want %s × %d, simulated", o.ID, o, want, tc.n(o))
				}
				if o.StartsOnPurchase {
					// Azure-style: held from purchase to the end of the wanted window.
					if o.Cloud != domain.CloudAzure || !o.Start.Equal(m.opt.Now().UTC().Truncate(time.Minute)) || !o.End.Equal(after.Add(tc.q.Duration)) {
						t.Errorf("%s: %s to %s, want from now to %s", o.ID, o.Start, o.End, after.Add(tc.q.Duration))
					}
				} else if time.Duration(o.HeldHours()*float64(time.Hour)) != tc.q.Duration || o.Start.Before(after) || o.Start.After(before) {
					t.Errorf("%s: %s to %s, want %s starting in [%s, %s]", o.ID, o.Start, o.End, tc.q.Duration, after, before)
				}
				if i > 0 && o.USDPerGPUHour() < offers[i-1].USDPerGPUHour() {
					t.Errorf("offerings not sorted by $/GPU-h at %d", i)
				}
				p := m.byKey[domain.PoolKey{Provider: "sim", Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType}.String()]
				if p == nil {
					t.Fatalf("%s: no pool %s %s %s", o.ID, o.Region, o.Zone, o.InstanceType)
				}
				od := *p.spec.Desc.OnDemandUSDHour / o.GPU.Count
				_, spot := p.model.inForce(wed.Unix())
				rate := o.USDPerGPUHour()
				switch {
				case o.Kind == domain.KindTrainingPlan: // TestTrainingPlansOnSim
				case o.Cloud == domain.CloudAWS:
					if !regexp.MustCompile(`^cb-[0-9a-f]{17}$`).MatchString(o.ID) {
						t.Errorf("AWS offering id %q, want cb- and 17 hex digits", o.ID)
					}
					if h, m := o.Start.UTC().Hour(), o.Start.UTC().Minute(); h != 11 || m != 30 {
						t.Errorf("%s starts at %s, AWS blocks start at 11:30 UTC", o.ID, o.Start)
					}
					r := blockRate[o.InstanceType]
					if rate < r[0]-0.01 || rate > r[1]+0.01 || rate >= od || rate <= spot/o.GPU.Count {
						t.Errorf("%s %s: $%.3f/GPU-h, want %.1f-%.1f, under on-demand %.3f and over spot %.3f", o.ID, o.InstanceType, rate, r[0], r[1], od, spot/o.GPU.Count)
					}
				case o.Cloud == domain.CloudAzure:
					if !strings.HasPrefix(o.ID, "azcr-") {
						t.Errorf("Azure offering id %q, want azcr-…", o.ID)
					}
					if math.Abs(rate-od) > 0.01 {
						t.Errorf("%s: $%.4f/GPU-h, want the on-demand %.4f", o.ID, rate, od)
					}
				}
			}
			if !clouds[domain.CloudAWS] {
				t.Error("no AWS capacity blocks")
			}
		})
	}
	// The price bands of the issue, for the US regions.
	offers, err := m.FindOfferings(ctx, domain.OfferingQuery{Instances: 1, Duration: 24 * time.Hour, Regions: []string{"us-east-1", "us-east-2", "us-west-2"}})
	if err != nil {
		t.Fatal(err)
	}
	banded := map[string]int{}
	for _, o := range offers {
		band := map[string][2]float64{"p5.48xlarge": {3.9, 4.9}, "p4d.24xlarge": {1.9, 2.6}}[o.InstanceType]
		if band[1] > 0 {
			banded[o.InstanceType]++
		}
		if band[1] > 0 && (o.USDPerGPUHour() < band[0] || o.USDPerGPUHour() > band[1]) {
			t.Errorf("%s %s: $%.2f/GPU-h, want %.1f-%.1f", o.ID, o.InstanceType, o.USDPerGPUHour(), band[0], band[1])
		}
	}
	if banded["p5.48xlarge"] == 0 || banded["p4d.24xlarge"] == 0 {
		t.Errorf("banded offerings %v: want p5.48xlarge and p4d.24xlarge checked", banded)
	}
}

func TestOfferingsDeterministic(t *testing.T) {
	q := domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 3 * 24 * time.Hour}
	a, err := newAt(1, wed).FindOfferings(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newAt(1, wed).FindOfferings(ctx, q)
	c, _ := newAt(2, wed).FindOfferings(ctx, q)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d and %d offerings for the same seed", len(a), len(b))
	}
	ids := map[string]bool{}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Fatalf("offering %d differs between runs: %+v vs %+v", i, a[i], b[i])
		}
		if ids[a[i].ID] {
			t.Fatalf("duplicate id %s", a[i].ID)
		}
		ids[a[i].ID] = true
	}
	if len(c) == 0 {
		t.Fatal("no offerings for seed 2")
	}
	for _, o := range c {
		if ids[o.ID] {
			t.Errorf("seed 2 offers %s as seed 1 does", o.ID)
		}
	}
}

func TestBook(t *testing.T) {
	m := newAt(1, wed)
	q := domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 2 * 24 * time.Hour}
	offers, err := m.FindOfferings(ctx, q)
	if err != nil || len(offers) == 0 {
		t.Fatalf("offerings: %d, %v", len(offers), err)
	}
	var o domain.Offering
	for _, x := range offers {
		if x.Cloud == domain.CloudAWS && x.Kind == domain.KindBlock {
			o = x
			break
		}
	}

	dry, err := m.Book(ctx, domain.BookRequest{Offering: o, DryRun: true})
	if err != nil || !dry.DryRun || !strings.Contains(dry.Message, "would have succeeded") || dry.ProviderRef != "" {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if found, _ := m.FindBooking(ctx, domain.BookRequest{Offering: o}); found != nil {
		t.Fatalf("dry run left a booking: %+v", *found)
	}
	if again, _ := m.FindOfferings(ctx, q); len(again) != len(offers) {
		t.Fatalf("dry run changed the offerings: %d, had %d", len(again), len(offers))
	}

	b, err := m.Book(ctx, domain.BookRequest{Offering: o, After: wed})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^cr-[0-9a-f]{17}$`).MatchString(b.ProviderRef) || b.State != "scheduled" || b.DryRun ||
		b.CostUSD != o.UpfrontUSD || b.InstanceCount != o.InstanceCount || !b.Start.Equal(o.Start) {
		t.Fatalf("booking %+v for offering %+v", b, o)
	}
	// Another process with the same seed books the same id the same way.
	if b2, err := newAt(1, wed).Book(ctx, domain.BookRequest{Offering: o}); err != nil || b2.ProviderRef != b.ProviderRef {
		t.Errorf("same offering in a fresh market: %+v, %v; want ref %s", b2, err, b.ProviderRef)
	}

	after, _ := m.FindOfferings(ctx, q)
	for _, x := range after {
		if x.ID == o.ID || sameWindow(x, o) {
			t.Fatalf("booked offering %s still on sale", o.ID)
		}
	}
	if len(after) != len(offers)-1 {
		t.Errorf("%d offerings after booking one of %d", len(after), len(offers))
	}
	for _, dryRun := range []bool{false, true} {
		if _, err := m.Book(ctx, domain.BookRequest{Offering: o, DryRun: dryRun}); !errors.Is(err, ErrAlreadyBooked) || !strings.Contains(err.Error(), b.ProviderRef) {
			t.Errorf("booking twice (dry run %v): %v, want ErrAlreadyBooked naming %s", dryRun, err, b.ProviderRef)
		}
	}
	found, err := m.FindBooking(ctx, domain.BookRequest{Offering: o, After: wed})
	if err != nil || found == nil || *found != b {
		t.Errorf("FindBooking: %+v, %v; want %+v", found, err, b)
	}
	// Same terms under an id of a later search: still found.
	o2 := o
	o2.ID = "cb-00000000000000000"
	if found, _ := m.FindBooking(ctx, domain.BookRequest{Offering: o2}); found == nil || found.ProviderRef != b.ProviderRef {
		t.Errorf("FindBooking by terms: %+v", found)
	}
	// Another count in the same window is another purchase; its window is still taken.
	o3 := o2
	o3.InstanceCount++
	if found, _ := m.FindBooking(ctx, domain.BookRequest{Offering: o3}); found != nil {
		t.Errorf("FindBooking of %d instances found the booking of %d: %+v", o3.InstanceCount, o.InstanceCount, found)
	}
	m.mu.Lock()
	taken := m.bookedLocked(o3)
	m.mu.Unlock()
	if !taken {
		t.Errorf("a window bought for %d instances is on sale for %d", o.InstanceCount, o3.InstanceCount)
	}
}

func TestBookRefuses(t *testing.T) {
	m := newAt(1, wed)
	offers, err := m.FindOfferings(ctx, domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 24 * time.Hour})
	if err != nil || len(offers) == 0 {
		t.Fatalf("offerings: %d, %v", len(offers), err)
	}
	o := offers[0]
	for _, tc := range []struct {
		name   string
		change func(o *domain.Offering)
		m      *Market
		err    string
	}{
		{"cheaper than offered", func(o *domain.Offering) { o.UpfrontUSD -= 100 }, m, "search again"},
		{"more instances", func(o *domain.Offering) { o.InstanceCount++ }, m, "search again"},
		{"another seed", func(*domain.Offering) {}, newAt(2, wed), "seed 2"},
		{"another provider", func(o *domain.Offering) { o.Provider = "aws" }, m, "not the simulated market"},
		{"ended", func(*domain.Offering) {}, newAt(1, o.End.Add(time.Minute)), "ended"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := o
			tc.change(&x)
			if _, err := tc.m.Book(ctx, domain.BookRequest{Offering: x}); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Book: %v, want an error saying %q", err, tc.err)
			}
		})
	}
	// A block that has started is active.
	b, err := newAt(1, o.Start.Add(time.Hour)).Book(ctx, domain.BookRequest{Offering: o})
	if err != nil || b.State != "active" {
		t.Errorf("booking a started block: %+v, %v; want active", b, err)
	}
}

func TestBookAzureReservation(t *testing.T) {
	m := newAt(1, wed)
	offers, err := m.FindOfferings(ctx, domain.OfferingQuery{GPU: "A100", Instances: 1, Duration: 24 * time.Hour, Regions: []string{"eastus", "eastus2", "southcentralus", "westus3", "westeurope", "swedencentral", "japaneast"}})
	if err != nil || len(offers) == 0 {
		t.Fatalf("offerings: %d, %v", len(offers), err)
	}
	b, err := m.Book(ctx, domain.BookRequest{Offering: offers[0]})
	if err != nil || !strings.Contains(b.ProviderRef, "/providers/Microsoft.Compute/capacityReservationGroups/") {
		t.Errorf("Azure booking: %+v, %v; want an Azure resource id", b, err)
	}
}

func TestOddDurationsGetReservationsOnly(t *testing.T) {
	m := newAt(1, wed)
	offers, err := m.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 8 * time.Hour})
	if err != nil || len(offers) == 0 {
		t.Fatalf("8 h of A100: %d offerings, %v", len(offers), err)
	}
	for _, o := range offers {
		if o.Cloud != domain.CloudAzure || !o.StartsOnPurchase || o.End.Sub(o.Start) != 8*time.Hour {
			t.Errorf("%s: %s %s to %s, want an Azure-style 8 h reservation from now", o.ID, o.Cloud, o.Start, o.End)
		}
	}
}

func FuzzFindOfferings(f *testing.F) {
	f.Add("H100", 1, 0, 24, int64(0), int64(0))
	f.Add("a100", 0, 12, 21*24, int64(3600), int64(86400*30))
	f.Add("", 65, -3, 37, int64(-50), int64(999999999))
	m := newAt(1, wed)
	f.Fuzz(func(t *testing.T, gpu string, instances, gpus, hours int, afterSec, beforeSec int64) {
		q := domain.OfferingQuery{GPU: gpu, Instances: instances, GPUs: gpus, Duration: time.Duration(hours) * time.Hour}
		if afterSec != 0 {
			q.StartAfter = wed.Add(time.Duration(afterSec%(1<<32)) * time.Second)
		}
		if beforeSec != 0 {
			q.StartBefore = wed.Add(time.Duration(beforeSec%(1<<32)) * time.Second)
		}
		offers, err := m.FindOfferings(ctx, q)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for _, o := range offers {
			if o.InstanceCount < 1 || o.InstanceCount > blockTerms.MaxInstances || o.End.Sub(o.Start) < q.Duration || o.UpfrontUSD <= 0 ||
				(!o.StartsOnPurchase && time.Duration(o.HeldHours()*float64(time.Hour)) != q.Duration) {
				t.Fatalf("query %+v gave offering %+v", q, o)
			}
			if o.Start.After(wed.Add(blockTerms.MaxLead)) {
				t.Fatalf("offering %s starts %s, beyond 8 weeks", o.ID, o.Start)
			}
		}
	})
}

func TestRememberBookingsAcrossProcesses(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	first := New(Options{Seed: 7, Now: func() time.Time { return now }})
	offs, err := first.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
	if err != nil || len(offs) < 2 {
		t.Fatalf("offerings: %d, %v", len(offs), err)
	}
	booked, lost := offs[0], offs[1]
	b, err := first.Book(context.Background(), domain.BookRequest{Offering: booked})
	if err != nil {
		t.Fatal(err)
	}
	// A new process learns from the ledger: one settled booking, one whose
	// answer was lost.
	second := New(Options{Seed: 7, Now: func() time.Time { return now }})
	second.RememberBookings([]domain.BookedOffering{{Offering: booked, Booking: b}, {Offering: lost}})
	for _, o := range []domain.Offering{booked, lost} {
		got, err := second.FindBooking(context.Background(), domain.BookRequest{Offering: o})
		if err != nil || got == nil || got.ProviderRef == "" {
			t.Fatalf("FindBooking(%s) = %+v, %v", o.ID, got, err)
		}
		if _, err := second.Book(context.Background(), domain.BookRequest{Offering: o}); !errors.Is(err, ErrAlreadyBooked) {
			t.Fatalf("re-booking %s: %v", o.ID, err)
		}
	}
	if got, _ := second.FindBooking(context.Background(), domain.BookRequest{Offering: booked}); got.ProviderRef != b.ProviderRef {
		t.Fatalf("remembered ref %q, want %q", got.ProviderRef, b.ProviderRef)
	}
	again, _ := second.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
	for _, o := range again {
		if o.ID == booked.ID || o.ID == lost.ID {
			t.Fatalf("booked offering %s offered again", o.ID)
		}
	}
}

// TestNoReservationsWhereAzureTakesNone: Azure takes no capacity
// reservation for ND-series or NCads H100 v5 sizes, so neither does the
// sim: 8 h of H100 (no AWS block lasts 8 h) finds nothing.
func TestNoReservationsWhereAzureTakesNone(t *testing.T) {
	m := newAt(1, wed)
	offers, err := m.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 2, Duration: 8 * time.Hour})
	if err != nil || len(offers) != 0 {
		t.Errorf("8 h of H100: %d offerings (%v), want none: Azure reserves no H100 size", len(offers), err)
	}
}

// TestReservationsOnlyFromNowForTheAskedHours: as on Azure,
// a reservation starts when it is made: a search whose start range lies
// ahead gets none (and, with no block of that length either, is told
// why), and one from now gets reservations of exactly the asked length.
func TestReservationsOnlyFromNowForTheAskedHours(t *testing.T) {
	m := newAt(1, wed)
	later := domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 48 * time.Hour,
		StartAfter: wed.Add(18 * time.Hour), StartBefore: wed.Add(21 * time.Hour)}
	offers, err := m.FindOfferings(context.Background(), later)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offers {
		if o.StartsOnPurchase || o.Start.Before(later.StartAfter) || o.HeldHours() != 48 {
			t.Errorf("%s: %s from %s for %s, want only blocks starting in the asked range and lasting 48 h", o.ID, o.Kind, o.Start, o.End.Sub(o.Start))
		}
	}
	odd := later
	odd.Duration = 30 * time.Hour
	if _, err := m.FindOfferings(context.Background(), odd); !errors.Is(err, domain.ErrInvalidQuery) || !strings.Contains(err.Error(), "start when they are made") {
		t.Errorf("30 h from tomorrow: %v, want a refusal saying reservations start when made", err)
	}
	now := domain.OfferingQuery{GPU: "A100", Instances: 2, Duration: 30 * time.Hour}
	offers, err = m.FindOfferings(context.Background(), now)
	if err != nil || len(offers) == 0 {
		t.Fatalf("30 h from now: %d offerings, %v", len(offers), err)
	}
	for _, o := range offers {
		if !o.StartsOnPurchase || o.End.Sub(o.Start) != 30*time.Hour || o.HourlyUSD <= 0 || math.Abs(o.UpfrontUSD-o.HourlyUSD*30) > 0.01 {
			t.Errorf("%s: from %s for %s, $%.2f at $%.2f/h; want a reservation of exactly 30 h whose total is 30 × its rate", o.ID, o.Start, o.End.Sub(o.Start), o.UpfrontUSD, o.HourlyUSD)
		}
	}
}
