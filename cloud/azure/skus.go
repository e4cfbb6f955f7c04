package azure

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"

	"github.com/gpumarket/gpumarket/domain"
)

type gpuSize struct {
	Name string
	GPU  domain.GPUSpec
	// Zones the size exists in, restricted ones included (shown, marked).
	Zones []string
	// RestrictedZones are not offered to this subscription; RegionRestricted: none is.
	RestrictedZones  map[string]bool
	RegionRestricted bool
	// Family is the quota family, VCPUs the size's; empty from the catalog.
	Family string
	VCPUs  int
	// Reservable is CapacityReservationSupported, false when absent or from the catalog
	// (https://learn.microsoft.com/azure/virtual-machines/capacity-reservation-overview#limitations-and-restrictions).
	Reservable bool
}

// Restricted reports whether the size may not be used in the zone.
func (s gpuSize) Restricted(zone string) bool {
	return s.RegionRestricted || s.RestrictedZones[zone]
}

// catalogSizes are the catalog's GPU sizes, for when there is no account.
func catalogSizes() []gpuSize {
	var out []gpuSize
	for _, e := range domain.CatalogEntries(domain.CloudAzure) {
		out = append(out, gpuSize{Name: e.InstanceType, GPU: e.GPU, VCPUs: e.VCPUs})
	}
	return out
}

// gpuSpecFor patches ResourceSKUs from the catalog: partial A10 sizes report
// "1 GPU", and the GPU model is never named.
func gpuSpecFor(name string, reported float64) (domain.GPUSpec, bool) {
	if e, ok := domain.LookupGPU(name); ok && e.Cloud == domain.CloudAzure {
		return e.GPU, true
	}
	model, ok := domain.NormalizeGPUModel(name)
	if !ok {
		return domain.GPUSpec{}, false
	}
	return domain.GPUSpec{Model: model, Count: reported}, true
}

func (p *Provider) listGPUSizes(ctx context.Context, c *armClients, region string) ([]gpuSize, error) {
	filter := fmt.Sprintf("location eq '%s'", region)
	skus, err := listAll(ctx, c.skus.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: &filter}),
		func(p armcompute.ResourceSKUsClientListResponse) []*armcompute.ResourceSKU { return p.Value })
	if err != nil {
		return nil, fmt.Errorf("list VM sizes in %s: %w", region, err)
	}
	var out []gpuSize
	for _, sku := range skus {
		if s, ok := gpuSizeFromSKU(sku, region); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// gpuSizeFromSKU reads one entry; false for anything but a GPU VM size in the region.
func gpuSizeFromSKU(sku *armcompute.ResourceSKU, region string) (gpuSize, bool) {
	if sku == nil || sku.Name == nil || !strings.EqualFold(deref(sku.ResourceType), "virtualMachines") {
		return gpuSize{}, false
	}
	var gpus float64
	var vcpus int
	var reservable bool
	for _, c := range sku.Capabilities {
		if c == nil {
			continue
		}
		switch deref(c.Name) {
		case "GPUs":
			gpus, _ = strconv.ParseFloat(deref(c.Value), 64)
		case "vCPUs":
			vcpus, _ = strconv.Atoi(deref(c.Value))
		case "CapacityReservationSupported":
			reservable = strings.EqualFold(deref(c.Value), "true")
		}
	}
	if gpus <= 0 {
		return gpuSize{}, false
	}
	spec, ok := gpuSpecFor(*sku.Name, gpus)
	if !ok {
		return gpuSize{}, false
	}
	s := gpuSize{Name: *sku.Name, GPU: spec, Family: deref(sku.Family), VCPUs: vcpus, Reservable: reservable, RestrictedZones: map[string]bool{}}
	zones := map[string]bool{}
	inRegion := false
	for _, li := range sku.LocationInfo {
		if li == nil || !strings.EqualFold(deref(li.Location), region) {
			continue
		}
		inRegion = true
		for _, z := range li.Zones {
			if z != nil {
				zones[*z] = true
			}
		}
	}
	for _, l := range sku.Locations {
		if l != nil && strings.EqualFold(*l, region) {
			inRegion = true
		}
	}
	if !inRegion {
		return gpuSize{}, false
	}
	for _, r := range sku.Restrictions {
		if r == nil || r.Type == nil {
			continue
		}
		switch *r.Type {
		case armcompute.ResourceSKURestrictionsTypeLocation:
			for _, v := range r.Values {
				if v != nil && strings.EqualFold(*v, region) {
					s.RegionRestricted = true
				}
			}
		case armcompute.ResourceSKURestrictionsTypeZone:
			if r.RestrictionInfo == nil {
				continue
			}
			for _, z := range r.RestrictionInfo.Zones {
				if z != nil {
					s.RestrictedZones[*z] = true
					zones[*z] = true
				}
			}
		}
	}
	for z := range zones {
		s.Zones = append(s.Zones, z)
	}
	sort.Strings(s.Zones)
	return s, true
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// validateSize checks without spending that the size is offered in the region and zones.
func (p *Provider) validateSize(ctx context.Context, c *armClients, region, size string, zones []string) (gpuSize, error) {
	sizes, err := p.sizesFor(ctx, c, region)
	if err != nil {
		return gpuSize{}, err
	}
	for _, s := range sizes {
		if !strings.EqualFold(s.Name, size) {
			continue
		}
		if s.RegionRestricted {
			return s, fmt.Errorf("%s is not offered to this subscription in %s", s.Name, region)
		}
		for _, z := range zones {
			if z == "" {
				continue
			}
			if len(s.Zones) > 0 && !slices.Contains(s.Zones, z) {
				return s, fmt.Errorf("%s is not offered in %s zone %s (zones: %s)", s.Name, region, z, strings.Join(s.Zones, ", "))
			}
			if s.Restricted(z) {
				return s, fmt.Errorf("%s is not offered to this subscription in %s zone %s", s.Name, region, z)
			}
		}
		return s, nil
	}
	return gpuSize{}, fmt.Errorf("%s is not a GPU size offered in %s", size, region)
}

// Quota entries (Usage - List): regular VMs count against the family and
// "cores", spot VMs only "lowPriorityCores" (https://learn.microsoft.com/azure/quotas/spot-quota).
const (
	quotaRegional = "cores"
	quotaSpot     = "lowPriorityCores"
)

type quotaNeed struct {
	Name  string
	VCPUs int
}

// needsOf adds what n regular (or spot) VMs of a size need.
func needsOf(s gpuSize, n int, spot bool) []quotaNeed {
	if n <= 0 || s.VCPUs <= 0 {
		return nil
	}
	if spot {
		return []quotaNeed{{quotaSpot, s.VCPUs * n}}
	}
	out := []quotaNeed{{quotaRegional, s.VCPUs * n}}
	if s.Family != "" {
		out = append(out, quotaNeed{s.Family, s.VCPUs * n})
	}
	return out
}

// checkQuota refuses a need over its limit, saying what to do; a quota it cannot
// read is said unchecked, not refused.
func (p *Provider) checkQuota(ctx context.Context, c *armClients, region string, needs []quotaNeed) (string, error) {
	want := map[string]int{}
	var order []string
	for _, n := range needs {
		k := strings.ToLower(n.Name)
		if _, ok := want[k]; !ok {
			order = append(order, n.Name)
		}
		want[k] += n.VCPUs
	}
	if len(order) == 0 {
		return "quota not checked (the size has no vCPU count)", nil
	}
	usages, err := listAll(ctx, c.usage.NewListPager(region, nil), func(p armcompute.UsageClientListResponse) []*armcompute.Usage { return p.Value })
	if err != nil {
		return "quota not checked: " + firstLine(err).Error(), nil
	}
	type entry struct {
		used, limit int64
		name        string
	}
	got := map[string]entry{}
	for _, u := range usages {
		// Entries may omit name or figures (the documented minimum-set example).
		if u.Name != nil && u.Name.Value != nil && u.CurrentValue != nil && u.Limit != nil {
			got[strings.ToLower(*u.Name.Value)] = entry{used: int64(*u.CurrentValue), limit: *u.Limit, name: *u.Name.Value}
		}
	}
	var notes []string
	for _, name := range order {
		need := want[strings.ToLower(name)]
		e, ok := got[strings.ToLower(name)]
		if !ok {
			notes = append(notes, fmt.Sprintf("quota %s not checked (no usage entry)", name))
			continue
		}
		if e.used+int64(need) > e.limit {
			return "", fmt.Errorf("quota %s in %s: %d of %d vCPUs used, %d more needed: ask Azure for a quota increase", e.name, region, e.used, e.limit, need)
		}
		notes = append(notes, fmt.Sprintf("quota %s %d+%d of %d vCPUs", e.name, e.used, need, e.limit))
	}
	return strings.Join(notes, ", "), nil
}
