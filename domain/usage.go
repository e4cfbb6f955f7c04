package domain

import (
	"context"
	"time"
)

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
