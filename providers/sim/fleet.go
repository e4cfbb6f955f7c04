package sim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/providers"
)

// MaxFleetTarget caps a simulated fleet's size.
const MaxFleetTarget = 1000

// fleetState is a fleet launched in this process.
type fleetState struct {
	fleet       providers.Fleet
	fingerprint string
	// What the launch's tags and spec said, for ListRecords.
	token, actor, types string
	cloud               providers.Cloud
	at                  time.Time
	// alloc is where the fleet's instances run: pools and counts, spot
	// or on-demand.
	alloc []allocation
	// start and end are the spec's schedule, honoured in memory with the
	// market's clock: nothing runs before start, and everything stops at
	// end (zero: none).
	start, end time.Time
}

type allocation struct {
	pool     *simPool
	count    int
	onDemand bool
}

// fingerprint is what makes two launch requests the same request.
func fingerprint(s providers.FleetSpec) string {
	types := append([]string(nil), s.InstanceTypes...)
	sort.Strings(types)
	zones := append([]string(nil), s.Zones...)
	sort.Strings(zones)
	maxp := "od"
	if s.MaxPriceUSD != nil {
		maxp = fmt.Sprint(*s.MaxPriceUSD)
	}
	return strings.Join([]string{s.Region, strings.Join(types, ","), strings.Join(zones, ","),
		fmt.Sprint(s.TargetCapacity, s.OnDemandBase), s.Strategy, maxp, s.LaunchTemplate}, "|")
}

// validateFleet checks a spec and returns the pools it may use.
func (m *Market) validateFleet(s *providers.FleetSpec) ([]*simPool, error) {
	if s.Provider != "" && s.Provider != Name {
		return nil, fmt.Errorf("fleet for provider %q sent to the simulated market", s.Provider)
	}
	var inRegion []*simPool
	for _, p := range m.pools {
		if p.spec.Region.Name == s.Region {
			inRegion = append(inRegion, p)
		}
	}
	if len(inRegion) == 0 {
		names := make([]string, len(m.regions))
		for i, r := range m.regions {
			names[i] = r.name
		}
		return nil, fmt.Errorf("fleet region %q: the simulated market has %s", s.Region, strings.Join(names, ", "))
	}
	zones := map[string]bool{}
	for _, z := range inRegion[0].spec.Region.Zones {
		zones[z] = true
	}
	for _, z := range s.Zones {
		if !zones[z] {
			return nil, fmt.Errorf("fleet zone %q: %s has zones %s", z, s.Region, strings.Join(inRegion[0].spec.Region.Zones, ", "))
		}
	}
	if len(s.InstanceTypes) == 0 {
		return nil, fmt.Errorf("fleet in %s: give at least one instance type", s.Region)
	}
	sold := map[string]bool{}
	var soldList []string
	for _, p := range inRegion {
		if t := p.spec.Desc.InstanceType; !sold[t] {
			sold[t] = true
			soldList = append(soldList, t)
		}
	}
	want := map[string]bool{}
	for _, t := range s.InstanceTypes {
		if !sold[t] {
			return nil, fmt.Errorf("fleet instance type %q is not sold in %s by the simulated market; it sells %s", t, s.Region, strings.Join(soldList, ", "))
		}
		want[t] = true
	}
	var pools []*simPool
	for _, p := range inRegion {
		if want[p.spec.Desc.InstanceType] && (len(s.Zones) == 0 || slices.Contains(s.Zones, p.spec.Desc.Zone)) {
			pools = append(pools, p)
		}
	}
	if len(pools) == 0 {
		return nil, fmt.Errorf("fleet in %s: none of %s is sold in zones %s", s.Region, strings.Join(s.InstanceTypes, ", "), strings.Join(s.Zones, ", "))
	}
	switch {
	case s.TargetCapacity < 1 || s.TargetCapacity > MaxFleetTarget:
		return nil, fmt.Errorf("fleet target capacity %d: want 1 to %d instances", s.TargetCapacity, MaxFleetTarget)
	case s.OnDemandBase < 0 || s.OnDemandBase > s.TargetCapacity:
		return nil, fmt.Errorf("fleet on-demand base %d: want 0 to the target capacity %d", s.OnDemandBase, s.TargetCapacity)
	case s.MaxPriceUSD != nil && !(*s.MaxPriceUSD > 0):
		return nil, fmt.Errorf("fleet max price %v: want a positive price per instance-hour, or none for the on-demand price", *s.MaxPriceUSD)
	}
	if s.Strategy == "" {
		s.Strategy = providers.Strategies[0]
	}
	if !slices.Contains(providers.Strategies, s.Strategy) {
		return nil, fmt.Errorf("fleet strategy %q: want one of %s", s.Strategy, strings.Join(providers.Strategies, ", "))
	}
	return pools, nil
}

// LaunchFleet launches a fleet in memory. The same ClientToken returns the
// same fleet (a different request under it fails, like EC2's
// IdempotentParameterMismatch); DryRun validates and changes nothing.
// Spot instances go to the pools the strategy picks among those whose
// price at launch is under the max price; the rest stay pending.
//
// A spec's Start and End are honoured in memory with the market's clock:
// the fleet is scheduled until Start, and at End its instances stop and
// it has ended, whoever deletes it and when. (The descriptor does not say
// SchedulesFleets: the market lives in the process that launched the
// fleet, so the booking service keeps the schedule and sends the launch
// at Start; the end is kept here too, so a simulated fleet never runs past
// it.)
func (m *Market) LaunchFleet(ctx context.Context, spec providers.FleetSpec) (providers.Fleet, error) {
	if err := ctx.Err(); err != nil {
		return providers.Fleet{}, fmt.Errorf("sim launch fleet: %w", err)
	}
	pools, err := m.validateFleet(&spec)
	if err != nil {
		return providers.Fleet{}, err
	}
	now := m.opt.Now()
	fp := fingerprint(spec)
	m.mu.Lock()
	defer m.mu.Unlock()
	if spec.ClientToken != "" {
		if id, ok := m.byToken[spec.ClientToken]; ok {
			f := m.fleets[id]
			if f.fingerprint != fp {
				return providers.Fleet{}, fmt.Errorf("sim launch fleet: client token %q was used for a different request (IdempotentParameterMismatch)", spec.ClientToken)
			}
			if spec.DryRun {
				return providers.Fleet{Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, DryRun: true, Message: dryRunMessage}, nil
			}
			return m.viewLocked(f, now), nil
		}
	}
	alloc, pending := allocate(pools, spec, now)
	if !spec.End.IsZero() && !spec.End.After(now) {
		return providers.Fleet{}, fmt.Errorf("sim launch fleet: its end %s has passed", spec.End.UTC().Format(time.RFC3339))
	}
	if spec.DryRun {
		f := &fleetState{fleet: providers.Fleet{Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, DryRun: true, Message: dryRunMessage}, alloc: alloc}
		v := m.viewLocked(f, now)
		v.Instances = 0
		return v, nil
	}
	var id string
	if spec.ClientToken != "" {
		id = fleetID(strHash("fleet", fmt.Sprint(m.opt.Seed), spec.ClientToken))
	} else {
		m.nFleets++
		id = fleetID(strHash("fleet-anon", fmt.Sprint(m.opt.Seed), fmt.Sprint(m.nFleets)))
	}
	f := &fleetState{fingerprint: fp, alloc: alloc, token: spec.ClientToken, actor: spec.Actor, at: now,
		types: strings.Join(spec.InstanceTypes, ","), cloud: pools[0].spec.Desc.Cloud, start: spec.Start, end: spec.End,
		fleet: providers.Fleet{ID: id, Provider: Name, Region: spec.Region, Target: spec.TargetCapacity}}
	f.fleet.State = "active"
	if pending == spec.TargetCapacity {
		f.fleet.State = "pending"
	}
	f.fleet.Message = fmt.Sprintf("simulated fleet %s: %d of %d instances running", id, spec.TargetCapacity-pending, spec.TargetCapacity)
	if pending > 0 {
		f.fleet.Message += fmt.Sprintf("; %d spot instances pending: no pool is under the max price", pending)
	}
	if spec.Start.After(now) {
		f.fleet.Message = fmt.Sprintf("simulated fleet %s of %d instances scheduled from %s", id, spec.TargetCapacity, spec.Start.UTC().Format(time.RFC3339))
	}
	if !spec.End.IsZero() {
		f.fleet.Message += "; it ends at " + spec.End.UTC().Format(time.RFC3339)
	}
	m.fleets[id] = f
	if spec.ClientToken != "" {
		m.byToken[spec.ClientToken] = id
	}
	return m.viewLocked(f, now), nil
}

// fleetID formats an EC2 fleet id: "fleet-" and a UUID.
func fleetID(h uint64) string {
	g := mix(h)
	return fmt.Sprintf("fleet-%08x-%04x-4%03x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h)&0xfff,
		uint16(g>>48)&0x3fff|0x8000, g&0xffffffffffff)
}

// allocate places the fleet's instances: the on-demand base on the type
// with the cheapest list price, the spot rest by strategy among the pools
// whose spot price is under the max price. It returns how many spot
// instances found no pool.
func allocate(pools []*simPool, spec providers.FleetSpec, now time.Time) ([]allocation, int) {
	var alloc []allocation
	if spec.OnDemandBase > 0 {
		best := pools[0]
		for _, p := range pools[1:] {
			if *p.spec.Desc.OnDemandUSDHour < *best.spec.Desc.OnDemandUSDHour {
				best = p
			}
		}
		alloc = append(alloc, allocation{pool: best, count: spec.OnDemandBase, onDemand: true})
	}
	spot := spec.TargetCapacity - spec.OnDemandBase
	if spot == 0 {
		return alloc, 0
	}
	type cand struct {
		p     *simPool
		price float64
	}
	var cands []cand
	t := now.Unix()
	for _, p := range pools {
		_, price := p.model.inForce(t)
		limit := *p.spec.Desc.OnDemandUSDHour
		if spec.MaxPriceUSD != nil {
			limit = *spec.MaxPriceUSD
		}
		if price <= limit {
			cands = append(cands, cand{p, price})
		}
	}
	if len(cands) == 0 {
		return alloc, spot
	}
	perGPU := func(c cand) float64 { return c.price / c.p.spec.Desc.GPU.Count }
	switch spec.Strategy {
	case providers.StrategyLowestPrice:
		sort.SliceStable(cands, func(i, j int) bool { return perGPU(cands[i]) < perGPU(cands[j]) })
	case providers.StrategyCapacityOptimized:
		sort.SliceStable(cands, func(i, j int) bool {
			a, b := cands[i].p.spec, cands[j].p.spec
			if a.Bucket != b.Bucket {
				return a.Bucket < b.Bucket
			}
			return a.Placement > b.Placement
		})
	case providers.StrategyDiversified:
		n := len(cands)
		for i, c := range cands {
			k := spot / n
			if i < spot%n {
				k++
			}
			if k > 0 {
				alloc = append(alloc, allocation{pool: c.p, count: k})
			}
		}
		return alloc, 0
	default: // price-capacity-optimized: cheap, but not at any risk
		w := func(c cand) float64 { return perGPU(c) * (1 + 0.25*float64(c.p.spec.Bucket)) }
		sort.SliceStable(cands, func(i, j int) bool { return w(cands[i]) < w(cands[j]) })
	}
	return append(alloc, allocation{pool: cands[0].p, count: spot}), 0
}

// viewLocked returns the fleet as it stands at now, its cost at the spot
// prices in force.
func (m *Market) viewLocked(f *fleetState, now time.Time) providers.Fleet {
	v := f.fleet
	switch {
	case v.State == "deleted":
		v.Instances, v.EstimatedUSDh = 0, 0
		return v
	case !f.end.IsZero() && !now.Before(f.end):
		v.State, v.Instances, v.EstimatedUSDh = "ended", 0, 0
		return v
	case f.start.After(now):
		v.State, v.Instances, v.EstimatedUSDh = "scheduled", 0, 0
		return v
	}
	v.Instances, v.EstimatedUSDh = 0, 0
	t := now.Unix()
	for _, a := range f.alloc {
		price := *a.pool.spec.Desc.OnDemandUSDHour
		if !a.onDemand {
			_, price = a.pool.model.inForce(t)
		}
		v.Instances += a.count
		v.EstimatedUSDh += float64(a.count) * price
	}
	v.EstimatedUSDh = math.Round(v.EstimatedUSDh*1e4) / 1e4
	return v
}

// DescribeFleet returns a fleet's state and its cost per hour now.
func (m *Market) DescribeFleet(ctx context.Context, region, id string) (providers.Fleet, error) {
	if err := ctx.Err(); err != nil {
		return providers.Fleet{}, fmt.Errorf("sim describe fleet %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, err := m.fleetLocked(region, id)
	if err != nil {
		return providers.Fleet{}, err
	}
	return m.viewLocked(f, m.opt.Now()), nil
}

// DeleteFleet terminates a fleet's instances. Deleting a deleted fleet is
// not an error.
func (m *Market) DeleteFleet(ctx context.Context, region, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sim delete fleet %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, err := m.fleetLocked(region, id)
	if err != nil {
		return err
	}
	f.fleet.State = "deleted"
	f.fleet.Message = fmt.Sprintf("simulated fleet %s deleted; its instances are terminated", id)
	return nil
}

// FindFleet finds the fleet this process's market launched with a client
// token, so a launch whose answer was lost is settled rather than sent
// again; nil, nil when it launched none.
func (m *Market) FindFleet(ctx context.Context, region, clientToken string) (*providers.Fleet, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim find fleet %s: %w", clientToken, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.byToken[clientToken]
	if !ok {
		return nil, nil
	}
	f, err := m.fleetLocked(region, id)
	if err != nil {
		return nil, nil
	}
	v := m.viewLocked(f, m.opt.Now())
	return &v, nil
}

var _ providers.FleetFinder = (*Market)(nil)

func (m *Market) fleetLocked(region, id string) (*fleetState, error) {
	f, ok := m.fleets[id]
	if !ok || (region != "" && f.fleet.Region != region) {
		return nil, fmt.Errorf("sim fleet %s not found in region %s (the simulated market keeps fleets only while it runs)", id, region)
	}
	return f, nil
}
