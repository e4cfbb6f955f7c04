package gcp

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/compute/v1"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// calendarTypes: Google sells calendar mode for its 8-GPU accelerator-optimised machines.
var calendarTypes = map[string]bool{
	"a3-highgpu-8g": true, "a3-megagpu-8g": true, "a3-ultragpu-8g": true, "a2-ultragpu-8g": true, "a2-highgpu-8g": true,
}

// calendarNote is what a buyer must know of calendar mode.
const calendarNote = "Google calendar-mode future reservation: held for the whole window and billed from its start to its end, used or not; its VMs end with it. " +
	"Priced here at on-demand rates, the most it costs (Google bills calendar mode at Dynamic Workload Scheduler prices, at or below them)."

const specKey = "gpumarket"

// FindOfferings asks each region's calendar-mode advice for the GPU's machine
// types: each deliverable window is an offering; failed regions come back as
// domain.RegionErrors.
func (p *Provider) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	gpu, err := checkQuery(q, p.now())
	if err != nil {
		return nil, err
	}
	regions, all := regionsOf(q.Regions)
	if all {
		regions = p.opt.Regions
		if len(regions) == 0 {
			regions = DefaultRegions
		}
	}
	if len(regions) == 0 {
		return nil, nil
	}
	ms, err := p.machines(ctx)
	if err != nil {
		return nil, err
	}
	book, err := p.priceBook(ctx)
	if err != nil {
		return nil, err
	}
	type ask struct {
		region string
		m      machine
		n      int64
	}
	var asks []ask
	seen := map[string]bool{}
	for _, r := range regions {
		for _, m := range ms {
			if regionOf(m.Zone) != r || !calendarTypes[m.Type] || m.GPU.Model != gpu || seen[r+"/"+m.Type] {
				continue
			}
			seen[r+"/"+m.Type] = true
			n := int64(q.Instances)
			if n == 0 {
				n = int64(math.Ceil(float64(q.GPUs) / m.GPU.Count))
			}
			asks = append(asks, ask{r, m, n})
		}
	}
	var (
		mu   sync.Mutex
		out  []domain.Offering
		errs = domain.RegionErrors{}
	)
	from, to := startRange(q, p.now())
	fanout.Each(len(asks), 4, func(i int) {
		a := asks[i]
		offs, err := p.advise(ctx, a.region, a.m, a.n, from, to, q.Duration)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs[a.region] = err
			return
		}
		for _, o := range offs {
			if (!o.FlexLength || q.FlexDuration > 0) && priced(book, a.m, &o) {
				out = append(out, o)
			}
		}
	})
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := out[i].USDPerGPUHour(), out[j].USDPerGPUHour(); a != b {
			return a < b
		}
		return out[i].Start.Before(out[j].Start)
	})
	if len(errs) > 0 {
		if len(out) == 0 && len(errs) == len(regions) {
			return nil, errs
		}
		return out, errs
	}
	return out, nil
}

// checkQuery refuses what calendar mode does not sell and returns the canonical GPU.
func checkQuery(q domain.OfferingQuery, now time.Time) (string, error) {
	gpu, ok := domain.NormalizeGPUModel(q.GPU)
	if !ok {
		return "", domain.InvalidQueryf("GPU %q: want one of %s", q.GPU, strings.Join(domain.GPUModels, ", "))
	}
	if err := domain.CalendarTerms.ValidDuration(q.Duration); err != nil {
		return "", domain.InvalidQueryf("%v", err)
	}
	if q.Instances < 0 || q.GPUs < 0 || q.Instances == 0 && q.GPUs == 0 {
		return "", domain.InvalidQueryf("count: want a positive number of instances or GPUs")
	}
	if limit := now.Add(domain.CalendarTerms.MaxLead); q.StartAfter.After(limit) {
		return "", domain.InvalidQueryf("start after %s: calendar-mode reservations start within 8 weeks (by %s)",
			q.StartAfter.UTC().Format(time.RFC3339), limit.UTC().Format(time.RFC3339))
	}
	return gpu, nil
}

func startRange(q domain.OfferingQuery, now time.Time) (from, to time.Time) {
	from, to = q.StartAfter.UTC(), q.StartBefore.UTC()
	if from.Before(now) {
		from = now.UTC()
	}
	if limit := now.Add(domain.CalendarTerms.MaxLead).UTC(); to.IsZero() || to.After(limit) {
		to = limit
	}
	return from, to
}

// advise asks for windows of n machines lasting d starting in [from, to], in
// any zone of region not denied.
func (p *Provider) advise(ctx context.Context, region string, m machine, n int64, from, to time.Time, d time.Duration, deny ...string) ([]domain.Offering, error) {
	secs := strconv.FormatInt(int64(d/time.Second), 10) + "s"
	spec := &compute.FutureResourcesSpec{
		DeploymentType: "DENSE",
		TargetResources: &compute.FutureResourcesSpecTargetResources{
			SpecificSkuResources: &compute.FutureResourcesSpecSpecificSKUResources{MachineType: m.Base, InstanceCount: n},
		},
		TimeRangeSpec: &compute.FlexibleTimeRange{
			StartTimeNotEarlierThan: from.Format(time.RFC3339), StartTimeNotLaterThan: to.Format(time.RFC3339),
			MinDuration: secs, MaxDuration: secs,
		},
	}
	if len(deny) > 0 {
		locs := map[string]compute.FutureResourcesSpecLocationPolicyLocation{}
		for _, z := range deny {
			locs["zones/"+z] = compute.FutureResourcesSpecLocationPolicyLocation{Preference: "DENY"}
		}
		spec.LocationPolicy = &compute.FutureResourcesSpecLocationPolicy{Locations: locs}
	}
	req := &compute.CalendarModeAdviceRequest{FutureResourcesSpecs: map[string]compute.FutureResourcesSpec{specKey: *spec}}
	resp, err := p.compute.Advice.CalendarMode(p.project, region, req).Context(ctx).Do()
	if err != nil {
		return nil, apiErr("calendar-mode advice in "+region, err)
	}
	var out []domain.Offering
	for _, rec := range resp.Recommendations {
		r, ok := rec.RecommendationsPerSpec[specKey]
		if !ok || r.Location == "" || (r.RecommendationType != "" && r.RecommendationType != "FUTURE_RESERVATION") {
			continue
		}
		z := path.Base(r.Location)
		start, err1 := time.Parse(time.RFC3339, r.StartTime)
		end, err2 := time.Parse(time.RFC3339, r.EndTime)
		if err1 != nil || err2 != nil || !end.After(start) || regionOf(z) != region || slices.Contains(deny, z) {
			continue
		}
		o := domain.Offering{Provider: Name, Cloud: domain.CloudGCP, Region: region, Zone: z, InstanceType: m.Type, GPU: m.GPU,
			InstanceCount: int(n), Start: start.UTC(), End: end.UTC(), Currency: "USD", Kind: domain.KindCalendar, Note: calendarNote}
		o.FlexLength = end.Sub(start) != d
		out = append(out, o)
	}
	return out, nil
}

// priced sets the window's on-demand total, rate and id; false if the catalog lacks the price.
func priced(book *priceBook, m machine, o *domain.Offering) bool {
	rate := book.price(m, false)
	if math.IsNaN(rate) {
		return false
	}
	o.HourlyUSD = rate * float64(o.InstanceCount)
	o.UpfrontUSD = math.Round(o.HourlyUSD*o.End.Sub(o.Start).Hours()*100) / 100
	o.ID = offeringID(*o)
	return true
}

// offeringID names an offering by its terms: Google's windows have no lasting id.
func offeringID(o domain.Offering) string {
	return fmt.Sprintf("gcpcal-%016x", fnv64(fmt.Sprint(o.Zone, o.InstanceType, o.InstanceCount, o.Start.Unix(), o.End.Unix())))
}
