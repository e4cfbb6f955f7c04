package gcp

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"google.golang.org/api/compute/v1"
	monitoring "google.golang.org/api/monitoring/v3"

	"github.com/gpumarket/gpumarket/domain"
)

// Uptime says which VMs ran when (Monitoring keeps a deleted VM's series);
// the Ops Agent's GPU utilisation where it runs, else CPU.
const (
	metricUptime = "compute.googleapis.com/instance/uptime"
	metricGPU    = "agent.googleapis.com/gpu/utilization"
	metricCPU    = "compute.googleapis.com/instance/cpu/utilization"
	period       = 5 * time.Minute
)

// Usage reports which fleet VMs ran when, how busy, and which Google preempted.
func (p *Provider) Usage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	if q.Kind != domain.KindFleet {
		return domain.UsageReport{}, fmt.Errorf("gcp: usage of a %s row is not read: gpumarket reads the VMs of its fleets only", q.Kind)
	}
	id := q.ProviderRef
	if id == "" {
		id = FleetID(q.Ref)
	}
	to := q.To
	if now := p.now(); to.IsZero() || to.After(now) {
		to = now
	}
	if !to.After(q.From) {
		return domain.UsageReport{}, nil
	}
	fleet := fmt.Sprintf(`resource.type = "gce_instance" AND metadata.user_labels."%s" = "%s"`, labelFleet, id)
	runs := map[string]*domain.InstanceUsage{}
	err := p.series(ctx, metricUptime, fleet, "ALIGN_SUM", q.From, to, func(ts *monitoring.TimeSeries) {
		iid := ts.Resource.Labels["instance_id"]
		u := runs[iid]
		if u == nil {
			name := ts.Metric.Labels["instance_name"]
			u = &domain.InstanceUsage{ID: name, InstanceType: q.InstanceType, Zone: ts.Resource.Labels["zone"], Spot: !strings.Contains(name, odMark)}
			runs[iid] = u
		}
		// The first period's end less its seconds up is the run's start; the last's start plus them, its end.
		for _, pt := range ts.Points {
			if pt.Interval == nil || pt.Value == nil || pt.Value.DoubleValue == nil || *pt.Value.DoubleValue <= 0 {
				continue
			}
			pEnd, err := time.Parse(time.RFC3339, pt.Interval.EndTime)
			if err != nil {
				continue
			}
			up := time.Duration(min(*pt.Value.DoubleValue, period.Seconds()) * float64(time.Second))
			if start := pEnd.Add(-up); u.Start.IsZero() || start.Before(u.Start) {
				u.Start = start
			}
			if end := pEnd.Add(-period).Add(up); end.After(u.End) {
				u.End = end
			}
		}
	})
	if err != nil {
		return domain.UsageReport{}, err
	}
	rep := domain.UsageReport{}
	for _, u := range runs {
		if !u.End.Before(to.Add(-2 * period)) {
			u.End = time.Time{} // reported within the last periods: still running
		}
	}
	busy, source, note := p.busy(ctx, fleet, q.From, to)
	for iid, u := range runs {
		u.Busy = busy[iid]
	}
	if len(busy) > 0 {
		rep.Source = source
	}
	rep.Note = note
	if err := p.preempted(ctx, runs, q.From, to); err != nil {
		rep.InterruptionsUnknown = true
		rep.Note = strings.TrimPrefix(rep.Note+"; interruptions unknown: "+err.Error(), "; ")
	}
	for _, u := range runs {
		rep.Instances = append(rep.Instances, *u)
	}
	sort.Slice(rep.Instances, func(i, j int) bool { return rep.Instances[i].ID < rep.Instances[j].ID })
	return rep, nil
}

// series lists a metric's series matching filter, aligned over period.
func (p *Provider) series(ctx context.Context, metric, filter, aligner string, from, to time.Time, f func(*monitoring.TimeSeries)) error {
	err := p.monitor.Projects.TimeSeries.List("projects/"+p.project).
		Filter(fmt.Sprintf(`metric.type = "%s" AND %s`, metric, filter)).
		IntervalStartTime(from.UTC().Format(time.RFC3339)).IntervalEndTime(to.UTC().Format(time.RFC3339)).
		AggregationAlignmentPeriod(fmt.Sprintf("%ds", int(period/time.Second))).AggregationPerSeriesAligner(aligner).
		Pages(ctx, func(r *monitoring.ListTimeSeriesResponse) error {
			for _, ts := range r.TimeSeries {
				if ts.Resource != nil && ts.Metric != nil {
					f(ts)
				}
			}
			return nil
		})
	if err != nil {
		return apiErr("read "+metric, err)
	}
	return nil
}

// busy reads each VM's utilisation: GPU mean from the Ops Agent, else CPU.
func (p *Provider) busy(ctx context.Context, fleet string, from, to time.Time) (map[string][]domain.BusySample, string, string) {
	type key struct {
		iid string
		at  time.Time
	}
	sum, n := map[key]float64{}, map[key]int{}
	read := func(metric string, scale float64) error {
		return p.series(ctx, metric, fleet, "ALIGN_MEAN", from, to, func(ts *monitoring.TimeSeries) {
			for _, pt := range ts.Points {
				if pt.Interval == nil || pt.Value == nil || pt.Value.DoubleValue == nil {
					continue
				}
				end, err := time.Parse(time.RFC3339, pt.Interval.EndTime)
				if err != nil {
					continue
				}
				k := key{ts.Resource.Labels["instance_id"], end.Add(-period)}
				sum[k] += *pt.Value.DoubleValue * scale
				n[k]++
			}
		})
	}
	source := "Cloud Monitoring " + metricGPU + " (Ops Agent)"
	var notes []string
	if err := read(metricGPU, 0.01); err != nil {
		notes = append(notes, err.Error())
	}
	if len(sum) == 0 {
		source = "Cloud Monitoring " + metricCPU + " (CPU utilization standing in for GPU: no Ops Agent GPU metric)"
		if err := read(metricCPU, 1); err != nil {
			notes = append(notes, err.Error())
		}
	}
	out := map[string][]domain.BusySample{}
	for k, s := range sum {
		share := min(max(s/float64(n[k]), 0), 1)
		out[k.iid] = append(out[k.iid], domain.BusySample{At: k.at, Period: period, Share: share})
	}
	for _, s := range out {
		sort.Slice(s, func(i, j int) bool { return s[i].At.Before(s[j].At) })
	}
	return out, source, strings.Join(notes, "; ")
}

// preempted marks VMs from the zones' compute.instances.preempted operations.
func (p *Provider) preempted(ctx context.Context, runs map[string]*domain.InstanceUsage, from, to time.Time) error {
	byName := map[string]*domain.InstanceUsage{}
	zones := map[string]bool{}
	for _, u := range runs {
		byName[u.ID] = u
		if u.Zone != "" {
			zones[u.Zone] = true
		}
	}
	for zone := range zones {
		err := p.compute.ZoneOperations.List(p.project, zone).Filter(`operationType = "compute.instances.preempted"`).
			Pages(ctx, func(l *compute.OperationList) error {
				for _, op := range l.Items {
					u := byName[path.Base(op.TargetLink)]
					at, err := time.Parse(time.RFC3339, op.InsertTime)
					if u == nil || err != nil || at.Before(from) || at.After(to) {
						continue
					}
					u.Interrupted, u.End = true, at
				}
				return nil
			})
		if err != nil {
			return apiErr("list preemptions in "+zone, err)
		}
	}
	return nil
}
