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

// usageProfile is how a simulated row's instances are used. Each row gets
// one, from the seed and the row's id, so the Usage view has busy rows,
// idle ones, late starters and rows without metrics with no account.
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

// maxUsageInstances bounds the instances a simulated report describes.
const maxUsageInstances = MaxFleetTarget

// Usage reports how a row's simulated instances ran: a pure function of
// the seed, the row and the clock, so that every process and every span
// asked for tells the same story. Instances of a block or reservation
// start within the first hour of the window (a quarter into it for a late
// row). A fleet's instances are those its launch placed (placement.go),
// worked out again from the row's spec and the second its fleet id
// carries: they start then, and each spot one is interrupted at the
// second its pool's capacity falls below what the fleet holds there — the
// times the fleet's view counts it gone — and is not replaced, as an EC2
// instant fleet's are not. Utilization comes in hourly samples.
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
		// Each clock hour of its run has a busy sample.
		if prof != profileNoMetrics {
			noise := newHashPrefix("usage-busy", seed, q.Ref, strconv.Itoa(i))
			for h := in.Start.Truncate(time.Hour); h.Before(stop); h = h.Add(time.Hour) {
				s0, s1 := maxT(h, in.Start), minT(h.Add(time.Hour), stop)
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

// bookedRuns are the instances of a block or reservation: each starts
// within the first 45 minutes of the window, a quarter into it for a
// late row; none is interrupted.
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

// fleetRuns are the instances a fleet's launch placed, in the order of its
// placement: the on-demand base, then each spot pool's. Its spec is the
// row's; the second it was placed is its fleet id's, else the row's start.
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

// busyShare is an instance's utilization in the clock hour h, from a
// noise in [0, 1) drawn for the instance and the hour.
func busyShare(prof usageProfile, noise float64, h time.Time) float64 {
	switch prof {
	case profileIdle:
		return round3(0.01 + 0.07*noise)
	}
	// Working hours (UTC) busy, nights half idle.
	if hr := h.UTC().Hour(); hr >= 7 && hr < 21 {
		return round3(0.75 + 0.23*noise)
	}
	return round3(0.15 + 0.5*noise)
}

// hashPrefix is strHash's FNV-1a state after its leading parts: it hashes
// many part lists that share them — an instance's every hour — without
// hashing the shared parts again or formatting through fmt.
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

// withInt is strHash of the prefix's parts and v in decimal.
func (h hashPrefix) withInt(v int64) uint64 {
	var buf [24]byte
	return mix(fnvAdd(uint64(h), strconv.AppendInt(buf[:0], v, 10)))
}

// fnvAdd hashes one part and its 0 separator into an FNV-1a state, as
// strHash does.
func fnvAdd[T string | []byte](h uint64, part T) uint64 {
	for i := 0; i < len(part); i++ {
		h ^= uint64(part[i])
		h *= fnvPrime64
	}
	return h * fnvPrime64 // the 0 separator: h ^= 0 changes nothing
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// usageZone picks the zone an instance of a fleet ran in: one of the
// region's pools of its type.
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

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minT(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
