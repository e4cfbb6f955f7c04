package domain

import (
	"fmt"
	"sort"
	"strings"
)

// RegionErrors is the error of a search that some of a provider's regions
// answered and others did not: each failed region's error, by region. A
// provider's FindOfferings returns it beside the offerings of the regions
// that answered, and the booking service (ledger.RegionErrors) keeps
// those and warns of each region. When no region answered, a provider
// returns another error: it failed.
type RegionErrors map[string]error

// Error names every failed region and its error, in region order.
func (e RegionErrors) Error() string {
	var parts []string
	for _, r := range e.Regions() {
		parts = append(parts, fmt.Sprintf("%s: %v", r, e[r]))
	}
	return strings.Join(parts, "; ")
}

// RegionErrors returns the errors by region.
func (e RegionErrors) RegionErrors() map[string]error { return e }

// Regions lists the failed regions, sorted.
func (e RegionErrors) Regions() []string {
	rs := make([]string, 0, len(e))
	for r := range e {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	return rs
}
