package watch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// StartsInRule waits for a booked block or reservation, or a scheduled fleet,
// to start within Within; Kind and ID narrow it.
type StartsInRule struct {
	Within config.Duration `yaml:"within"`
	Kind   string          `yaml:"kind,omitempty"`
	ID     string          `yaml:"id,omitempty"`
}

func init() {
	register(Kind{Name: "starts_in", New: func() Condition { return &StartsInRule{} }, When: onTick, Follows: "ledger", TellsEach: true})
}

// Validate implements Condition.
func (s *StartsInRule) Validate() error {
	if s.Within.D() <= 0 {
		return ruleErr("", "within %s: nothing starts within it, so the rule could never fire; want a duration above 0 such as 1h", s.Within.D())
	}
	if s.Within.D() > domain.CapacityBlockTerms.MaxDuration {
		return ruleErr("within", "%s; want a duration up to 4368h (26 weeks) such as 1h", s.Within.D())
	}
	return checkRowKind(s.Kind, " (a fleet scheduled with a start)")
}

// Describe implements Condition.
func (s *StartsInRule) Describe() string {
	what := rowsWhat("a booked block or reservation, or a scheduled fleet,", "a booked ", s.Kind, s.ID)
	return fmt.Sprintf("%s starts within %s", what, domain.FormatDuration(s.Within.D()))
}

func (s *StartsInRule) evaluate(ctx context.Context, e *Evaluator, r Rule, _ *round) {
	if e.opt.Ledger == nil {
		e.sayOnce(r, "no ledger in this run: starts_in rules are not evaluated")
		return
	}
	rows, err := e.opt.Ledger.List(ctx, ledger.StateScheduled)
	if err != nil {
		if ctx.Err() == nil {
			e.sayOnce(r, fmt.Sprintf("read the ledger: %v", err))
		}
		return
	}
	now := e.now()
	var future []string // the rows that may still be told
	var soon []ledger.Entry
	for _, row := range rows {
		// What starts at a set time: a block, a reservation, a scheduled fleet.
		if (!ledger.Booked(row.Kind) && row.Kind != ledger.KindFleet) || (s.Kind != "" && row.Kind != s.Kind) || (s.ID != "" && row.ID != s.ID && row.ProviderRef != s.ID) || !row.Start.After(now) {
			continue
		}
		future = append(future, row.ID)
		if !row.Start.After(now.Add(s.Within.D())) {
			soon = append(soon, row)
		}
	}
	e.clearNote(r)
	e.step(ctx, r, tellRows(now, r.Cooldown, future, soon, func(row ledger.Entry) string { return row.ID }, func(news []ledger.Entry) *Alert {
		var parts []string
		a := &Alert{Simulated: true}
		for _, row := range news {
			a.LedgerIDs = append(a.LedgerIDs, row.ID)
			a.Simulated = a.Simulated && e.simulated(row.Provider)
			parts = append(parts, fmt.Sprintf("%s %s %d × %s in %s starts %s (in %s)", row.Kind, row.ID, row.InstanceCount,
				present.DisplayType(row.InstanceType), present.Place(row.Region, row.Zone), row.Start.UTC().Format("Mon 2006-01-02 15:04 UTC"),
				domain.FormatDuration(row.Start.Sub(now).Round(time.Minute))))
		}
		first := news[0]
		a.Provider, a.Region, a.Zone, a.InstanceType = strp(first.Provider), strp(first.Region), strp(first.Zone), strp(first.InstanceType)
		a.Start, a.End, a.GPUCount = tp(first.Start), tp(first.End), fp(first.GPUCount)
		a.Text = strings.Join(parts, "; ") + simNote(a.Simulated)
		return a
	}))
}
