package domain

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// RegionErrors are the errors, by region, of a search that other regions answered.
type RegionErrors map[string]error

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

// Join is every region's error, in order of region.
func (e RegionErrors) Join() error {
	errs := make([]error, 0, len(e))
	for _, r := range e.Regions() {
		errs = append(errs, e[r])
	}
	return errors.Join(errs...)
}
