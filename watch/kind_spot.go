package watch

import (
	"context"
	"fmt"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

// SpotRule waits for a pool's spot price to cross below BelowUSDHour (or above
// AboveUSDHour); without a zone, the cheapest (or dearest) zone counts.
type SpotRule struct {
	InstanceType string   `yaml:"instance_type"`
	Region       string   `yaml:"region"`
	Zone         string   `yaml:"zone,omitempty"`
	Provider     string   `yaml:"provider,omitempty"`
	BelowUSDHour *float64 `yaml:"below_usd_hour,omitempty"`
	AboveUSDHour *float64 `yaml:"above_usd_hour,omitempty"`
}

func init() {
	register(Kind{Name: "spot", New: func() Condition { return &SpotRule{} }, When: onMarket, Follows: "market feed"})
}

func (s *SpotRule) pool() pool { return pool{s.InstanceType, s.Region, s.Zone, s.Provider} }

// Validate implements Condition.
func (s *SpotRule) Validate() error {
	if err := validatePool(&s.InstanceType, &s.Region, &s.Zone, &s.Provider); err != nil {
		return err
	}
	return oneLimit(limit{"below_usd_hour", s.BelowUSDHour, ": no price is below it, so the rule could never fire; want a price per instance-hour above 0 such as 20"},
		limit{"above_usd_hour", s.AboveUSDHour, "; want a price per instance-hour above 0 such as 40"},
		"below_usd_hour or above_usd_hour, a spot price per instance-hour such as 20", " (make two rules to watch both)")
}

// Describe implements Condition.
func (s *SpotRule) Describe() string {
	if s.BelowUSDHour != nil {
		return fmt.Sprintf("spot %s %s below $%g/h", s.InstanceType, s.pool().where(), *s.BelowUSDHour)
	}
	return fmt.Sprintf("spot %s %s above $%g/h", s.InstanceType, s.pool().where(), *s.AboveUSDHour)
}

func (s *SpotRule) check(inUse []domain.Descriptor) error { return s.pool().check(inUse) }

func (s *SpotRule) reads() marketNeed { return s.pool().reads() }

func (s *SpotRule) evaluate(ctx context.Context, e *Evaluator, r Rule, rd *round) {
	snap, p := rd.snap, s.pool()
	below := s.BelowUSDHour != nil
	var best *feed.PoolView
	bestUSD, matched := 0.0, false
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !p.matches(pv) {
			continue
		}
		matched = true
		if !fresh(snap, pv) {
			continue
		}
		_, usd, ok := pv.History.Last()
		if !ok {
			continue
		}
		if best == nil || (below && usd < bestUSD) || (!below && usd > bestUSD) {
			best, bestUSD = pv, usd
		}
	}
	if !matched {
		e.notInMarket(r, p)
		return
	}
	if best == nil {
		return // no current price: nothing to decide on
	}
	e.clearNote(r)
	limit, word := 0.0, ""
	var cond bool
	if below {
		limit, word, cond = *s.BelowUSDHour, "below", bestUSD < *s.BelowUSDHour
	} else {
		limit, word, cond = *s.AboveUSDHour, "above", bestUSD > *s.AboveUSDHour
	}
	pv := *best
	e.step(ctx, r, crossing(cond, e.now(), r.Cooldown, func() *Alert {
		a := poolAlert(pv)
		a.USDHour, a.ThresholdUSD = fp(bestUSD), fp(limit)
		if pv.GPU.Count > 0 {
			a.USDGPUHour = fp(bestUSD / pv.GPU.Count)
		}
		a.Text = fmt.Sprintf("spot %s in %s is $%s/h, %s $%s/h%s", present.DisplayType(pv.InstanceType), present.Place(pv.Region, pv.Zone),
			present.Money(bestUSD), word, present.Money(limit), source(pv.Provider, pv.Simulated))
		return a
	}))
}
