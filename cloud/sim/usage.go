package sim

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

var _ domain.UsageReporter = (*Market)(nil)

// usageProfile is how a row's instances are used, from seed and row id: busy,
// idle, late or without metrics.
type usageProfile int

const (
	profileBusy      usageProfile = iota // busy by day, quieter at night
	profileIdle                          // launched and left idle
	profileLate                          // instances start a quarter into the window
	profileNoMetrics                     // no metrics agent: running known, busy not
)

func (m *Market) profileOf(ref string) usageProfile {
	switch strHash("usage-profile", fmt.Sprint(m.opt.Seed), ref) % 8 {
	case 0, 1:
		return profileIdle
	case 2:
		return profileLate
	case 3:
		return profileNoMetrics
	}
	return profileBusy
}

const maxUsageInstances = MaxFleetTarget

// Usage reports how a row's simulated instances ran, a pure function of seed,
// row and clock: a fleet's instances as its launch placed them (m.place),
// a block's starting within its window's first hour; hourly utilization samples.
func (m *Market) Usage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	if err := ctx.Err(); err != nil {
		return domain.UsageReport{}, fmt.Errorf("sim usage of %s: %w", q.Ref, err)
	}
	if q.Start.IsZero() || q.InstanceCount <= 0 {
		return domain.UsageReport{}, fmt.Errorf("sim usage of %s: the row has no start or no instances", q.Ref)
	}
	seed := fmt.Sprint(m.opt.Seed)
	prof := m.profileOf(q.Ref)
	rep := domain.UsageReport{Source: fmt.Sprintf("simulated GPU utilization (seed %d)", m.opt.Seed)}
	if prof == profileNoMetrics {
		rep.Source, rep.Note = "", "simulated: these instances run no metrics agent"
	}
	if q.Kind == domain.KindTrainingPlan && rep.Source != "" {
		rep.Source = fmt.Sprintf("simulated training plan: in-use instances (SageMaker's DescribeTrainingPlan count) and GPU utilization (seed %d)", m.opt.Seed)
	}
	end := q.End
	if end.IsZero() || end.After(q.To) {
		end = q.To
	}
	var runs []domain.InstanceUsage
	if q.Kind == domain.KindFleet {
		var err error
		if runs, err = m.fleetRuns(q, seed, end); err != nil {
			return domain.UsageReport{}, err
		}
	} else {
		runs = m.bookedRuns(q, seed, prof, end)
	}
	for i, in := range runs {
		stop := end
		if in.Interrupted {
			stop = in.End
		}
		if !in.Start.Before(stop) {
			continue
		}
		if prof != profileNoMetrics {
			noise := newHashPrefix("usage-busy", seed, q.Ref, strconv.Itoa(i))
			for h := in.Start.Truncate(time.Hour); h.Before(stop); h = h.Add(time.Hour) {
				s0, s1 := domain.Later(h, in.Start), domain.Earlier(h.Add(time.Hour), stop)
				if s1.After(s0) && !s1.Before(q.From) {
					in.Busy = append(in.Busy, domain.BusySample{At: s0, Period: s1.Sub(s0),
						Share: busyShare(prof, unit(noise.withInt(h.Unix())), h)})
				}
			}
		}
		if !in.Interrupted && !q.End.IsZero() && !q.End.After(q.To) {
			in.End = q.End
		}
		if !in.End.IsZero() && in.End.Before(q.From) {
			continue // ran before the span asked for
		}
		rep.Instances = append(rep.Instances, in)
	}
	return rep, nil
}

// bookedRuns are a block's or reservation's instances: started within 45
// minutes (a quarter in for a late row), never interrupted.
func (m *Market) bookedRuns(q domain.UsageQuery, seed string, prof usageProfile, end time.Time) []domain.InstanceUsage {
	n := min(q.InstanceCount, maxUsageInstances)
	types := q.InstanceTypes
	if len(types) == 0 {
		types = []string{q.InstanceType}
	}
	out := make([]domain.InstanceUsage, n)
	for i := range out {
		in := domain.InstanceUsage{ID: usageInstanceID(seed, q.Ref, i), InstanceType: types[i%len(types)], Zone: q.Zone}
		delay := time.Duration(unit(strHash("usage-delay", seed, q.Ref, fmt.Sprint(i)))*45) * time.Minute
		if prof == profileLate {
			window := end.Sub(q.Start)
			if !q.End.IsZero() {
				window = q.End.Sub(q.Start)
			}
			delay = window / 4
		}
		in.Start = q.Start.Add(delay)
		if in.Zone == "" {
			in.Zone = m.usageZone(q.Region, in.InstanceType, seed, q.Ref, i)
		}
		out[i] = in
	}
	return out
}

// fleetRuns are the instances a fleet's launch placed, placed at its fleet id's second, else the row's start.
func (m *Market) fleetRuns(q domain.UsageQuery, seed string, end time.Time) ([]domain.InstanceUsage, error) {
	spec := domain.FleetSpec{Region: q.Region, InstanceTypes: q.InstanceTypes, Zones: q.Zones, TargetCapacity: q.InstanceCount,
		OnDemandBase: q.OnDemand, Strategy: q.Strategy, MaxPriceUSD: q.MaxPriceUSD}
	if len(spec.InstanceTypes) == 0 && q.InstanceType != "" {
		spec.InstanceTypes = []string{q.InstanceType}
	}
	if len(spec.Zones) == 0 && q.Zone != "" {
		spec.Zones = []string{q.Zone}
	}
	pools, err := m.validateFleet(&spec)
	if err != nil {
		return nil, fmt.Errorf("sim usage of %s: %w", q.Ref, err)
	}
	at, ok := placedAtOf(q.ProviderRef, q.Start)
	if !ok {
		at = q.Start.Unix()
	}
	pl := m.place(pools, spec, at)
	until := end.Unix()
	if end.Nanosecond() > 0 {
		until++ // an interruption at second t is in the span when t is before its end
	}
	gone := m.takenBack(pl, until)
	var out []domain.InstanceUsage
	for k, a := range pl.alloc {
		for r := range a.count {
			d := a.pool.spec.Desc
			in := domain.InstanceUsage{ID: usageInstanceID(seed, q.Ref, len(out)), InstanceType: d.InstanceType, Zone: d.Zone,
				Spot: !a.onDemand, Start: time.Unix(at, 0).UTC()}
			if g := gone[k][r]; g != 0 {
				in.End, in.Interrupted = time.Unix(g, 0).UTC(), true
			}
			out = append(out, in)
		}
	}
	return out, nil
}

func usageInstanceID(seed, ref string, i int) string {
	return fmt.Sprintf("i-%017x", strHash("usage-instance", seed, ref, fmt.Sprint(i))>>4)
}

// busyShare is an instance's utilization in hour h from a noise in [0, 1).
func busyShare(prof usageProfile, noise float64, h time.Time) float64 {
	if prof == profileIdle {
		return round3(0.01 + 0.07*noise)
	}
	if hr := h.UTC().Hour(); hr >= 7 && hr < 21 {
		return round3(0.75 + 0.23*noise)
	}
	return round3(0.15 + 0.5*noise)
}

// hashPrefix is strHash's state after shared leading parts, hashed once.
type hashPrefix uint64

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func newHashPrefix(parts ...string) hashPrefix {
	h := uint64(fnvOffset64)
	for _, p := range parts {
		h = fnvAdd(h, p)
	}
	return hashPrefix(h)
}

func (h hashPrefix) withInt(v int64) uint64 {
	var buf [24]byte
	return mix(fnvAdd(uint64(h), strconv.AppendInt(buf[:0], v, 10)))
}

// fnvAdd hashes one part and its 0 separator: FNV-1a of the parts, each followed by a 0 byte.
func fnvAdd[T string | []byte](h uint64, part T) uint64 {
	for i := 0; i < len(part); i++ {
		h ^= uint64(part[i])
		h *= fnvPrime64
	}
	return h * fnvPrime64 // the 0 separator: h ^= 0 changes nothing
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// usageZone picks a zone of the region's pools of the type for a fleet's instance.
func (m *Market) usageZone(region, typ, seed, ref string, i int) string {
	var zones []string
	for _, p := range m.pools {
		if p.spec.Region.Name == region && strings.EqualFold(p.spec.Desc.InstanceType, typ) {
			zones = append(zones, p.spec.Desc.Zone)
		}
	}
	if len(zones) == 0 {
		return ""
	}
	return zones[strHash("usage-zone", seed, ref, fmt.Sprint(i))%uint64(len(zones))]
}
