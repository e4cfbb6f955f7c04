package azure

import (
	"context"
	"fmt"
	"strings"
)

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
			if len(s.Zones) > 0 && !contains(s.Zones, z) {
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
	pager := c.usage.NewListPager(region, nil)
	type entry struct {
		used, limit int64
		name        string
	}
	got := map[string]entry{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return "quota not checked: " + firstLine(err).Error(), nil
		}
		for _, u := range page.Value {
			// Entries may omit name or figures (the documented minimum-set example).
			if u == nil || u.Name == nil || u.Name.Value == nil || u.CurrentValue == nil || u.Limit == nil {
				continue
			}
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

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
