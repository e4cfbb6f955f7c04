package domain

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/series"
)

// Provider is a source of market data; the hub calls Fetch from one goroutine at a time.
type Provider interface {
	Name() string
	Describe() Descriptor
	// Fetch sends sink req's pools and prices, a region's error as an Event; its error fails all.
	Fetch(ctx context.Context, req FetchRequest, sink Sink) error
}

// FetchRequest is one poll of a provider.
type FetchRequest struct {
	Query        Query
	Since, Until time.Time // a back-fill asks for the window, a poll from its last
	Backfill     bool      // report progress; describe every pool
	Aside        bool      // for another caller than the hub; it carries no Missed
	// Missed is what each region's failed fetches missed, set by the hub: widen with Missed[region].Widen.
	Missed map[string]Gap
}

// Sink receives events; it is safe for concurrent use and keeps no slice it is given.
type Sink func(Event)

// Event is one piece of news from a provider. Any of its parts may be set.
type Event struct {
	Provider  string
	Region    string        // "" for the whole provider
	Pools     []Pool        // new or changed descriptions; every pool in a back-fill
	Points    []PricePoint  // in any order
	Histories []PoolHistory // a Series per pool, which may be kept; see PricePoints
	Progress  *Progress     // of Region's back-fill
	Err       error         // Region's failure: its earlier data stays, the span is asked again
	Soft      bool          // Err lost none of Region's history: shown, not asked again
	Note      string        // a short status for the header
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

// PricePoints yields the event's Points, then its Histories' points.
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

// OfferingFinder is a provider that sells capacity for a fixed window.
type OfferingFinder interface {
	FindOfferings(ctx context.Context, q OfferingQuery) ([]Offering, error)
}

// Booker buys offerings; a purchase has no idempotency token, so FindBooking settles a lost answer.
type Booker interface {
	Book(ctx context.Context, req BookRequest) (Booking, error)
	// FindBooking finds what req may have bought, made after req.After; nil, nil if none.
	FindBooking(ctx context.Context, req BookRequest) (*Booking, error)
}

// FleetLauncher launches and deletes spot fleets.
type FleetLauncher interface {
	LaunchFleet(ctx context.Context, spec FleetSpec) (Fleet, error)
	DeleteFleet(ctx context.Context, region, id string) error
	DescribeFleet(ctx context.Context, region, id string) (Fleet, error)
}

// Gap is the history a region's failed fetches missed; the hub asks for it again with the next fetch.
type Gap struct{ From, Until time.Time }

// Widen returns req widened over the gap, as a back-fill.
func (g Gap) Widen(req FetchRequest) FetchRequest {
	if g.From.IsZero() {
		return req
	}
	req.Since, req.Until = Earlier(g.From, req.Since), Later(g.Until, req.Until)
	req.Backfill = true
	return req
}

// After is the gap once req has been fetched: none, or the old gap and req's span.
func (g Gap) After(req FetchRequest, failed bool) Gap {
	if !failed {
		return Gap{}
	}
	if g.From.IsZero() || req.Since.Before(g.From) {
		g.From = req.Since
	}
	g.Until = Later(req.Until, g.Until)
	return g
}

// OrDefault sets an option left at zero (or below) to its default.
func OrDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Latest is what one back-fill says of now, for a caller outside the live feed.
type Latest struct {
	Pools  []Pool                 // as described, in the order they came
	Prices map[PoolKey]PricePoint // each pool's price in force: its latest point, the dearer of a tie
	Errs   []Event                // events that carried a region's error
}

// ReadLatest back-fills q over the window before now, aside from the hub's
// coverage; its error is Fetch's, a region's failure is in Errs.
func ReadLatest(ctx context.Context, p Provider, q Query, now time.Time, window time.Duration) (Latest, error) {
	l := Latest{Prices: map[PoolKey]PricePoint{}}
	// The sink runs on several goroutines and may not keep an event's slices.
	var mu sync.Mutex
	err := p.Fetch(ctx, FetchRequest{
		Query: q, Since: now.Add(-window), Until: now,
		// Providers describe pools (and their on-demand prices) only in a back-fill.
		Backfill: true, Aside: true,
	}, func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Err != nil {
			l.Errs = append(l.Errs, Event{Provider: ev.Provider, Region: ev.Region, Err: ev.Err})
		}
		l.Pools = append(l.Pools, ev.Pools...)
		for pt := range ev.PricePoints() {
			v, ok := l.Prices[pt.Pool]
			if !ok || pt.At.After(v.At) || (pt.At.Equal(v.At) && pt.USDHour > v.USDHour) {
				l.Prices[pt.Pool] = pt
			}
		}
	})
	return l, err
}

// Failed reports whether region, or the whole provider, failed.
func (l Latest) Failed(region string) bool {
	for _, ev := range l.Errs {
		if ev.Region == "" || ev.Region == region {
			return true
		}
	}
	return false
}

// UsageReporter reports how a row's instances ran; it errs only when it can read nothing.
type UsageReporter interface {
	Usage(ctx context.Context, q UsageQuery) (UsageReport, error)
}

// FleetUsage is one of the user's fleets, where it ran and its kept usage.
type FleetUsage struct {
	Provider, Region, Zone, InstanceType string
	Report                               UsageReport
}

// UsageQuery asks about one ledger row's capacity over a span.
type UsageQuery struct {
	Ref           string // the ledger row's id (TagRef)
	Kind          string
	ProviderRef   string // "cr-…", "fleet-…", an Azure resource id
	Region, Zone  string
	InstanceType  string // a fleet's first type
	InstanceTypes []string
	InstanceCount int      // booked or targeted
	OnDemand      int      // of them on-demand, the rest spot
	Zones         []string // the rest of a fleet's spec, for sim
	Strategy      string
	MaxPriceUSD   *float64
	Start, End    time.Time // the row's capacity; zero End: still runs
	From, To      time.Time // the span wanted
}

// UsageReport is what a cloud shows of how one row's capacity was used.
type UsageReport struct {
	Instances            []InstanceUsage // in any order
	Source               string          // Busy's metric, as the user should read it
	Note                 string          // what could not be read, for the user
	InterruptionsUnknown bool            // Interrupted then means nothing
}

// CPUStandIn is a report's Source when the CPU metric stands in for a GPU
// one, saying why ("" for no reason given).
func CPUStandIn(cpu, why string) string {
	if why == "" {
		return cpu + " (CPU as a stand-in)"
	}
	return cpu + " (CPU as a stand-in: " + why + ")"
}

// InstanceUsage is one instance's part of a row's usage.
type InstanceUsage struct {
	ID           string // "i-…", a scale set VM name
	InstanceType string
	Zone         string
	Spot         bool         // billed at the spot price in force
	Start, End   time.Time    // zero End: still runs
	Interrupted  bool         // taken back by the cloud at End
	EndLastSeen  bool         // End is when the ledger last saw it run
	Busy         []BusySample // oldest first; time no sample covers is unmeasured
}

// BusySample is the utilization of one instance over one period.
type BusySample struct {
	At     time.Time // the period's start
	Period time.Duration
	Share  float64 // 0 to 1, GPU (or stand-in CPU) utilization
}
