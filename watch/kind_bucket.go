package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

// BucketRule waits for a pool's interruption bucket to rise, or reach AtLeast;
// without a zone, every zone of the region.
type BucketRule struct {
	InstanceType string `yaml:"instance_type"`
	Region       string `yaml:"region"`
	Zone         string `yaml:"zone,omitempty"`
	Provider     string `yaml:"provider,omitempty"`
	// AtLeast is a bucket label ("15-20%"): only a rise to it or above is told.
	AtLeast string `yaml:"at_least,omitempty"`
}

func init() {
	register(Kind{Name: "bucket", New: func() Condition { return &BucketRule{} }, When: onMarket, Follows: "market feed"})
}

func (b *BucketRule) pool() pool { return pool{b.InstanceType, b.Region, b.Zone, b.Provider} }

// Validate implements Condition.
func (b *BucketRule) Validate() error {
	if err := validatePool(&b.InstanceType, &b.Region, &b.Zone, &b.Provider); err != nil {
		return err
	}
	if b.AtLeast != "" {
		l, ok := domain.NormalizeBucket(b.AtLeast)
		if !ok {
			return ruleErr("at_least", "unknown bucket %q; want one of %s", b.AtLeast, strings.Join(domain.Buckets, ", "))
		}
		if domain.BucketRank(l) == 0 {
			return ruleErr("at_least", "%s is the calmest bucket: no rise ends there, so the rule could never fire; want one of %s", l, strings.Join(domain.Buckets[1:], ", "))
		}
		b.AtLeast = l
	}
	return nil
}

// Describe implements Condition.
func (b *BucketRule) Describe() string {
	s := fmt.Sprintf("interruption bucket of %s %s rises", b.InstanceType, b.pool().where())
	if b.AtLeast != "" {
		s += " to " + b.AtLeast + " or worse"
	}
	return s
}

func (b *BucketRule) check(inUse []domain.Descriptor) error { return b.pool().check(inUse) }

func (b *BucketRule) reads() marketNeed { return b.pool().reads() }

// bucketMemo is the bucket each pool was last told (or first seen) at.
type bucketMemo map[string]string

func (b *BucketRule) evaluate(ctx context.Context, e *Evaluator, r Rule, rd *round) {
	snap, p := rd.snap, b.pool()
	var pools []feed.PoolView
	matched := false
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !p.matches(pv) {
			continue
		}
		matched = true
		if fresh(snap, pv) && pv.Interruption != nil && domain.BucketRank(pv.Interruption.Bucket) < len(domain.Buckets) {
			pools = append(pools, *pv)
		}
	}
	if !matched {
		e.notInMarket(r, p)
		return
	}
	if len(pools) == 0 {
		return
	}
	e.clearNote(r)
	now := e.now()
	e.step(ctx, r, func(st *ruleState) *Alert {
		memo := bucketMemo{}
		if len(st.Memo) > 0 {
			json.Unmarshal(st.Memo, &memo)
		}
		type rise struct {
			pv       feed.PoolView
			from, to string
		}
		var rose []rise
		for _, pv := range pools {
			to := pv.Interruption.Bucket
			from, seen := memo[pv.Key]
			switch {
			case !seen || domain.BucketRank(to) < domain.BucketRank(from):
				memo[pv.Key] = to // first seen, or calmer: the new baseline
			case domain.BucketRank(to) > domain.BucketRank(from):
				if b.AtLeast != "" && domain.BucketRank(to) < domain.BucketRank(b.AtLeast) {
					memo[pv.Key] = to // a rise short of at_least: not told
				} else {
					rose = append(rose, rise{pv, from, to})
				}
			}
		}
		var a *Alert
		if len(rose) > 0 && (st.LastFired.IsZero() || now.Sub(st.LastFired) >= r.Cooldown) {
			// Told: the new buckets are the baseline; a rise in the cooldown keeps the old.
			var parts []string
			for _, x := range rose {
				memo[x.pv.Key] = x.to
				parts = append(parts, fmt.Sprintf("%s %s → %s", present.Place(x.pv.Region, x.pv.Zone), x.from, x.to))
			}
			first := rose[0]
			a = poolAlert(first.pv)
			a.Bucket, a.PreviousBucket = strp(first.to), strp(first.from)
			a.Text = fmt.Sprintf("interruption bucket of %s rose: %s%s", present.DisplayType(first.pv.InstanceType), strings.Join(parts, ", "),
				source(first.pv.Provider, first.pv.Simulated))
			st.LastFired = now
		}
		st.Memo, _ = json.Marshal(memo)
		return a
	})
}
