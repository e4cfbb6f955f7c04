package cmd

import (
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"

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

func (cl *cli) pricesCmd() *cobra.Command {
	var output string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "prices",
		Short: "One row per spot pool: current and window prices, savings, interruption, risk-adjusted $/GPU-h",
		Long: `prices prints one row per pool matching the filters, cheapest risk-adjusted
$/GPU-hour first. window_avg_usd_hour is time-weighted: each price counts for
as long as it held. Unknown values are null in JSON, empty in CSV and "-" in
the table.`,
		Example: `  gpumarket prices --gpu H100 --window 7d -o json
  gpumarket prices --provider aws --region us-east-1,us-west-2 -o csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutputTimeout(output, timeout); err != nil {
				return err
			}
			a, err := cl.newApp(cmd)
			if err != nil {
				return err
			}
			defer a.Close()
			snap, err := a.ReadySnapshot(cmd.Context(), timeout)
			if err != nil {
				return err
			}
			rows := a.priceRows(snap)
			a.banner(output)
			return writeRows(a.out, output, rows)
		},
	}
	addOutputFlag(c, &output)
	c.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the sources to answer")
	return c
}

// banner says "SIMULATED MARKET" first when the sim is a source: on stdout
// before a table, on stderr for json and csv so scripts read clean data.
func (a *app) banner(format string) {
	e := a.env
	if !a.simulated() {
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
	risk := e.risk()
	rows := make([]priceRow, 0, len(snap.Pools))
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !e.query.Matches(pv.Pool) {
			continue
		}
		rows = append(rows, priceRowOf(pv, from, to, risk))
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

func priceRowOf(pv *hub.PoolView, from, to int64, risk providers.RiskParams) priceRow {
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
			if lambda, ok := p.Interruption.Rate(); ok {
				r.EffectiveUSDGPUHour = round(risk.Effective(perGPU, lambda), 6)
			}
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
