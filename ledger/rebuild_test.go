package ledger_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
)

// TestRebuildFromTheClouds: nothing on the cloud side
// recorded which purchases gpumarket made, so a lost ledger could not be
// rebuilt. Purchases and launches carry their ledger row, actor and
// offering as tags; Rebuild re-creates, in an empty ledger, a row for
// each under its old id, and running it again adds nothing.
func TestRebuildFromTheClouds(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.SpotUSDHour = 10
	f.search(t)
	var want []ledger.Entry
	for _, id := range []string{"cb-cheap", "cb-dear"} {
		res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: id, Actor: "alice@host"})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.Row)
	}
	fl, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: domain.FleetSpec{Provider: "aws", Region: "us-east-1",
		InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}, Actor: "bob@host"})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, fl.Row)

	g := newFixture(t, "", "aws", ledger.Budget{})
	g.svc = ledger.New(g.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return g.now }, Timeout: time.Second})
	rep, err := g.svc.Rebuild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Created) != 3 || rep.Present != 0 || len(rep.Asked) != 1 || len(rep.Failed) != 0 {
		t.Fatalf("rebuild report %+v", rep)
	}
	for _, w := range want {
		got, err := g.st.Get(ctx, w.ID)
		if err != nil {
			t.Fatalf("row %s not re-created: %v", w.ID, err)
		}
		if got.Kind != w.Kind || got.ProviderRef != w.ProviderRef || got.IdemKey != w.IdemKey || got.Actor != w.Actor ||
			got.InstanceCount != w.InstanceCount || got.State != w.State || got.Note == "" {
			t.Errorf("re-created %+v\nwant like %+v", got, w)
		}
		if got.Kind == ledger.KindBlock && (got.CostUSD != w.CostUSD || !got.Start.Equal(w.Start) || !got.End.Equal(w.End)) {
			t.Errorf("block %s: cost %v %v–%v, want %v %v–%v", got.ID, got.CostUSD, got.Start, got.End, w.CostUSD, w.Start, w.End)
		}
		if got.Kind == ledger.KindFleet && !ledger.CostUnknown(got) {
			t.Errorf("a fleet whose record says no cost shows $%v", got.CostUSD)
		}
	}
	// Again: nothing more.
	rep, err = g.svc.Rebuild(ctx)
	if err != nil || len(rep.Created) != 0 || rep.Present != 3 {
		t.Fatalf("second rebuild: %+v, %v", rep, err)
	}
	if n := len(listRows(t, g.st)); n != 3 {
		t.Fatalf("%d rows after two rebuilds, want 3", n)
	}
	// The re-created rows hold their offerings: not offered again.
	if s := g.search(t); len(s.Offerings) != 0 || s.Hidden != 2 {
		t.Fatalf("after the rebuild the search offers %+v (hidden %d)", s.Offerings, s.Hidden)
	}
	if n := f.fake.Calls("Book"); n != 2 {
		t.Fatalf("%d purchases, want 2", n)
	}
}

// TestRebuildKeepsWhatTheLedgerHas: a ledger that lost some rows gets
// those back and keeps the rest as they are (found by id, by the cloud's
// id, or by the offering).
func TestRebuildKeepsWhatTheLedgerHas(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	kept, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil {
		t.Fatal(err)
	}
	// A purchase of cb-dear the ledger never heard of, tagged by a row id
	// it does not hold; and one tagged with nothing but the tool, known
	// by its reservation id only.
	f.fake.AddRecord(domain.CloudRecord{Kind: ledger.KindBlock, Ref: "01LOSTROW0000000000000000", OfferingID: "cb-dear", ProviderRef: "cr-lost",
		Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", InstanceType: "p5.48xlarge", InstanceCount: 2,
		Start: t0.Add(48 * time.Hour), End: t0.Add(72 * time.Hour), CostUSD: math.NaN(), State: "scheduled", CreatedAt: t0})
	f.fake.AddRecord(domain.CloudRecord{Kind: ledger.KindBlock, ProviderRef: kept.Row.ProviderRef, Provider: "aws", CreatedAt: t0})
	// Records whose state the cloud gives as still being made, or not at
	// all: they exist, so their rows are never "in flight" or "unknown".
	f.fake.AddRecord(domain.CloudRecord{Kind: ledger.KindBlock, Ref: "01PENDINGROW00000000000000", OfferingID: "cb-other", ProviderRef: "cr-pending",
		Provider: "aws", InstanceType: "p5.48xlarge", InstanceCount: 1, Start: t0.Add(96 * time.Hour), End: t0.Add(120 * time.Hour),
		State: ledger.StatePending, CreatedAt: t0})
	f.fake.AddRecord(domain.CloudRecord{Kind: ledger.KindFleet, Ref: "01FLEETROW0000000000000000", ProviderRef: "fleet-x",
		Provider: "aws", InstanceType: "p5.48xlarge", InstanceCount: 1, CreatedAt: t0})
	rep, err := f.svc.Rebuild(ctx)
	if err != nil || len(rep.Created) != 3 || rep.Present != 2 {
		t.Fatalf("rebuild %+v, %v", rep, err)
	}
	for id, want := range map[string]string{"01PENDINGROW00000000000000": ledger.StateScheduled, "01FLEETROW0000000000000000": ledger.StateActive} {
		if r, err := f.st.Get(ctx, id); err != nil || r.State != want {
			t.Errorf("re-created %s: %+v, %v; want %s", id, r, err, want)
		}
	}
	got, err := f.st.Get(ctx, "01LOSTROW0000000000000000")
	if err != nil || got.IdemKey != "cb-dear" || !ledger.CostUnknown(got) || got.GPUCount != 16 {
		t.Fatalf("re-created %+v, %v", got, err)
	}
	if r, _ := f.st.Get(ctx, kept.Row.ID); r.Note != "" || r.State != kept.Row.State {
		t.Fatalf("a row the ledger had was changed: %+v", r)
	}
}

// TestRebuildProviderFailureIsReported: a provider whose records cannot
// be read is named; the others are rebuilt.
func TestRebuildProviderFailureIsReported(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.fake.ListHook = func(context.Context) error { return errors.New("UnauthorizedOperation") }
	rep, err := f.svc.Rebuild(context.Background())
	if err != nil || rep.Failed["aws"] == nil || len(rep.Created) != 0 {
		t.Fatalf("%+v, %v", rep, err)
	}
}
