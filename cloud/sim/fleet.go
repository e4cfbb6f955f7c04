package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// MaxFleetTarget caps a simulated fleet's size.
const MaxFleetTarget = 1000

type fleetState struct {
	fleet               domain.Fleet
	fingerprint         string
	token, actor, types string
	cloud               domain.Cloud
	at                  time.Time
	placement
	// The spec's schedule on the market's clock; zero end: none.
	start, end time.Time
}

type allocation struct {
	pool     *simPool
	count    int
	onDemand bool
}

// fingerprint is what makes two launch requests the same request.
func fingerprint(s domain.FleetSpec) string {
	types, zones := slices.Sorted(slices.Values(s.InstanceTypes)), slices.Sorted(slices.Values(s.Zones))
	maxp := "od"
	if s.MaxPriceUSD != nil {
		maxp = fmt.Sprint(*s.MaxPriceUSD)
	}
	return strings.Join([]string{s.Region, strings.Join(types, ","), strings.Join(zones, ","),
		fmt.Sprint(s.TargetCapacity, s.OnDemandBase), s.Strategy, maxp, s.LaunchTemplate}, "|")
}

func (m *Market) validateFleet(s *domain.FleetSpec) ([]*simPool, error) {
	if s.Provider != "" && s.Provider != Name {
		return nil, fmt.Errorf("fleet for provider %q sent to the simulated market", s.Provider)
	}
	ri := slices.IndexFunc(m.regions, func(r regionPools) bool { return r.name == s.Region })
	if ri < 0 {
		names := make([]string, len(m.regions))
		for i, r := range m.regions {
			names[i] = r.name
		}
		return nil, fmt.Errorf("fleet region %q: the simulated market has %s", s.Region, strings.Join(names, ", "))
	}
	inRegion := slices.Concat(m.regions[ri].families...) // the market's order: families are runs of it
	for _, z := range s.Zones {
		if !slices.Contains(inRegion[0].spec.Region.Zones, z) {
			return nil, fmt.Errorf("fleet zone %q: %s has zones %s", z, s.Region, strings.Join(inRegion[0].spec.Region.Zones, ", "))
		}
	}
	if len(s.InstanceTypes) == 0 {
		return nil, fmt.Errorf("fleet in %s: give at least one instance type", s.Region)
	}
	var sold []string
	for _, p := range inRegion {
		if t := p.spec.Desc.InstanceType; !slices.Contains(sold, t) {
			sold = append(sold, t)
		}
	}
	for _, t := range s.InstanceTypes {
		if !slices.Contains(sold, t) {
			return nil, fmt.Errorf("fleet instance type %q is not sold in %s by the simulated market; it sells %s", t, s.Region, strings.Join(sold, ", "))
		}
	}
	var pools []*simPool
	for _, p := range inRegion {
		if slices.Contains(s.InstanceTypes, p.spec.Desc.InstanceType) && (len(s.Zones) == 0 || slices.Contains(s.Zones, p.spec.Desc.Zone)) {
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
	if err := checkGCPFleet(inRegion[0].spec.Desc.Cloud, s); err != nil {
		return nil, err
	}
	if s.Strategy == "" {
		s.Strategy = domain.Strategies[0]
	}
	if !slices.Contains(domain.Strategies, s.Strategy) {
		return nil, fmt.Errorf("fleet strategy %q: want one of %s", s.Strategy, strings.Join(domain.Strategies, ", "))
	}
	return pools, nil
}

// LaunchFleet launches a fleet in memory as EC2 launches an instant fleet
// (m.place); the same ClientToken returns the same fleet, DryRun changes
// nothing. Start and End are kept on the market's clock: the descriptor says no
// SchedulesFleets, so the booking service sends the launch at Start.
func (m *Market) LaunchFleet(ctx context.Context, spec domain.FleetSpec) (domain.Fleet, error) {
	if err := ctx.Err(); err != nil {
		return domain.Fleet{}, fmt.Errorf("sim launch fleet: %w", err)
	}
	pools, err := m.validateFleet(&spec)
	if err != nil {
		return domain.Fleet{}, err
	}
	now := m.opt.Now()
	fp := fingerprint(spec)
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.byToken[spec.ClientToken]; ok {
		f := m.fleets[id]
		if f.fingerprint != fp {
			return domain.Fleet{}, fmt.Errorf("sim launch fleet: client token %q was used for a different request (IdempotentParameterMismatch)", spec.ClientToken)
		}
		if !spec.DryRun {
			return m.viewLocked(f, now), nil
		}
	} else if !spec.End.IsZero() && !spec.End.After(now) {
		return domain.Fleet{}, fmt.Errorf("sim launch fleet: its end %s has passed", spec.End.UTC().Format(time.RFC3339))
	}
	if spec.DryRun {
		// Like EC2's DryRunOperation: capacity is not looked at.
		return domain.Fleet{Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, DryRun: true, Message: dryRunMessage}, nil
	}
	pl := m.place(pools, spec, domain.Later(spec.Start, now).Unix())
	var id string
	if spec.ClientToken != "" {
		id = fleetID(strHash("fleet", fmt.Sprint(m.opt.Seed), spec.ClientToken), pl.placedAt)
	} else {
		m.nFleets++
		id = fleetID(strHash("fleet-anon", fmt.Sprint(m.opt.Seed), fmt.Sprint(m.nFleets)), pl.placedAt)
	}
	f := &fleetState{fingerprint: fp, placement: pl, token: spec.ClientToken, actor: spec.Actor, at: now,
		types: strings.Join(spec.InstanceTypes, ","), cloud: pools[0].spec.Desc.Cloud, start: spec.Start, end: spec.End,
		fleet: domain.Fleet{ID: id, Provider: Name, Region: spec.Region, Target: spec.TargetCapacity, State: "active"}}
	if pl.launched() == 0 {
		f.fleet.State = "failed"
	}
	m.fleets[id] = f
	if spec.ClientToken != "" {
		m.byToken[spec.ClientToken] = id
	}
	return m.viewLocked(f, now), nil
}

// message is the fleet's answer at now: scheduled, or what was placed, not placed and taken back.
func (f *fleetState) message(now time.Time, interrupted int) string {
	id := f.fleet.ID
	var msg string
	if f.start.After(now) {
		msg = fmt.Sprintf("simulated fleet %s of %d instances scheduled from %s", id, f.fleet.Target, f.start.UTC().Format(time.RFC3339))
	} else {
		msg = fmt.Sprintf("simulated fleet %s: launched %d of %d instances", id, f.launched(), f.fleet.Target)
		if f.unpriced > 0 {
			msg += fmt.Sprintf("; %s not launched: no pool is under the max price", spotInstances(f.unpriced))
		}
		if f.uncapacitated > 0 {
			msg += fmt.Sprintf("; %s not launched: %s", spotInstances(f.uncapacitated), insufficientCapacity)
		}
		if interrupted > 0 {
			msg += fmt.Sprintf("; %s interrupted (their pool's capacity was taken back)", spotInstances(interrupted))
		}
		if f.unpriced+f.uncapacitated+interrupted > 0 {
			msg += "; an instant fleet neither retries nor replaces them"
		}
	}
	if !f.end.IsZero() {
		msg += "; it ends at " + f.end.UTC().Format(time.RFC3339)
	}
	return msg
}

// viewLocked returns the fleet at now: instances still running and their cost.
func (m *Market) viewLocked(f *fleetState, now time.Time) domain.Fleet {
	v := f.fleet // its Instances and EstimatedUSDh are zero
	switch {
	case v.State == "deleted":
		return v
	case !f.end.IsZero() && !now.Before(f.end):
		v.State = "ended"
	case f.start.After(now):
		v.State = "scheduled"
	default:
		n, usd := m.running(f.placement, now.Unix())
		v.Instances, v.EstimatedUSDh = n, math.Round(usd*1e4)/1e4
		v.Message = f.message(now, f.launched()-n)
		return v
	}
	v.Message = f.message(now, 0)
	return v
}

// DescribeFleet returns a fleet's state and its cost per hour now.
func (m *Market) DescribeFleet(ctx context.Context, region, id string) (domain.Fleet, error) {
	if err := ctx.Err(); err != nil {
		return domain.Fleet{}, fmt.Errorf("sim describe fleet %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, err := m.fleetLocked(region, id)
	if err != nil {
		return domain.Fleet{}, err
	}
	return m.viewLocked(f, m.opt.Now()), nil
}

// DeleteFleet terminates a fleet's instances; deleting twice is not an error.
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

// FindFleet finds the fleet launched with a client token, nil, nil if none.
func (m *Market) FindFleet(ctx context.Context, region, clientToken string) (*domain.Fleet, error) {
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

var _ domain.FleetFinder = (*Market)(nil)

func (m *Market) fleetLocked(region, id string) (*fleetState, error) {
	f, ok := m.fleets[id]
	if !ok || (region != "" && f.fleet.Region != region) {
		return nil, fmt.Errorf("sim fleet %s not found in region %s (the simulated market keeps fleets only while it runs)", id, region)
	}
	return f, nil
}

func spotInstances(n int) string {
	if n == 1 {
		return "1 spot instance"
	}
	return fmt.Sprintf("%d spot instances", n)
}

// A simulated fleet behaves as an EC2 Fleet of type instant: one placement at
// launch (or at a schedule's start); a spot instance runs until its pool's
// capacity falls below it and is not replaced. All a pure function of seed,
// spec and the second placed, which the fleet id carries.

type placement struct {
	// placedAt: the launch, or a scheduled fleet's Start (Unix seconds).
	placedAt int64
	alloc    []allocation
	// Spot instances not launched: no pool under the max price, or no capacity.
	unpriced, uncapacitated int
}

// insufficientCapacity is EC2's CreateFleetError for spot it could not place.
const insufficientCapacity = "InsufficientInstanceCapacity: There is no Spot capacity available that matches your request."

func (pl placement) launched() int {
	n := 0
	for _, a := range pl.alloc {
		n += a.count
	}
	return n
}

// place places a fleet at t: on-demand on the cheapest list price, spot by the
// spec's strategy among pools under the max price with capacity.
func (m *Market) place(pools []*simPool, spec domain.FleetSpec, t int64) placement {
	pl := placement{placedAt: t}
	if spec.OnDemandBase > 0 {
		best := pools[0]
		for _, p := range pools[1:] {
			if *p.spec.Desc.OnDemandUSDHour < *best.spec.Desc.OnDemandUSDHour {
				best = p
			}
		}
		pl.alloc = append(pl.alloc, allocation{pool: best, count: spec.OnDemandBase, onDemand: true})
	}
	spot := spec.TargetCapacity - spec.OnDemandBase
	if spot == 0 {
		return pl
	}
	type cand struct {
		p        *simPool
		perGPU   float64 // spot price per GPU-hour at t
		capacity int     // instances the pool has at t
	}
	var cands []cand
	priced := false
	for _, p := range pools {
		_, price := p.model.inForce(t)
		limit := *p.spec.Desc.OnDemandUSDHour
		if spec.MaxPriceUSD != nil {
			limit = *spec.MaxPriceUSD
		}
		if price > limit {
			continue
		}
		priced = true
		if n, _ := m.capWalker(p).segment(t); n > 0 {
			cands = append(cands, cand{p, price / p.spec.Desc.GPU.Count, n})
		}
	}
	if !priced {
		pl.unpriced = spot
		return pl
	}
	left := spot
	switch spec.Strategy {
	case domain.StrategyDiversified:
		// One at a time to each pool with room: a shallow pool's share goes to the others.
		given := make([]int, len(cands))
		for more := true; left > 0 && more; {
			more = false
			for i, c := range cands {
				if left > 0 && given[i] < c.capacity {
					given[i]++
					left--
					more = true
				}
			}
		}
		for i, c := range cands {
			if given[i] > 0 {
				pl.alloc = append(pl.alloc, allocation{pool: c.p, count: given[i]})
			}
		}
		pl.uncapacitated = left
		return pl
	case domain.StrategyLowestPrice:
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(a.perGPU, b.perGPU) })
	case domain.StrategyCapacityOptimized:
		// Most capacity first; among equals, calmer bucket and better score.
		slices.SortStableFunc(cands, func(a, b cand) int {
			return cmp.Or(cmp.Compare(b.capacity, a.capacity), cmp.Compare(a.p.spec.Bucket, b.p.spec.Bucket),
				cmp.Compare(b.p.spec.Placement, a.p.spec.Placement))
		})
	default: // price-capacity-optimized
		// Deep enough pools first, then the cheapest with their risk weighed in.
		w := func(c cand) float64 { return c.perGPU * (1 + 0.25*float64(c.p.spec.Bucket)) }
		deep := func(c cand) int {
			if c.capacity >= spot {
				return 0
			}
			return 1
		}
		slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(deep(a), deep(b)), cmp.Compare(w(a), w(b))) })
	}
	for _, c := range cands {
		if left == 0 {
			break
		}
		n := min(left, c.capacity)
		pl.alloc = append(pl.alloc, allocation{pool: c.p, count: n})
		left -= n
	}
	pl.uncapacitated = left
	return pl
}

// takenBack returns per allocation and instance the Unix second it was
// interrupted, 0 if not before until; on-demand is never taken back.
func (m *Market) takenBack(pl placement, until int64) [][]int64 {
	out := make([][]int64, len(pl.alloc))
	for i, a := range pl.alloc {
		out[i] = make([]int64, a.count)
		if a.onDemand {
			continue
		}
		w := m.capWalker(a.pool)
		held := a.count
		for t := pl.placedAt; held > 0 && t < until; {
			n, next := w.segment(t)
			for ; held > n; held-- {
				out[i][held-1] = t
			}
			t = next
		}
	}
	return out
}

// running counts a placement's instances at now and their hourly cost then.
func (m *Market) running(pl placement, now int64) (n int, usdHour float64) {
	gone := m.takenBack(pl, now+1)
	for i, a := range pl.alloc {
		price := *a.pool.spec.Desc.OnDemandUSDHour
		if !a.onDemand {
			_, price = a.pool.model.inForce(now)
		}
		for _, g := range gone[i] {
			if g == 0 {
				n++
				usdHour += price
			}
		}
	}
	return n, usdHour
}

// fleetID formats "fleet-" and a UUID whose first eight hex digits are the placement second.
func fleetID(h uint64, placedAt int64) string {
	g := mix(h)
	return fmt.Sprintf("fleet-%08x-%04x-4%03x-%04x-%012x", uint32(placedAt), uint16(h>>16), uint16(h)&0xfff,
		uint16(g>>48)&0x3fff|0x8000, g&0xffffffffffff)
}

// placedAtOf reads the placement second from a fleet id; the ledger may date a
// fleet after it, but not by more than a week.
func placedAtOf(id string, start time.Time) (int64, bool) {
	if len(id) != len("fleet-")+36 || id[:6] != "fleet-" {
		return 0, false
	}
	v, err := strconv.ParseUint(id[6:14], 16, 32)
	if err != nil || int64(v) < start.Add(-7*24*time.Hour).Unix() || oldFleetID(id) {
		return 0, false
	}
	return int64(v), true
}

// oldFleetID reports whether id is of the earlier format, a UUID of one hash
// (a false match is one in 2^58).
func oldFleetID(id string) bool {
	g1, err1 := strconv.ParseUint(id[6:14], 16, 32)
	g2, err2 := strconv.ParseUint(id[15:19], 16, 16)
	g3, err3 := strconv.ParseUint(id[21:24], 16, 12)
	g4, err4 := strconv.ParseUint(id[25:29], 16, 16)
	g5, err5 := strconv.ParseUint(id[30:42], 16, 48)
	if errors.Join(err1, err2, err3, err4, err5) != nil || id[14] != '-' || id[19] != '-' || id[24] != '-' || id[29] != '-' {
		return false
	}
	for k := range uint64(16) {
		g := mix(g1<<32 | g2<<16 | k<<12 | g3)
		if g&0xffffffffffff == g5 && (g>>48)&0x3fff == g4&0x3fff {
			return true
		}
	}
	return false
}
