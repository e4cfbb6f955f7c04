// Package ledgertest is a fake provider that sells capacity blocks and
// launches fleets in memory, counting every call, for tests of the
// booking service, the commands and the TUI views.
//
// It behaves as the clouds do where the happy path hides it: it keeps
// offering what it sold (as the simulated market of another process, or
// a cloud whose search lags its sales, does — the ledger must hide it),
// it re-describes an offering on the terms it sells it on now (Reprice,
// Withdraw), and it lists what it sold and launched with the tags each
// call carried (ListRecords), as AWS's DescribeCapacityReservations and
// DescribeFleets do with a tag filter.
package ledgertest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// Fake is a provider with every booking ability. Its zero value is not
// usable: build it with New.
type Fake struct {
	name string

	mu        sync.Mutex
	offerings []domain.Offering
	bought    map[string]domain.Booking // by offering id
	fleets    map[string]domain.Fleet   // by fleet id
	tokens    map[string]string         // client token → fleet id
	// now is what the cloud sells each offering at now, by id, once
	// repriced; gone holds the ids withdrawn from sale.
	now  map[string]domain.Offering
	gone map[string]bool
	// records are the tags of each purchase and launch, as the cloud
	// keeps them.
	records []domain.CloudRecord

	// Calls counts calls by method; "Book" counts real purchases only,
	// "BookDryRun" the dry runs.
	calls map[string]int

	// BookHook, when set, runs inside Book before it answers. Returning
	// an error makes Book return it; the purchase is recorded first when
	// BuyThenFail is true (the answer was lost after the cloud bought).
	BookHook    func(ctx context.Context, req domain.BookRequest) error
	BuyThenFail bool
	// LaunchHook is BookHook for LaunchFleet; the fleet is launched first
	// when LaunchThenFail is true (its answer was lost).
	LaunchHook func(ctx context.Context, spec domain.FleetSpec) error
	// LaunchNothing, when set, is the message of a fleet the cloud took
	// but launched no instance of (state failed), as an EC2 instant fleet
	// that found no spot capacity answers.
	LaunchNothing  string
	LaunchThenFail bool
	// DeleteHook, when set, runs inside DeleteFleet; its error is
	// DeleteFleet's, and the fleet is left as it was.
	DeleteHook func(ctx context.Context, id string) error
	// launched are the specs of the fleets launched, in order.
	launched []domain.FleetSpec
	// RefreshHook, when set, runs inside RefreshOffering; its error is
	// RefreshOffering's.
	RefreshHook func(ctx context.Context, o domain.Offering) error
	// ListHook, when set, runs inside ListRecords; its error is
	// ListRecords's.
	ListHook func(ctx context.Context) error
	// BookState and BookMessage, when set, are the state and message of
	// what Book answers: "failed" with the cloud's reason is how a
	// provider reports a purchase the cloud took and then refused
	// (AWS's payment-failed).
	BookState, BookMessage string
	// SpotUSDHour is the spot price Fetch reports for every fleet type.
	SpotUSDHour float64
	// Desc is what Describe answers. New names it and says it sells
	// capacity blocks; a test that needs a simulated provider, or one
	// that reads a cloud's error codes, sets the rest.
	Desc domain.Descriptor
}

// New returns a fake provider named name that sells the offerings.
func New(name string, offerings ...domain.Offering) *Fake {
	return &Fake{name: name, offerings: offerings, bought: map[string]domain.Booking{},
		fleets: map[string]domain.Fleet{}, tokens: map[string]string{}, calls: map[string]int{},
		now: map[string]domain.Offering{}, gone: map[string]bool{},
		Desc: domain.Descriptor{Name: name, Sells: []*domain.BookingTerms{domain.CapacityBlockTerms, domain.ReservationTerms}}}
}

// Offering returns a plausible H100 block offering for tests.
func Offering(provider, id string, start time.Time, hours int, instances int, upfront float64) domain.Offering {
	return domain.Offering{ID: id, Provider: provider, Cloud: domain.CloudAWS, Region: "us-east-1", Zone: "us-east-1a",
		InstanceType: "p5.48xlarge", GPU: domain.GPUSpec{Model: "H100", Count: 8, MemoryGiB: 80}, InstanceCount: instances,
		Start: start, End: start.Add(time.Duration(hours) * time.Hour), UpfrontUSD: upfront, Currency: "USD"}
}

// Name is the provider's name.
func (f *Fake) Name() string { return f.name }

// Describe returns f.Desc.
func (f *Fake) Describe() domain.Descriptor { return f.Desc }

// Simulated makes f describe itself as the simulated market does: made
// up, kept in memory, every error of its a definite "no", and every
// offering of its marked simulated.
func (f *Fake) Simulated() *Fake {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Desc.Simulated, f.Desc.Ephemeral = true, true
	f.Desc.Declined = func(error) bool { return true }
	for i := range f.offerings {
		f.offerings[i].Simulated = true
	}
	return f
}

// Calls returns how many times method was called.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// Fleets counts the fleets launched (a repeated client token launches
// none).
func (f *Fake) Fleets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fleets)
}

// Bought reports whether the offering was bought.
func (f *Fake) Bought(offeringID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.bought[offeringID]
	return ok
}

func (f *Fake) count(m string) {
	f.mu.Lock()
	f.calls[m]++
	f.mu.Unlock()
}

// Fetch reports one pool per fleet instance type it is asked about, with
// SpotUSDHour, so fleet estimates have a price.
func (f *Fake) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	f.count("Fetch")
	if f.SpotUSDHour <= 0 {
		return nil
	}
	for _, t := range []string{"p5.48xlarge", "p4d.24xlarge"} {
		e, _ := domain.LookupGPU(t)
		region := "us-east-1"
		if len(req.Query.Regions) > 0 {
			region = req.Query.Regions[0]
		}
		key := domain.PoolKey{Provider: f.name, Region: region, Zone: region + "a", InstanceType: t}
		sink(domain.Event{Provider: f.name, Region: region,
			Pools:  []domain.Pool{{Provider: f.name, Cloud: domain.CloudAWS, Region: region, Zone: key.Zone, InstanceType: t, GPU: e.GPU, OnDemandUSDHour: domain.Float(f.SpotUSDHour * 3)}},
			Points: []domain.PricePoint{{Pool: key, At: req.Until, USDHour: f.SpotUSDHour}}})
	}
	return nil
}

// FindOfferings returns the offerings that match the GPU, on the terms it
// sells them at now, sold or not: a search that lags the sales (or the
// simulated market of another process) offers what was bought, and the
// ledger must hide it. Withdrawn offerings are not offered.
func (f *Fake) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	f.count("FindOfferings")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.Offering
	for _, o := range f.offerings {
		if f.gone[o.ID] {
			continue
		}
		if q.GPU != "" && q.GPU != o.GPU.Model {
			continue
		}
		if n, ok := f.now[o.ID]; ok {
			o = n
		}
		out = append(out, o)
	}
	return out, nil
}

// Reprice changes the terms the cloud sells an offering on from now on:
// the next RefreshOffering (and search) answers them.
func (f *Fake) Reprice(id string, change func(*domain.Offering)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range f.offerings {
		if o.ID != id {
			continue
		}
		if n, ok := f.now[id]; ok {
			o = n
		}
		change(&o)
		f.now[id] = o
	}
}

// Withdraw takes an offering off sale: RefreshOffering answers
// ErrOfferingGone.
func (f *Fake) Withdraw(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone[id] = true
}

// RefreshOffering describes the offering as the cloud sells it now.
func (f *Fake) RefreshOffering(ctx context.Context, o domain.Offering) (domain.Offering, error) {
	f.count("RefreshOffering")
	if f.RefreshHook != nil {
		if err := f.RefreshHook(ctx, o); err != nil {
			return domain.Offering{}, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone[o.ID] {
		return domain.Offering{}, fmt.Errorf("offering %s: %w", o.ID, domain.ErrOfferingGone)
	}
	if n, ok := f.now[o.ID]; ok {
		return n, nil
	}
	for _, known := range f.offerings {
		if known.ID == o.ID {
			return known, nil
		}
	}
	return domain.Offering{}, fmt.Errorf("offering %s: %w", o.ID, domain.ErrOfferingGone)
}

// ListRecords lists what the fake sold and launched since, with the tags
// each call carried.
func (f *Fake) ListRecords(ctx context.Context, since time.Time) ([]domain.CloudRecord, error) {
	f.count("ListRecords")
	if f.ListHook != nil {
		if err := f.ListHook(ctx); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []domain.CloudRecord
	for _, r := range f.records {
		if !r.CreatedAt.Before(since) {
			out = append(out, r)
		}
	}
	return out, nil
}

// AddRecord makes the cloud show a record, as if a purchase or launch
// with these tags had been made (by a process whose ledger was lost).
func (f *Fake) AddRecord(r domain.CloudRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = append(f.records, r)
}

// Book buys (or with DryRun, checks) an offering.
func (f *Fake) Book(ctx context.Context, req domain.BookRequest) (domain.Booking, error) {
	if req.DryRun {
		f.count("BookDryRun")
		return domain.Booking{Provider: f.name, DryRun: true, Message: "Request would have succeeded, but DryRun flag is set."}, nil
	}
	f.count("Book")
	o := req.Offering
	bk := domain.Booking{ProviderRef: fmt.Sprintf("cr-%s", o.ID), Provider: f.name, Region: o.Region, Zone: o.Zone,
		InstanceType: o.InstanceType, InstanceCount: o.InstanceCount, Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, State: "scheduled"}
	if f.BookState != "" {
		bk.State, bk.Message = f.BookState, f.BookMessage
	}
	if f.BookHook != nil {
		if f.BuyThenFail {
			f.buy(o, bk, req)
		}
		if err := f.BookHook(ctx, req); err != nil {
			return domain.Booking{}, err
		}
	}
	f.buy(o, bk, req)
	return bk, nil
}

func (f *Fake) buy(o domain.Offering, bk domain.Booking, req domain.BookRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.bought[o.ID]; ok {
		return
	}
	f.bought[o.ID] = bk
	kind := o.Terms().Kind
	f.records = append(f.records, domain.CloudRecord{Kind: kind, Ref: req.Ref, Actor: req.Actor, OfferingID: o.ID,
		ProviderRef: bk.ProviderRef, Provider: f.name, Cloud: o.Cloud, Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		InstanceCount: o.InstanceCount, Start: o.Start, End: o.End, CostUSD: o.UpfrontUSD, State: bk.State, CreatedAt: req.After})
}

// FindBooking finds a purchase of the offering.
func (f *Fake) FindBooking(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	f.count("FindBooking")
	f.mu.Lock()
	defer f.mu.Unlock()
	if bk, ok := f.bought[req.Offering.ID]; ok {
		return &bk, nil
	}
	return nil, nil
}

// LaunchFleet launches a fleet; the same client token returns the same
// fleet, as CreateFleet does.
func (f *Fake) LaunchFleet(ctx context.Context, spec domain.FleetSpec) (domain.Fleet, error) {
	if spec.DryRun {
		f.count("LaunchFleetDryRun")
		return domain.Fleet{Provider: f.name, Region: spec.Region, DryRun: true, Message: "Request would have succeeded, but DryRun flag is set."}, nil
	}
	f.count("LaunchFleet")
	if f.LaunchHook != nil && !f.LaunchThenFail {
		if err := f.LaunchHook(ctx, spec); err != nil {
			return domain.Fleet{}, err
		}
	}
	fl := f.launch(spec)
	if f.LaunchHook != nil && f.LaunchThenFail {
		if err := f.LaunchHook(ctx, spec); err != nil {
			return domain.Fleet{}, err
		}
	}
	return fl, nil
}

func (f *Fake) launch(spec domain.FleetSpec) domain.Fleet {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.tokens[spec.ClientToken]; ok {
		return f.fleets[id]
	}
	f.launched = append(f.launched, spec)
	id := fmt.Sprintf("fleet-%04d", len(f.fleets)+1)
	fl := domain.Fleet{ID: id, Provider: f.name, Region: spec.Region, State: "active", Instances: spec.TargetCapacity, Target: spec.TargetCapacity}
	if f.LaunchNothing != "" {
		fl.State, fl.Instances, fl.Message = "failed", 0, f.LaunchNothing
	}
	f.fleets[id] = fl
	f.tokens[spec.ClientToken] = id
	types := ""
	if len(spec.InstanceTypes) > 0 {
		types = spec.InstanceTypes[0]
	}
	f.records = append(f.records, domain.CloudRecord{Kind: domain.KindFleet, Ref: spec.ClientToken, Actor: spec.Actor,
		ProviderRef: id, Provider: f.name, Cloud: domain.CloudAWS, Region: spec.Region, InstanceType: types,
		InstanceCount: spec.TargetCapacity, CostUSD: math.NaN(), State: "active"})
	return fl
}

// Launched returns the specs of the fleets launched (not dry runs), in
// order.
func (f *Fake) Launched() []domain.FleetSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]domain.FleetSpec(nil), f.launched...)
}

// DeleteFleet deletes a fleet.
func (f *Fake) DeleteFleet(ctx context.Context, region, id string) error {
	f.count("DeleteFleet")
	if f.DeleteHook != nil {
		if err := f.DeleteHook(ctx, id); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.fleets[id]
	if !ok {
		return fmt.Errorf("fleet %s: %w", id, domain.ErrDeclined)
	}
	fl.State, fl.Instances = "deleted", 0
	f.fleets[id] = fl
	return nil
}

// DescribeFleet returns a fleet's state.
func (f *Fake) DescribeFleet(ctx context.Context, region, id string) (domain.Fleet, error) {
	f.count("DescribeFleet")
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.fleets[id]
	if !ok {
		return fl, fmt.Errorf("fleet %s not found", id)
	}
	return fl, nil
}

// FindFleet finds a fleet by client token.
func (f *Fake) FindFleet(ctx context.Context, region, token string) (*domain.Fleet, error) {
	f.count("FindFleet")
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.tokens[token]; ok {
		fl := f.fleets[id]
		return &fl, nil
	}
	return nil, nil
}

// Interrupt takes the fleet's instances back down to running, as a
// cloud reclaiming spot capacity does.
func (f *Fake) Interrupt(id string, running int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.fleets[id]
	fl.Instances = min(fl.Instances, running)
	f.fleets[id] = fl
}

// Active returns the ids of the fleets not deleted.
func (f *Fake) Active() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, fl := range f.fleets {
		if fl.State != "deleted" {
			out = append(out, id)
		}
	}
	return out
}
