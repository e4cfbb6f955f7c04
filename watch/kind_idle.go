package watch

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// IdleRule waits for a running row to spend over AbovePct % of its cost so far
// on idle GPU-hours, once it has run After; Kind and ID narrow it.
type IdleRule struct {
	AbovePct float64          `yaml:"above_pct"`
	After    *config.Duration `yaml:"after,omitempty"`
	Kind     string           `yaml:"kind,omitempty"`
	ID       string           `yaml:"id,omitempty"`
}

func init() {
	register(Kind{Name: "idle", New: func() Condition { return &IdleRule{} }, When: onTick, Follows: "usage report"})
}

// DefaultIdleAfter: booting instances and a job loading data are idle, and noise.
const DefaultIdleAfter = 30 * time.Minute

// AfterOrDefault is how long a row runs before the rule judges it.
func (i *IdleRule) AfterOrDefault() time.Duration {
	if i.After != nil {
		return i.After.D()
	}
	return DefaultIdleAfter
}

// Validate implements Condition.
func (i *IdleRule) Validate() error {
	switch {
	case badFloat(i.AbovePct) || i.AbovePct < 0:
		return ruleErr("above_pct", "%v; want a percentage from 0 to 99 such as 40 (the share of a row's cost so far paid for idle GPU-hours)", i.AbovePct)
	case i.AbovePct >= 100:
		return ruleErr("above_pct", "%v: no idle share is above it, so the rule could never fire; want a percentage from 0 to 99 such as 40", i.AbovePct)
	case i.After != nil && (i.After.D() < 0 || i.After.D() > 7*24*time.Hour):
		return ruleErr("after", "%s; want a duration from 0s to 168h such as 30m (default %s)", i.After.D(), DefaultIdleAfter)
	}
	return checkRowKind(i.Kind, "")
}

// Describe implements Condition.
func (i *IdleRule) Describe() string {
	what := rowsWhat("a running fleet, block or reservation", "a running ", i.Kind, i.ID)
	return fmt.Sprintf("%s idle more than %g%% of its cost (after %s running)", what, i.AbovePct, domain.FormatDuration(i.AfterOrDefault()))
}

// evaluate tells each row whose idle share passes the figure, again only after
// it fell back; a row of unknown share keeps its place.
func (i *IdleRule) evaluate(ctx context.Context, e *Evaluator, r Rule, rd *round) {
	u := rd.usage(ctx, e)
	if u.err != nil {
		if u.err == errNoUsage {
			e.sayOnce(r, u.err.Error())
		} else if ctx.Err() == nil {
			e.sayOnce(r, fmt.Sprintf("usage report: %v", u.err))
		}
		return
	}
	now := e.now()
	var over []ledger.UsageRow
	var held []string // rows above now, or unknown for now
	for _, row := range u.rep.Rows {
		if !row.Active || (i.Kind != "" && row.Kind != i.Kind) || (i.ID != "" && row.ID != i.ID) || now.Sub(row.Start) < i.AfterOrDefault() {
			continue
		}
		share := row.IdleShare()
		switch {
		case math.IsNaN(share):
			held = append(held, row.ID)
		case share*100 > i.AbovePct:
			held = append(held, row.ID)
			over = append(over, row)
		}
	}
	if note := i.rowNote(u.rep); note != "" {
		e.sayOnce(r, note)
	} else {
		e.clearNote(r)
	}
	e.step(ctx, r, tellRows(now, r.Cooldown, held, over, func(row ledger.UsageRow) string { return row.ID },
		func(news []ledger.UsageRow) *Alert { return i.alert(e, news) }))
}

// rowNote says why a rule on one row cannot judge it: not in the report, or not running.
func (i *IdleRule) rowNote(rep ledger.UsageReport) string {
	if i.ID == "" {
		return ""
	}
	for _, row := range rep.Rows {
		if row.ID == i.ID {
			if !row.Active {
				return fmt.Sprintf("ledger row %s is %s, not running", i.ID, row.State)
			}
			return ""
		}
	}
	return fmt.Sprintf("ledger row %s is not in the usage report: no such row, or it has not run in the last %s", i.ID, domain.FormatWindow(rep.Now.Sub(rep.Since)))
}

// alert tells the rows newly above the figure, the idlest first.
func (i *IdleRule) alert(e *Evaluator, news []ledger.UsageRow) *Alert {
	sort.SliceStable(news, func(x, y int) bool { return news[x].IdleShare() > news[y].IdleShare() })
	var parts []string
	a := &Alert{Simulated: true}
	for _, row := range news {
		a.LedgerIDs = append(a.LedgerIDs, row.ID)
		a.Simulated = a.Simulated && e.simulated(row.Provider)
		parts = append(parts, fmt.Sprintf("%s %s %s GPU %s in %s is %.0f%% idle: $%s of the $%s its %s so far cost went to idle GPU-hours",
			row.Kind, row.ID, present.GPUCount(row.GPUs), present.DisplayType(row.InstanceType), present.Place(row.Region, row.Zone),
			row.IdleShare()*100, present.Money(row.IdleUSD), present.Money(row.UsedUSD()), hoursRun(row.End.Sub(row.Start))))
	}
	top := news[0]
	a.Provider, a.Region, a.Zone, a.InstanceType = strp(top.Provider), strp(top.Region), strp(top.Zone), strp(top.InstanceType)
	a.GPUCount, a.TotalUSD, a.IdleUSD = present.Known(top.GPUs), present.Known(top.UsedUSD()), present.Known(top.IdleUSD)
	a.IdlePct, a.ThresholdPct = fp(top.IdleShare()*100), fp(i.AbovePct)
	a.Text = strings.Join(parts, "; ") + fmt.Sprintf(" (above %g%%)", i.AbovePct) + simNote(a.Simulated)
	return a
}

// hoursRun says how long a row has run, for an alert: "30 h", "45 min".
func hoursRun(d time.Duration) string {
	if d < time.Hour {
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return fmt.Sprintf("%.0f h", d.Hours())
}
