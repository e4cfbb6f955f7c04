package domain

import (
	"context"
	"iter"
	"time"

	"github.com/gpumarket/gpumarket/series"
)

// Provider is a source of market data: the simulated market, AWS or Azure.
// The hub calls Fetch from one goroutine per provider, never two at once:
// first to back-fill the window, then every refresh interval for what
// changed since the previous call.
type Provider interface {
	// Name is the provider's name as users write it: "sim", "aws", "azure".
	Name() string
	// Describe says what the provider is and can do (simulated or not,
	// its regions, the terms it sells on, how it says no): the layers
	// above ask it instead of comparing names.
	Describe() Descriptor
	// Fetch reports the pools matching q and their prices observed in
	// [req.Since, req.Until] through sink, in as many events as suit the
	// source (one per page, say), and returns when done. An error for one
	// region goes to sink as an Event with Err set and the fetch goes on
	// with the others; the returned error means the whole fetch failed.
	Fetch(ctx context.Context, req FetchRequest, sink Sink) error
}

// FetchRequest is one poll of a provider.
type FetchRequest struct {
	Query Query
	// Since and Until bound the prices wanted. A back-fill asks for the
	// whole window; a live poll asks from the last time it saw.
	Since, Until time.Time
	// Backfill is true for the first fetch of a window (or of its
	// extension to the past): the provider reports progress as it goes,
	// and describes every pool it reports, whatever it sent before — the
	// asker may know none (a fleet's estimate in a process whose hub has
	// fetched for hours).
	Backfill bool
	// Aside marks a fetch made for a caller other than the hub (a fleet's
	// estimate, a check of the types a region sells): the provider neither
	// widens it over what a region's failed fetches missed nor counts it
	// as catching up, so that span is still asked for by the hub's next
	// fetch, whose history the hub keeps.
	Aside bool
}

// Sink receives a provider's events. It is safe to call from several
// goroutines at once and does not keep the slices it is given.
type Sink func(Event)

// Event is one piece of news from a provider. Any of its parts may be set.
type Event struct {
	Provider string
	// Region the event is about; "" for the provider as a whole.
	Region string
	// Pools are new or changed pool descriptions (interruption data,
	// on-demand price, placement score), and in a back-fill every pool
	// it reports. A pool is known once described.
	Pools []Pool
	// Points are price observations, in any order.
	Points []PricePoint
	// Histories are price observations too, a whole Series per pool: how a
	// provider sends a long back-fill (90 days of the simulated market
	// are millions of points) without a PricePoint's 96 bytes, pool key
	// and time.Time a point, with the compact series built where the
	// points are made. Unlike the event's slices, a Series may be kept:
	// once made it never changes. Read both Points and Histories, or
	// PricePoints.
	Histories []PoolHistory
	// Progress, when set, is the back-fill progress of Region.
	Progress *Progress
	// Err is a failure of Region (or of the provider when Region is "").
	// The region's earlier data stays; the UI marks it stale.
	Err error
	// Note is a short status for the header, such as "advisor data from
	// 2025-06 (embedded)".
	Note string
}

// PricePoint is one observed spot price of a pool.
type PricePoint struct {
	Pool    PoolKey
	At      time.Time
	USDHour float64
}

// PoolHistory is a pool's price observations as one Series.
type PoolHistory struct {
	Pool    PoolKey
	History series.Series
}

// PricePoints yields every price observation of the event: its Points,
// then each of its Histories' points.
func (ev Event) PricePoints() iter.Seq[PricePoint] {
	return func(yield func(PricePoint) bool) {
		for _, pt := range ev.Points {
			if !yield(pt) {
				return
			}
		}
		for _, h := range ev.Histories {
			for at, usd := range h.History.All() {
				if !yield(PricePoint{Pool: h.Pool, At: time.Unix(at, 0).UTC(), USDHour: usd}) {
					return
				}
			}
		}
	}
}

// Progress counts the units of work of a back-fill (pages, instance types).
type Progress struct {
	Done, Total int
}

// OfferingFinder is a provider that sells capacity blocks (or reservations)
// for a fixed window.
type OfferingFinder interface {
	FindOfferings(ctx context.Context, q OfferingQuery) ([]Offering, error)
}

// Booker buys an offering. PurchaseCapacityBlock has no idempotency token,
// so a purchase whose answer was lost is never retried blindly: the caller
// asks FindBooking first.
type Booker interface {
	// Book buys the offering. With req.DryRun it only asks the cloud
	// whether the purchase would succeed and returns a Booking whose
	// DryRun is true.
	Book(ctx context.Context, req BookRequest) (Booking, error)
	// FindBooking looks for a reservation that a request may have made
	// (same type, zone, count and dates, created after req.After). It
	// returns nil, nil when there is none.
	FindBooking(ctx context.Context, req BookRequest) (*Booking, error)
}

// FleetLauncher launches and deletes spot fleets.
type FleetLauncher interface {
	LaunchFleet(ctx context.Context, spec FleetSpec) (Fleet, error)
	DeleteFleet(ctx context.Context, region, id string) error
	// DescribeFleet returns the fleet's current state.
	DescribeFleet(ctx context.Context, region, id string) (Fleet, error)
}

// Gap is the span of history that a region's failed fetches did not get.
// The hub moves on to live polls as soon as any region of a provider
// answers, so a provider that fetches regions one by one keeps a Gap per
// region and asks for it again with the region's next fetch. The zero Gap
// is "nothing missing".
type Gap struct{ From, Until time.Time }

// Widen returns req widened over the gap. The catch-up is a back-fill for
// the region (it reports progress and fetches what a back-fill does).
func (g Gap) Widen(req FetchRequest) FetchRequest {
	if g.From.IsZero() {
		return req
	}
	if g.From.Before(req.Since) {
		req.Since = g.From
	}
	if g.Until.After(req.Until) {
		req.Until = g.Until
	}
	req.Backfill = true
	return req
}

// After is the gap once a fetch of req (widened by Widen) has ended: none
// when it succeeded, else the old gap and req's span together.
func (g Gap) After(req FetchRequest, failed bool) Gap {
	if !failed {
		return Gap{}
	}
	if g.From.IsZero() || req.Since.Before(g.From) {
		g.From = req.Since
	}
	if req.Until.After(g.Until) {
		g.Until = req.Until
	}
	return g
}
