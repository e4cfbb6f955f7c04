package domain

import (
	"context"
	"time"
)

// UsageReporter is a provider that can say how the capacity it sold or
// launched was used: which instances ran when, how busy they were (from
// the cloud's metrics), and which were interrupted. It only reports what
// the cloud shows; what that means in GPU-hours and dollars is worked out
// in one place above the providers (ledger), for every cloud
// alike.
type UsageReporter interface {
	// Usage reports on one ledger row's capacity over [q.From, q.To]. An
	// error means nothing could be read (not even which instances ran);
	// a report whose instances carry no Busy samples means the
	// instances are known but their metrics are not (Note says why).
	Usage(ctx context.Context, q UsageQuery) (UsageReport, error)
}

// UsageQuery describes one ledger row's capacity to the provider that holds
// it, and the span of time wanted.
type UsageQuery struct {
	// Ref is the ledger row's id (the TagRef value of what it made).
	Ref string
	// Kind is KindBlock, KindReservation or KindFleet.
	Kind string
	// ProviderRef is the cloud's id of the block, reservation or fleet
	// ("cr-…", "fleet-…", an Azure resource id).
	ProviderRef  string
	Region, Zone string
	// InstanceType is the booked type (a fleet's first type);
	// InstanceTypes are all of a fleet's types.
	InstanceType  string
	InstanceTypes []string
	// InstanceCount is what was booked or targeted; OnDemand of a
	// fleet's instances are on-demand, the rest spot.
	InstanceCount int
	OnDemand      int
	// Zones, Strategy and MaxPriceUSD are the rest of a fleet's spec, for
	// a provider that works out from its terms where the fleet's
	// instances went (the simulated market, which keeps no fleet beyond
	// the process that launched it); empty for other rows.
	Zones       []string
	Strategy    string
	MaxPriceUSD *float64
	// Start and End bound the row's capacity (a block's window, a
	// fleet's time running); a zero End means it still runs.
	Start, End time.Time
	// From and To bound the span wanted: what falls outside is left out
	// of the report.
	From, To time.Time
}

// UsageReport is what a cloud shows of how one row's capacity was used.
type UsageReport struct {
	// Instances are the instances that ran in the span, in any order.
	Instances []InstanceUsage
	// Source names the metric the Busy samples come from, as the user
	// should read it ("CloudWatch CWAgent nvidia_smi_utilization_gpu");
	// it says so when the metric is a stand-in for GPU utilization (CPU
	// utilization). "" when no instance has a sample.
	Source string
	// Note says what could not be read, for the user: "CloudWatch:
	// AccessDenied …". "" when nothing is missing.
	Note string
	// InterruptionsUnknown is set when the cloud does not say which
	// instances were interrupted: Interrupted is then always false and
	// means nothing.
	InterruptionsUnknown bool
}

// InstanceUsage is one instance's part of a row's usage.
type InstanceUsage struct {
	// ID is the cloud's instance id ("i-…", a scale set VM name).
	ID           string
	InstanceType string
	Zone         string
	// Spot is set for a spot instance (billed at the spot price in
	// force); otherwise it bills at the list price, or is covered by
	// the block or reservation it runs in.
	Spot bool
	// Start and End bound when it ran; a zero End means it still runs.
	Start, End time.Time
	// Interrupted is set when the cloud took it back (a spot
	// interruption); End is then when.
	Interrupted bool
	// EndLastSeen is set when End is not when the cloud says the
	// instance ended but when gpumarket last saw it running: a later
	// read no longer listed it (EC2 lists a terminated instance for
	// about an hour; Azure forgets a deleted reservation's VMs), so it
	// may have run a little longer. Providers never set it: the usage
	// kept in the ledger does (ledger).
	EndLastSeen bool
	// Busy are its utilization samples, oldest first. A span of its
	// running time that no sample covers is unmeasured, not idle.
	Busy []BusySample
}

// BusySample is the utilization of one instance over one period.
type BusySample struct {
	// At starts the period.
	At     time.Time
	Period time.Duration
	// Share is the busy share of the period, 0 to 1 (the average GPU
	// utilization, or CPU utilization where that stands in for it).
	Share float64
}
