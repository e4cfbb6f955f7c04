package aws

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gpumarket/gpumarket/domain"
)

// The NVIDIA collector publishes one series per GPU by index, name and host
// (aws/amazon-cloudwatch-agent#981), InstanceId only if appended: searched by
// InstanceId, else host; CPUUtilization stands in when there is none.
const (
	gpuNamespace, gpuMetric = "CWAgent", "nvidia_smi_utilization_gpu"
	cpuNamespace, cpuMetric = "AWS/EC2", "CPUUtilization"
	metricQueriesPerCall    = 400

	// searchWindow: SEARCH finds metrics reported in the last two weeks (CloudWatch User Guide).
	searchWindow = 14 * 24 * time.Hour
)

// SourceGPU, SourceGPUHost and SourceCPU are a report's metrics_source;
// SourceCPUOld is SourceCPU for a span CloudWatch SEARCH cannot see.
var (
	SourceGPU     = "CloudWatch CWAgent nvidia_smi_utilization_gpu by InstanceId"
	SourceGPUHost = "CloudWatch CWAgent nvidia_smi_utilization_gpu by host (the instances' private DNS names)"
	SourceCPU     = domain.CPUStandIn("CloudWatch AWS/EC2 CPUUtilization", "no nvidia_smi metric with InstanceId or host of these instances in CWAgent")
	SourceCPUOld  = domain.CPUStandIn("CloudWatch AWS/EC2 CPUUtilization",
		"the span ended more than two weeks ago, and CloudWatch SEARCH finds only metrics that reported since")
)

type cloudWatchAPI interface {
	cloudwatch.GetMetricDataAPIClient
}

// cloudWatch returns a region's client (GetMetricData speaks Smithy RPC v2 CBOR, as cwtest does).
func (p *Provider) cloudWatch(region string) cloudWatchAPI {
	return p.cw.get(region, func() cloudWatchAPI {
		return cloudwatch.NewFromConfig(p.cfg, func(o *cloudwatch.Options) { o.Region = region })
	})
}

// Usage reports how a block's or fleet's instances ran and how busy: GPU
// utilization, else CPU, saying so. DescribeInstances lists a terminated
// instance for about an hour; a SpotInstanceTermination counts as interrupted.
func (p *Provider) Usage(ctx context.Context, q domain.UsageQuery) (domain.UsageReport, error) {
	if q.Kind == domain.KindTrainingPlan && q.Region != "" && q.ProviderRef != "" {
		return p.planUsage(ctx, q)
	}
	if q.ProviderRef == "" || q.Region == "" {
		return domain.UsageReport{}, fmt.Errorf("aws usage of %s: the row has no AWS id or region", q.Ref)
	}
	filter := ec2types.Filter{Name: awssdk.String("tag:" + tagFleetID), Values: []string{q.ProviderRef}}
	if q.Kind != domain.KindFleet {
		filter = ec2types.Filter{Name: awssdk.String("capacity-reservation-id"), Values: []string{q.ProviderRef}}
	}
	var rep domain.UsageReport
	// Instances whose end EC2 no longer says: their last CPU datapoint ends them.
	endUnknown := map[string]bool{}
	hosts := map[string]string{} // instance id → private DNS name

	pg := ec2.NewDescribeInstancesPaginator(p.client(q.Region), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{filter}, MaxResults: awssdk.Int32(1000)})
	for out, err := range pages(ctx, pg) {
		if err != nil {
			return domain.UsageReport{}, explain(fmt.Errorf("aws: usage of %s: describe instances in %s: %w", q.ProviderRef, q.Region, err))
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				if u, ended, ok := instanceUsage(in, q); ok {
					rep.Instances = append(rep.Instances, u)
					hosts[u.ID] = awssdk.ToString(in.PrivateDnsName)
					if ended && u.End.IsZero() {
						endUnknown[u.ID] = true
					}
				}
			}
		}
	}
	sort.Slice(rep.Instances, func(i, j int) bool { return rep.Instances[i].ID < rep.Instances[j].ID })
	if len(rep.Instances) == 0 {
		return rep, nil
	}
	if err := p.readBusy(ctx, q, &rep, endUnknown, hosts); err != nil {
		for i := range rep.Instances {
			rep.Instances[i].Busy = nil
		}
		rep.Source, rep.Note = "", "CloudWatch: "+shortCause(err)
	}
	return rep, nil
}

// transitionTime reads "User initiated (2025-06-03 10:31:02 GMT)".
var transitionTime = regexp.MustCompile(`\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) GMT\)`)

// instanceUsage is an instance's run within [From, To], whether it ended; false if it did not run.
func instanceUsage(in ec2types.Instance, q domain.UsageQuery) (u domain.InstanceUsage, ended, ok bool) {
	u = domain.InstanceUsage{ID: awssdk.ToString(in.InstanceId), InstanceType: string(in.InstanceType),
		Spot: in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot}
	if in.Placement != nil {
		u.Zone = awssdk.ToString(in.Placement.AvailabilityZone)
	}
	if in.LaunchTime == nil {
		return u, false, false
	}
	u.Start = *in.LaunchTime
	state := ec2types.InstanceStateNameRunning
	if in.State != nil {
		state = in.State.Name
	}
	switch state {
	case ec2types.InstanceStateNameTerminated, ec2types.InstanceStateNameStopped,
		ec2types.InstanceStateNameShuttingDown, ec2types.InstanceStateNameStopping:
		ended = true
		if m := transitionTime.FindStringSubmatch(awssdk.ToString(in.StateTransitionReason)); m != nil {
			if t, err := time.Parse("2006-01-02 15:04:05", m[1]); err == nil {
				u.End = t.UTC()
			}
		}
		if in.StateReason != nil && awssdk.ToString(in.StateReason.Code) == "Server.SpotInstanceTermination" {
			u.Interrupted = true
		}
	}
	if !u.End.IsZero() && u.End.Before(q.From) || !u.Start.Before(q.To) {
		return u, ended, false
	}
	return u, ended, true
}

// readBusy fills Busy from the GPU metric where any instance has it, else CPU (rep.Source says which).
func (p *Provider) readBusy(ctx context.Context, q domain.UsageQuery, rep *domain.UsageReport, endUnknown map[string]bool, hosts map[string]string) error {
	from, to := q.From, q.To
	from = domain.Later(from, q.Start)
	if !q.End.IsZero() && q.End.Before(to) {
		to = q.End
	}
	if !to.After(from) {
		return nil
	}
	now := p.opt.Now()
	period := metricPeriod(from, to, now)
	// Whole periods, as CloudWatch aligns them.
	from = from.Truncate(time.Duration(period) * time.Second)
	searchable := now.Sub(to) < searchWindow
	var queries []cwtypes.MetricDataQuery
	gpuSearch := func(id, search string) cwtypes.MetricDataQuery {
		return cwtypes.MetricDataQuery{Id: awssdk.String(id), ReturnData: awssdk.Bool(true),
			Expression: awssdk.String(fmt.Sprintf(`AVG(SEARCH('%s', 'Average', %d))`, search, period))}
	}
	for i, in := range rep.Instances {
		if searchable {
			queries = append(queries, gpuSearch(fmt.Sprintf("gi%d", i),
				fmt.Sprintf(`{%s} MetricName="%s" InstanceId="%s"`, gpuNamespace, gpuMetric, in.ID)))
			if h := hostTerms(hosts[in.ID]); h != "" {
				queries = append(queries, gpuSearch(fmt.Sprintf("gh%d", i),
					fmt.Sprintf(`{%s,host,index,name} MetricName="%s" %s`, gpuNamespace, gpuMetric, h)))
			}
		}
		queries = append(queries, cwtypes.MetricDataQuery{Id: awssdk.String(fmt.Sprintf("c%d", i)), ReturnData: awssdk.Bool(true),
			MetricStat: &cwtypes.MetricStat{Period: awssdk.Int32(period), Stat: awssdk.String("Average"),
				Metric: &cwtypes.Metric{Namespace: awssdk.String(cpuNamespace), MetricName: awssdk.String(cpuMetric),
					Dimensions: []cwtypes.Dimension{{Name: awssdk.String("InstanceId"), Value: awssdk.String(in.ID)}}}}})
	}
	series := map[string][]domain.BusySample{}
	var problems []string
	for chunk := range slices.Chunk(queries, metricQueriesPerCall) {
		pg := cloudwatch.NewGetMetricDataPaginator(p.cloudWatch(q.Region), &cloudwatch.GetMetricDataInput{
			MetricDataQueries: chunk, StartTime: awssdk.Time(from), EndTime: awssdk.Time(to),
			ScanBy: cwtypes.ScanByTimestampAscending})
		for out, err := range pages(ctx, pg) {
			if err != nil {
				return fmt.Errorf("get metric data in %s: %w", q.Region, err)
			}
			for _, r := range out.MetricDataResults {
				id := awssdk.ToString(r.Id)
				switch r.StatusCode {
				case cwtypes.StatusCodeForbidden, cwtypes.StatusCodeInternalError:
					problems = append(problems, fmt.Sprintf("%s %s", id, r.StatusCode))
				}
				n := min(len(r.Timestamps), len(r.Values))
				for k := 0; k < n; k++ {
					series[id] = append(series[id], domain.BusySample{At: r.Timestamps[k].UTC(),
						Period: time.Duration(period) * time.Second, Share: min(max(r.Values[k]/100, 0), 1)})
				}
			}
		}
	}
	// Each instance's GPU series: by InstanceId, else by host.
	gpu := make([][]domain.BusySample, len(rep.Instances))
	byID, byHost := false, false
	for i := range gpu {
		if gpu[i] = series[fmt.Sprintf("gi%d", i)]; len(gpu[i]) > 0 {
			byID = true
		} else if gpu[i] = series[fmt.Sprintf("gh%d", i)]; len(gpu[i]) > 0 {
			byHost = true
		}
	}
	rep.Source = SourceCPU
	switch {
	case byID && byHost:
		rep.Source = SourceGPU + " or host"
	case byID:
		rep.Source = SourceGPU
	case byHost:
		rep.Source = SourceGPUHost
	case !searchable:
		rep.Source = SourceCPUOld
	}
	any := false
	for i := range rep.Instances {
		in, cpu := &rep.Instances[i], series[fmt.Sprintf("c%d", i)]
		in.Busy = cpu
		if byID || byHost {
			in.Busy = gpu[i]
		}
		sort.Slice(in.Busy, func(a, b int) bool { return in.Busy[a].At.Before(in.Busy[b].At) })
		any = any || len(in.Busy) > 0
		// An unknown end is the last CPU datapoint; without one, the span's end, as a bill would have it.
		if last := len(cpu) - 1; endUnknown[in.ID] && last >= 0 {
			in.End = cpu[last].At.Add(cpu[last].Period)
		}
	}
	if !any {
		rep.Source = ""
	}
	if len(problems) > 0 {
		rep.Note = "CloudWatch answered " + strings.Join(problems, ", ")
	}
	if !any && len(problems) > 0 {
		return errors.New(rep.Note)
	}
	return nil
}

// metricPeriod: an hour for spans over six hours or starting over 63 days ago
// ("Start time greater than 63 days ago - Use a multiple of 3600 seconds"); else 5 min.
func metricPeriod(from, to, now time.Time) int32 {
	if to.Sub(from) > 6*time.Hour || now.Sub(from) > 63*24*time.Hour {
		return 3600
	}
	return 300
}

// hostTerms is the SEARCH term for an instance's host: private DNS name or its first label.
func hostTerms(dns string) string {
	if dns == "" {
		return ""
	}
	short, _, _ := strings.Cut(dns, ".")
	if short == dns {
		return fmt.Sprintf(`host="%s"`, dns)
	}
	return fmt.Sprintf(`(host="%s" OR host="%s")`, dns, short)
}

// WatchFleet counts a fleet's instances that run now and are not being
// taken back: DescribeInstances of the instances EC2 Fleet tagged with the
// fleet (aws:ec2:fleet-id, on every instance it launches), pending or
// running, less the spot instances whose request says they are being
// interrupted. An instant fleet's DescribeFleets keeps listing the
// instances it launched after EC2 took them back, so only the instances'
// own states say an interruption happened.
func (p *Provider) WatchFleet(ctx context.Context, region, id string) (int, error) {
	c := p.client(region)
	pg := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: awssdk.String("tag:" + tagFleetID), Values: []string{id}},
			{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}},
		},
		MaxResults: awssdk.Int32(1000),
	})
	n := 0
	var spot []string
	for out, err := range pages(ctx, pg) {
		if err != nil {
			return 0, explain(fmt.Errorf("aws: instances of fleet %s in %s: %w", id, region, err))
		}
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				n++
				if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot && in.InstanceId != nil {
					spot = append(spot, *in.InstanceId)
				}
			}
		}
	}
	warned, err := interrupting(ctx, c, spot)
	if err != nil {
		return n, &PartialError{Err: explain(fmt.Errorf("aws: interruption notices of fleet %s in %s: %w", id, region, err))}
	}
	return n - warned, nil
}

// interrupting counts the instances whose spot request says EC2 is taking
// them back. The two-minute notice shows only there: "the status is
// immediately set to instance-terminated-no-capacity (it is not set to
// marked-for-termination). However, the instance remains in the running
// state for 2 minutes" (EC2 User Guide, Spot request status); a stop or
// hibernation shows marked-for-stop first.
func interrupting(ctx context.Context, c ec2.DescribeSpotInstanceRequestsAPIClient, ids []string) (int, error) {
	n := 0
	for chunk := range slices.Chunk(ids, 200) { // a filter's values, at most 200
		pg := ec2.NewDescribeSpotInstanceRequestsPaginator(c, &ec2.DescribeSpotInstanceRequestsInput{
			Filters:    []ec2types.Filter{{Name: awssdk.String("instance-id"), Values: chunk}},
			MaxResults: awssdk.Int32(1000),
		})
		for out, err := range pages(ctx, pg) {
			if err != nil {
				return 0, err
			}
			for _, r := range out.SpotInstanceRequests {
				if r.Status != nil && r.Status.Code != nil && takenBack(*r.Status.Code) {
					n++
				}
			}
		}
	}
	return n, nil
}

// takenBack reports whether a spot request's status code says its
// instance is being or was stopped or terminated: the marked-for-* codes
// and the instance-stopped-* and instance-terminated-* ones.
func takenBack(code string) bool {
	return strings.HasPrefix(code, "marked-for-") || strings.HasPrefix(code, "instance-stopped-") || strings.HasPrefix(code, "instance-terminated-")
}

// PartialError is a reading that stands without what Err kept from it:
// the instances were counted, their interruption notices not read.
type PartialError struct{ Err error }

func (e *PartialError) Error() string {
	return e.Err.Error() + " (counted the running instances without it)"
}
func (e *PartialError) Unwrap() error { return e.Err }

// Partial marks the count returned beside the error as good.
func (e *PartialError) Partial() bool { return true }
