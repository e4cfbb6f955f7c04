package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/providers"
)

var _ providers.UsageReporter = (*Market)(nil)

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
// the seed, the row and the clock hour, so that every process and every
// span asked for tells the same story. Instances of a block or
// reservation start within the first hour of the window (a quarter into
// it for a late row); a fleet's start with it. Spot instances are
// interrupted now and then (more in pools of higher interruption
// buckets) and are not replaced, as an EC2 instant fleet's are not.
// Utilization comes in hourly samples.
func (m *Market) Usage(ctx context.Context, q providers.UsageQuery) (providers.UsageReport, error) {
	if err := ctx.Err(); err != nil {
		return providers.UsageReport{}, fmt.Errorf("sim usage of %s: %w", q.Ref, err)
	}
	if q.Start.IsZero() || q.InstanceCount <= 0 {
		return providers.UsageReport{}, fmt.Errorf("sim usage of %s: the row has no start or no instances", q.Ref)
	}
	seed := fmt.Sprint(m.opt.Seed)
	prof := m.profileOf(q.Ref)
	rep := providers.UsageReport{Source: fmt.Sprintf("simulated GPU utilization (seed %d)", m.opt.Seed)}
	if prof == profileNoMetrics {
		rep.Source, rep.Note = "", "simulated: these instances run no metrics agent"
	}
	end := q.End
	if end.IsZero() || end.After(q.To) {
		end = q.To
	}
	n := min(q.InstanceCount, maxUsageInstances)
	types := q.InstanceTypes
	if len(types) == 0 {
		types = []string{q.InstanceType}
	}
	for i := range n {
		id := fmt.Sprintf("i-%017x", strHash("usage-instance", seed, q.Ref, fmt.Sprint(i))>>4)
		in := providers.InstanceUsage{ID: id, InstanceType: types[i%len(types)], Zone: q.Zone,
			Spot: q.Kind == providers.KindFleet && i >= q.OnDemand}
		delay := time.Duration(unit(strHash("usage-delay", seed, q.Ref, fmt.Sprint(i)))*45) * time.Minute
		if q.Kind == providers.KindFleet {
			delay = 3 * time.Minute
		}
		if prof == profileLate && q.Kind != providers.KindFleet {
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
		bucket := m.bucketOf(q.Region, in.Zone, in.InstanceType)
		if !in.Start.Before(end) {
			continue
		}
		// Walk the clock hours from the start: each may interrupt a
		// spot instance, and each has a busy sample.
		for h := in.Start.Truncate(time.Hour); h.Before(end); h = h.Add(time.Hour) {
			hs := fmt.Sprint(h.Unix())
			s0, s1 := maxT(h, in.Start), minT(h.Add(time.Hour), end)
			if in.Spot {
				// 1 % to 5 % an hour: real GPU spot is interrupted
				// more often than a monthly bucket says (DESIGN.md).
				lambda := 0.01 * float64(1+bucket)
				if unit(strHash("usage-interrupt", seed, q.Ref, fmt.Sprint(i), hs)) < lambda {
					at := h.Add(time.Duration(unit(strHash("usage-at", seed, q.Ref, fmt.Sprint(i), hs)) * float64(time.Hour)))
					if at.After(in.Start) && at.Before(s1) {
						in.End, in.Interrupted, s1 = at, true, at
					}
				}
			}
			if prof != profileNoMetrics && s1.After(s0) && !s1.Before(q.From) {
				in.Busy = append(in.Busy, providers.BusySample{At: s0, Period: s1.Sub(s0),
					Share: m.busyShare(prof, seed, q.Ref, i, h)})
			}
			if in.Interrupted {
				break
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

// busyShare is an instance's utilization in the clock hour h.
func (m *Market) busyShare(prof usageProfile, seed, ref string, i int, h time.Time) float64 {
	noise := unit(strHash("usage-busy", seed, ref, fmt.Sprint(i), fmt.Sprint(h.Unix())))
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

// bucketOf is the pool's interruption bucket (0 … 4), 2 when unknown.
func (m *Market) bucketOf(region, zone, typ string) int {
	for _, p := range m.pools {
		d := p.spec.Desc
		if d.Region == region && d.Zone == zone && strings.EqualFold(d.InstanceType, typ) {
			return p.spec.Bucket
		}
	}
	return 2
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
