package tui

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/hub"
)

// column ids, in display order.
const (
	colGPU = iota
	colInstance
	colLocation
	colCloud
	colSpot
	colPerGPU
	colSavings
	colInterrupt
	colEffective
	colTrend
	numCols
)

type column struct {
	title string
	width int
	// prio orders the columns to keep as the terminal narrows: 0 first.
	prio  int
	right bool
}

var columns = [numCols]column{
	colGPU:       {"GPU", 12, 0, false},
	colInstance:  {"INSTANCE", 17, 5, false},
	colLocation:  {"REGION/ZONE", 16, 2, false},
	colCloud:     {"CLOUD", 9, 9, false},
	colSpot:      {"SPOT $/H", 8, 6, true},
	colPerGPU:    {"$/GPU-H", 8, 3, true},
	colSavings:   {"SAVE", 4, 8, true},
	colInterrupt: {"INTR", 6, 4, false},
	colEffective: {"EFF $/GPU-H", 12, 1, true},
	colTrend:     {"TREND", 12, 7, false},
}

// sparkCols is the width of the trend sparkline; fixed so it is computed
// once per change of a pool, not per frame.
const sparkCols = 12

// gutter is the cursor, mark and restricted columns before the first
// cell. The cursor has a glyph of its own so it shows without colour too.
const gutter = 3

// row is one pool with its derived figures, recomputed only when the pool
// changes or the window does.
type row struct {
	pv        *hub.PoolView // into the current snapshot; read-only
	changed   uint64
	windowSeq int
	seen      uint64

	spot, perGPU, savings, effective float64 // NaN when unknown
	bucketRank                       int
	cells                            [numCols]string
	search                           string // lowercased text the `/` filter matches
	moving                           bool   // scratch for resort
}

func (r *row) compute(c *common, from, to int64) {
	pv := r.pv
	r.changed, r.windowSeq = pv.Changed, c.windowSeq
	nan := math.NaN()
	r.spot, r.perGPU, r.savings, r.effective = nan, nan, nan, nan
	if _, usd, ok := pv.History.Last(); ok {
		r.spot = usd
		r.perGPU = providers.PerGPUHour(usd, pv.GPU.Count)
		if pv.OnDemandUSDHour != nil {
			r.savings = providers.SavingsPct(usd, *pv.OnDemandUSDHour)
		}
		if !math.IsNaN(r.perGPU) {
			r.effective = c.eff.Effective(pv.Pool, usd)
		}
	}
	bucket := "-"
	r.bucketRank = len(providers.Buckets)
	if pv.Interruption != nil && pv.Interruption.Bucket != "" {
		bucket = pv.Interruption.Bucket
		r.bucketRank = providers.BucketRank(bucket)
	}
	gpu := pv.GPU.Model
	if gpu == "" {
		gpu = "?"
	}
	if pv.GPU.Count > 0 {
		gpu += "×" + gpuCount(pv.GPU.Count)
	} else {
		gpu += "×?" // count unknown, not zero
	}
	if pv.GPU.MemoryGiB > 0 {
		gpu += fmt.Sprintf(" %.0fG", pv.GPU.MemoryGiB)
	}
	loc := place(pv.Region, pv.Zone)
	savings := "-"
	if !math.IsNaN(r.savings) {
		savings = fmt.Sprintf("%.0f%%", r.savings)
	}
	_, maxs := pv.History.Downsample(from, to, sparkCols)
	r.cells = [numCols]string{
		colGPU:       gpu,
		colInstance:  displayType(pv.InstanceType),
		colLocation:  loc,
		colCloud:     cloudCell(pv.Pool),
		colSpot:      money(r.spot),
		colPerGPU:    money(r.perGPU),
		colSavings:   savings,
		colInterrupt: bucket,
		colEffective: money(r.effective),
		colTrend:     sparkline(maxs),
	}
	r.search = strings.ToLower(strings.Join([]string{pv.GPU.Model, pv.InstanceType, pv.Region, pv.Zone, pv.Provider, string(pv.Cloud)}, " "))
}

// cloudCell names the pool's cloud, and the source when it is not the
// cloud itself: a simulated pool reads "sim:aws" on every row, so it is
// never taken for a real one when sources are mixed.
func cloudCell(p providers.Pool) string {
	if p.Provider == "" || p.Provider == string(p.Cloud) {
		return string(p.Cloud)
	}
	return p.Provider + ":" + string(p.Cloud)
}

// place names a region and zone as one: AWS zones carry their region
// ("us-east-1a"), Azure's do not ("1" is westeurope/1, not a place).
func place(region, zone string) string {
	switch {
	case zone == "":
		return region
	case strings.HasPrefix(zone, region):
		return zone
	}
	return region + "/" + zone
}
