package cmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpumarket/gpumarket/planner"
	"github.com/gpumarket/gpumarket/providers"
	"github.com/gpumarket/gpumarket/providers/hub"
)

// defaultTimeout bounds how long prices and history wait for the sources'
// first answer: an AWS back-fill of 90 days in many regions takes a while.
const defaultTimeout = 2 * time.Minute

// priceRow is one pool in `gpumarket prices`, with DESIGN.md's fields.
// Unknown values are nil (null in JSON), never made up.
type priceRow struct {
	Provider            string    `json:"provider"`
	Cloud               string    `json:"cloud" table:"-"`
	Region              string    `json:"region"`
	Zone                *string   `json:"zone"`
	InstanceType        string    `json:"instance_type"`
	GPUModel            *string   `json:"gpu_model"`
	GPUCount            *float64  `json:"gpu_count" table:"%g"`
	GPUMemoryGiB        *float64  `json:"gpu_memory_gib" table:"-"`
	SpotUSDHour         *float64  `json:"spot_usd_hour" table:"%.4f"`
	SpotUSDGPUHour      *float64  `json:"spot_usd_gpu_hour" table:"%.4f"`
	OnDemandUSDHour     *float64  `json:"on_demand_usd_hour" table:"%.4f"`
	SavingsPct          *float64  `json:"savings_pct" table:"%.1f"`
	WindowMinUSDHour    *float64  `json:"window_min_usd_hour" table:"%.4f"`
	WindowAvgUSDHour    *float64  `json:"window_avg_usd_hour" table:"%.4f"`
	WindowMaxUSDHour    *float64  `json:"window_max_usd_hour" table:"%.4f"`
	Interruption        *string   `json:"interruption"`
	PlacementScore      *int      `json:"placement_score"`
	EffectiveUSDGPUHour *float64  `json:"effective_usd_gpu_hour" table:"%.4f"`
	ObservedAt          time.Time `json:"observed_at" table:"-"`

	key string
}

func newPricesCmd() *cobra.Command {
	var output string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "prices",
		Short: "One row per spot pool: current and window prices, savings, interruption, EFF $/GPU-h",
		Long: `prices prints one row per pool matching the filters, cheapest effective
$/GPU-hour first. effective_usd_gpu_hour is what the default job (config
plan.gpus GPUs for plan.hours hours, default 8 × 24 h, with plan.checkpoint and
plan.changeover) pays per useful GPU-hour on the pool's spot capacity alone:
its $/GPU-h times the paid hours per hour of work, given how often the pool is
interrupted (the planner's risk model: interruptions per hour, from the
simulated market's own process, else the GPU class's prior scaled by the
interruption bucket or Azure eviction rate). window_avg_usd_hour is
time-weighted: each price counts for as long as it held. Unknown values are
null in JSON, empty in CSV and "-" in the table.`,
		Example: `  gpumarket prices --gpu H100 --window 7d -o json
  gpumarket prices --provider aws --region us-east-1,us-west-2 -o csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputTimeout(output, timeout); err != nil {
				return err
			}
			e, err := setup(cmd)
			if err != nil {
				return err
			}
			snap, err := e.readySnapshot(cmd.Context(), timeout)
			if err != nil {
				return err
			}
			rows := e.priceRows(snap)
			e.banner(output)
			return writeRows(e.out, output, rows)
		},
	}
	addOutputFlag(c, &output)
	c.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the sources to answer")
	return c
}

// readySnapshot runs a hub over the env's providers until every source
// has finished its first back-fill, warns on stderr of every failed region
// and returns the snapshot. It fails when no region answered at all.
func (e *env) readySnapshot(parent context.Context, timeout time.Duration) (*hub.Snapshot, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	ps, err := e.providers(ctx)
	if err != nil {
		return nil, err
	}
	return e.snapshotOf(ctx, ps, timeout)
}

// snapshotOf is readySnapshot over given sources.
func (e *env) snapshotOf(parent context.Context, ps []providers.Provider, timeout time.Duration) (*hub.Snapshot, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	h := e.newHub(ps)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	wctx, wcancel := context.WithTimeout(ctx, timeout)
	defer wcancel()
	snap, err := h.WaitReady(wctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("the sources did not finish loading within %s (raise --timeout)", timeout)
		}
		return nil, fmt.Errorf("wait for the sources: %w", err)
	}
	if !e.reportHealth(snap) {
		return nil, errors.New("no source or region answered")
	}
	return snap, nil
}

// reportHealth writes each source's status note (which advisor data AWS
// shows and how old it is; that Azure shows list prices only without an
// account), then one warning line per failed source or region, and
// reports whether anything answered. The sim's note is the banner's.
func (e *env) reportHealth(snap *hub.Snapshot) bool {
	answered := false
	// A region that sent prices and then failed a part (Azure's history
	// while its list prices answered, say) has answered: its rows are
	// printed, with its warning.
	priced := map[[2]string]bool{}
	for i := range snap.Pools {
		if pv := &snap.Pools[i]; pv.History.Len() > 0 {
			priced[[2]string{pv.Provider, pv.Region}] = true
		}
	}
	for _, src := range snap.Sources {
		if src.Note != "" && src.Provider != "sim" {
			fmt.Fprintf(e.errOut, "gpumarket: %s: %s\n", src.Provider, unprefixed(src.Provider, src.Note))
		}
		if src.Err != "" {
			fmt.Fprintf(e.errOut, "gpumarket: warning: %s: %s\n", src.Provider, unprefixed(src.Provider, src.Err))
		}
		okRegions := 0
		for _, r := range src.Regions {
			if r.Err != "" {
				fmt.Fprintf(e.errOut, "gpumarket: warning: %s %s: %s\n", src.Provider, r.Region, unprefixed(src.Provider, r.Err))
				if priced[[2]string{src.Provider, r.Region}] {
					answered = true
				}
				continue
			}
			okRegions++
		}
		// A source that reports no regions answered as a whole when its
		// fetch succeeded.
		if okRegions > 0 || (len(src.Regions) == 0 && src.State == hub.StateReady && src.Err == "") {
			answered = true
		}
	}
	return answered
}

// unprefixed is a source's message on one line without the "aws: " its
// errors start with, since the warning line names the source already.
func unprefixed(provider, msg string) string {
	return strings.TrimPrefix(oneLine(msg), provider+": ")
}

// banner says "SIMULATED MARKET" first when the sim is a source: on stdout
// before a table, on stderr for json and csv so scripts read clean data.
func (e *env) banner(format string) {
	if !e.simulated() {
		return
	}
	w := e.errOut
	if format == formatTable {
		w = e.out
	}
	fmt.Fprintln(w, simBanner)
}

// priceRows makes one row per pool of the snapshot that matches the query,
// sorted by effective $/GPU-hour (unknown last), then by pool key.
func (e *env) priceRows(snap *hub.Snapshot) []priceRow {
	from, to := e.windowOf(snap)
	basis := e.effBasis()
	rows := make([]priceRow, 0, len(snap.Pools))
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !e.query.Matches(pv.Pool) {
			continue
		}
		rows = append(rows, priceRowOf(pv, from, to, basis))
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].EffectiveUSDGPUHour, rows[j].EffectiveUSDGPUHour
		switch {
		case a != nil && b != nil && *a != *b:
			return *a < *b
		case (a == nil) != (b == nil):
			return a != nil
		}
		return rows[i].key < rows[j].key
	})
	return rows
}

func priceRowOf(pv *hub.PoolView, from, to int64, basis planner.Basis) priceRow {
	p := pv.Pool
	r := priceRow{
		Provider:       p.Provider,
		Cloud:          string(p.Cloud),
		Region:         p.Region,
		Zone:           optString(p.Zone),
		InstanceType:   p.InstanceType,
		GPUModel:       optString(p.GPU.Model),
		PlacementScore: p.PlacementScore,
		key:            pv.Key,
	}
	if p.GPU.Count > 0 {
		r.GPUCount = providers.Float(p.GPU.Count)
	}
	if p.GPU.MemoryGiB > 0 {
		r.GPUMemoryGiB = providers.Float(p.GPU.MemoryGiB)
	}
	if p.OnDemandUSDHour != nil && *p.OnDemandUSDHour > 0 {
		r.OnDemandUSDHour = providers.Float(*p.OnDemandUSDHour)
	}
	if p.Interruption != nil && p.Interruption.Bucket != "" {
		r.Interruption = optString(p.Interruption.Bucket)
	}
	at, spot, ok := pv.History.Last()
	if ok {
		r.ObservedAt = time.Unix(at, 0).UTC()
		r.SpotUSDHour = providers.Float(spot)
		if p.GPU.Count > 0 {
			perGPU := providers.PerGPUHour(spot, p.GPU.Count)
			r.SpotUSDGPUHour = round(perGPU, 6)
			r.EffectiveUSDGPUHour = round(basis.Effective(p, spot), 6)
		}
		if r.OnDemandUSDHour != nil {
			r.SavingsPct = round(providers.SavingsPct(spot, *r.OnDemandUSDHour), 2)
		}
	}
	if st := pv.History.Stats(from, to); st.OK {
		r.WindowMinUSDHour = providers.Float(st.Min)
		r.WindowAvgUSDHour = round(st.Avg, 6)
		r.WindowMaxUSDHour = providers.Float(st.Max)
	}
	return r
}

// round rounds a derived figure for print (a quotient has no more
// meaningful digits than its inputs); NaN and ±Inf are unknown: nil.
func round(v float64, digits int) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	p := math.Pow(10, float64(digits))
	return providers.Float(math.Round(v*p) / p)
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
