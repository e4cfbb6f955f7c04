package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/present"
)

// matchPool reports whether a pool is one a spot or bucket rule watches.
func matchPool(pv *feed.PoolView, it, region, zone, provider string) bool {
	return strings.EqualFold(pv.InstanceType, it) && pv.Region == region &&
		(zone == "" || pv.Zone == zone) && (provider == "" || pv.Provider == provider) && !pv.Restricted
}

// fresh reports whether the pool's data is current: its source is not
// stale and its region's last fetch did not fail. A crossing is never
// decided on old data, either way.
func fresh(snap *feed.Snapshot, pv *feed.PoolView) bool {
	src, ok := snap.Source(pv.Provider)
	if !ok || src.Stale {
		return false
	}
	for _, r := range src.Regions {
		if r.Region == pv.Region {
			return r.Err == ""
		}
	}
	return true
}

// notInMarket says once that no pool of the snapshot matches a rule: it
// cannot fire while that is so (a type the region does not have, a
// filter of this run that leaves it out).
func (e *Evaluator) notInMarket(r Rule, it, region, zone string) {
	where := region
	if zone != "" {
		where = zone
	}
	e.sayOnce(r, fmt.Sprintf("no pool of %s in %s is in this run's market (its filters, or the region has none); the rule cannot fire until one is", it, where))
}

func (e *Evaluator) evalSpot(ctx context.Context, r Rule, snap *feed.Snapshot) {
	s := r.Spot
	below := s.BelowUSDHour != nil
	var best *feed.PoolView
	bestUSD, matched := 0.0, false
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !matchPool(pv, s.InstanceType, s.Region, s.Zone, s.Provider) {
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
		e.notInMarket(r, s.InstanceType, s.Region, s.Zone)
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

// poolAlert is an alert about a pool.
func poolAlert(pv feed.PoolView) *Alert {
	return &Alert{Simulated: pv.Simulated, Provider: strp(pv.Provider), Region: strp(pv.Region), Zone: strp(pv.Zone),
		InstanceType: strp(pv.InstanceType), GPUModel: strp(pv.GPU.Model), GPUCount: fp(pv.GPU.Count)}
}

// bucketMemo is a bucket rule's memory: the bucket each pool was last
// told at (or first seen at), by pool key.
type bucketMemo map[string]string

func (e *Evaluator) evalBucket(ctx context.Context, r Rule, snap *feed.Snapshot) {
	b := r.Bucket
	var pools []feed.PoolView
	matched := false
	for i := range snap.Pools {
		pv := &snap.Pools[i]
		if !matchPool(pv, b.InstanceType, b.Region, b.Zone, b.Provider) {
			continue
		}
		matched = true
		if fresh(snap, pv) && pv.Interruption != nil && domain.BucketRank(pv.Interruption.Bucket) < len(domain.Buckets) {
			pools = append(pools, *pv)
		}
	}
	if !matched {
		e.notInMarket(r, b.InstanceType, b.Region, b.Zone)
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
			// Told: the new buckets are the baseline. A rise in the
			// cooldown keeps the old one, so it is told when it ends.
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

// search is one block search's answer, shared by the rules that ask the
// same in one round.
type search struct {
	res ledger.Search
	err error
}

func (e *Evaluator) evalBlock(ctx context.Context, r Rule, searched map[string]search) {
	if e.opt.Offerings == nil {
		e.sayOnce(r, "no booking service in this run: block rules are not evaluated")
		return
	}
	b := r.Block
	after, before, _ := b.Window()
	now := e.now()
	if !before.IsZero() && before.Before(now) {
		e.sayOnce(r, fmt.Sprintf("its start range ended at %s: it will not fire again (remove it)", before.UTC().Format(time.RFC3339)))
		return
	}
	if lead := e.opt.MaxLead; lead > 0 && !after.IsZero() && after.After(now.Add(lead)) {
		e.sayOnce(r, fmt.Sprintf("blocks starting from %s are not on sale yet (they are sold up to %s ahead): searching from %s",
			after.UTC().Format("2006-01-02"), domain.FormatWindow(lead), after.Add(-lead).UTC().Format("2006-01-02 15:04 UTC")))
		return
	}
	q := domain.OfferingQuery{GPU: b.GPU, GPUs: b.GPUs, Instances: b.Instances, Duration: time.Duration(b.Hours) * time.Hour,
		StartAfter: after, StartBefore: before, Regions: b.Regions}
	key := fmt.Sprintf("%s|%d|%d|%s|%d|%d|%s", q.GPU, q.GPUs, q.Instances, q.Duration, q.StartAfter.Unix(), q.StartBefore.Unix(), strings.Join(q.Regions, ","))
	s, ok := searched[key]
	if !ok {
		sctx, cancel := context.WithTimeout(ctx, e.opt.SearchTimeout)
		s.res, s.err = e.opt.Offerings.FindOfferings(sctx, q)
		cancel()
		e.searches.Add(1)
		searched[key] = s
	}
	if ctx.Err() != nil {
		return
	}
	names := make([]string, 0, len(s.res.Failed))
	for name := range s.res.Failed {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e.sayOnce(r, fmt.Sprintf("%s refused the search: %v", name, s.res.Failed[name]))
	}
	if s.err != nil && len(s.res.Failed) == 0 {
		e.sayOnce(r, fmt.Sprintf("search failed: %v", s.err))
		return
	}
	var match *domain.Offering
	for i := range s.res.Offerings {
		o := &s.res.Offerings[i]
		if b.GPUs > 0 && o.GPUCount() < float64(b.GPUs) || b.Instances > 0 && o.InstanceCount < b.Instances {
			continue
		}
		p := o.USDPerGPUHour()
		if math.IsNaN(p) || (b.MaxUSDGPUHour != nil && p > *b.MaxUSDGPUHour) {
			continue
		}
		if match == nil || p < match.USDPerGPUHour() {
			match = o
		}
	}
	if match == nil && len(s.res.Failed) > 0 {
		// A provider that did not answer may have had one: "none" is
		// not known, and a crossing told before is not undone by it.
		return
	}
	if len(s.res.Failed) == 0 {
		e.clearNote(r)
	}
	var o domain.Offering
	if match != nil {
		o = *match
	}
	e.step(ctx, r, crossing(match != nil, now, r.Cooldown, func() *Alert {
		a := &Alert{Simulated: o.Simulated, Provider: strp(o.Provider), Region: strp(o.Region), Zone: strp(o.Zone),
			InstanceType: strp(o.InstanceType), GPUModel: strp(o.GPU.Model), GPUCount: fp(o.GPUCount()),
			USDGPUHour: fp(o.USDPerGPUHour()), TotalUSD: fp(o.UpfrontUSD), OfferingID: strp(o.ID), Start: tp(o.Start), End: tp(o.End)}
		if b.MaxUSDGPUHour != nil {
			a.ThresholdUSD = fp(*b.MaxUSDGPUHour)
		}
		a.Text = fmt.Sprintf("%s on sale: %d × %s (%s %s) in %s, %g h from %s, $%s/GPU-h, $%.2f in all — gpumarket book %s%s",
			o.Terms().Name, o.InstanceCount, present.DisplayType(o.InstanceType), present.GPUCount(o.GPUCount()), o.GPU.Model,
			present.Place(o.Region, o.Zone), o.DurationHours(), o.Start.UTC().Format("Mon 2006-01-02 15:04 UTC"),
			present.Money(o.USDPerGPUHour()), o.UpfrontUSD, o.ID, simNote(o.Simulated))
		return a
	}))
}

func (e *Evaluator) evalPlan(ctx context.Context, r Rule) {
	if e.opt.Planner == nil {
		e.sayOnce(r, "no planner in this run: plan rules are not evaluated")
		return
	}
	p := r.Plan
	start, deadline, _ := p.Window()
	now := e.now()
	work := time.Duration(p.Hours * float64(time.Hour))
	if now.Add(work).After(deadline) {
		e.sayOnce(r, fmt.Sprintf("the job can no longer be done by its deadline %s: it will not fire again (remove it)", deadline.UTC().Format(time.RFC3339)))
		return
	}
	if start.Before(now) {
		start = now
	}
	e.mu.Lock()
	snap := e.latest
	e.mu.Unlock()
	if snap == nil || !snap.Ready {
		return // the planner prices the market: wait for it
	}
	job := PlanJob{Models: p.Models(), GPUs: p.GPUs, Hours: p.Hours, Start: start, Deadline: deadline,
		Checkpoint: p.CheckpointOrDefault(), OnTimePct: p.OnTimeOrDefault()}
	pctx, cancel := context.WithTimeout(ctx, e.opt.SearchTimeout)
	q, err := e.opt.Planner.BestPlan(pctx, job, snap)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			e.sayOnce(r, fmt.Sprintf("plan failed: %v", err))
		}
		return
	}
	e.clearNote(r)
	value, limit, unit := q.ExpectedUSD, 0.0, ""
	if p.BelowUSD != nil {
		limit = *p.BelowUSD
	} else {
		value, limit, unit = q.USDPerUsefulGPUHour, *p.BelowUSDGPUHour, "/useful GPU-h"
	}
	cond := q.Found && !math.IsNaN(value) && value < limit
	e.step(ctx, r, crossing(cond, now, r.Cooldown, func() *Alert {
		a := &Alert{Simulated: q.Simulated, Provider: strp(q.Provider), InstanceType: strp(q.InstanceType),
			TotalUSD: fp(q.ExpectedUSD), USDGPUHour: fp(q.USDPerUsefulGPUHour), ThresholdUSD: fp(limit),
			OfferingID: strp(q.OfferingID), Strategy: strp(q.Strategy), GPUModel: strp(job.Models[0]), GPUCount: fp(float64(job.GPUs))}
		if len(q.Regions) == 1 {
			a.Region = strp(q.Regions[0])
		}
		a.Text = fmt.Sprintf("best plan for %d %s × %g h by %s is %s at $%s%s (expected $%.2f, on time %g%%), under $%s%s%s",
			job.GPUs, strings.Join(job.Models, "/"), job.Hours, deadline.UTC().Format("2006-01-02 15:04 UTC"), q.Strategy,
			present.Money(value), unit, q.ExpectedUSD, q.OnTimePct, present.Money(limit), unit, simNote(q.Simulated))
		return a
	}))
}

func (e *Evaluator) evalStartsIn(ctx context.Context, r Rule) {
	if e.opt.Ledger == nil {
		e.sayOnce(r, "no ledger in this run: starts_in rules are not evaluated")
		return
	}
	s := r.StartsIn
	rows, err := e.opt.Ledger.List(ctx, ledger.StateScheduled)
	if err != nil {
		if ctx.Err() == nil {
			e.sayOnce(r, fmt.Sprintf("read the ledger: %v", err))
		}
		return
	}
	now := e.now()
	var future, soon []ledger.Entry
	for _, row := range rows {
		// A block, a reservation or a scheduled fleet (launch --start):
		// what starts at a set time.
		if (!ledger.Booked(row.Kind) && row.Kind != ledger.KindFleet) || (s.Kind != "" && row.Kind != s.Kind) || (s.ID != "" && row.ID != s.ID && row.ProviderRef != s.ID) || !row.Start.After(now) {
			continue
		}
		future = append(future, row)
		if !row.Start.After(now.Add(s.Within.D())) {
			soon = append(soon, row)
		}
	}
	e.clearNote(r)
	e.step(ctx, r, func(st *ruleState) *Alert {
		var told []string
		if len(st.Memo) > 0 {
			json.Unmarshal(st.Memo, &told)
		}
		// Rows that started (or left the ledger's schedule) are
		// forgotten: the memo holds only what may still be told.
		var keep []string
		for _, row := range future {
			if slices.Contains(told, row.ID) {
				keep = append(keep, row.ID)
			}
		}
		var news []ledger.Entry
		for _, row := range soon {
			if !slices.Contains(keep, row.ID) {
				news = append(news, row)
			}
		}
		var a *Alert
		if len(news) > 0 && (st.LastFired.IsZero() || now.Sub(st.LastFired) >= r.Cooldown) {
			var parts []string
			a = &Alert{Simulated: true}
			for _, row := range news {
				keep = append(keep, row.ID)
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
			st.LastFired = now
		}
		sort.Strings(keep)
		if len(keep) == 0 {
			st.Memo = nil
		} else {
			st.Memo, _ = json.Marshal(keep)
		}
		return a
	})
}

// usageAnswer is the usage report one tick's idle rules share.
type usageAnswer struct {
	rep ledger.UsageReport
	err error
}

// usageReport asks the usage source once for a tick's idle rules; nil
// when there is none in this run.
func (e *Evaluator) usageReport(ctx context.Context) *usageAnswer {
	if e.opt.Usage == nil {
		return &usageAnswer{err: errNoUsage}
	}
	cctx, cancel := context.WithTimeout(ctx, e.opt.SearchTimeout)
	defer cancel()
	rep, err := e.opt.Usage.Report(cctx)
	return &usageAnswer{rep: rep, err: err}
}

var errNoUsage = errors.New("no ledger in this run: idle rules are not evaluated")

// evalIdle tells each running row whose idle share passes the rule's
// figure, once per time it passes it: a row is told when it goes above,
// not again while it stays there, and again only after it has fallen to
// the figure or below. Rows crossing inside the cooldown are told when it
// ends, if they are still above. A row whose share is unknown for now
// (its metrics did not answer) keeps its place.
func (e *Evaluator) evalIdle(ctx context.Context, r Rule, u *usageAnswer) {
	if u.err != nil {
		if u.err == errNoUsage {
			e.sayOnce(r, u.err.Error())
		} else if ctx.Err() == nil {
			e.sayOnce(r, fmt.Sprintf("usage report: %v", u.err))
		}
		return
	}
	s := r.Idle
	now := e.now()
	var over []ledger.UsageRow
	var held []string // rows above now, or unknown for now
	note := ""
	if s.ID != "" {
		// A rule on one row says when that row cannot be judged: not
		// in the report (no such row, or it ran before the report's
		// span), or not running.
		note = fmt.Sprintf("ledger row %s is not in the usage report: no such row, or it has not run in the last %s", s.ID, domain.FormatWindow(u.rep.Now.Sub(u.rep.Since)))
		for _, row := range u.rep.Rows {
			if row.ID == s.ID {
				note = ""
				if !row.Active {
					note = fmt.Sprintf("ledger row %s is %s, not running", s.ID, row.State)
				}
			}
		}
	}
	for _, row := range u.rep.Rows {
		if !row.Active || (s.Kind != "" && row.Kind != s.Kind) || (s.ID != "" && row.ID != s.ID) || now.Sub(row.Start) < s.AfterOrDefault() {
			continue
		}
		share := row.IdleShare()
		switch {
		case math.IsNaN(share):
			held = append(held, row.ID)
		case share*100 > s.AbovePct:
			held = append(held, row.ID)
			over = append(over, row)
		}
	}
	if note != "" {
		e.sayOnce(r, note)
	} else {
		e.clearNote(r)
	}
	e.step(ctx, r, func(st *ruleState) *Alert {
		var told []string
		if len(st.Memo) > 0 {
			json.Unmarshal(st.Memo, &told)
		}
		var keep []string
		for _, id := range told {
			if slices.Contains(held, id) {
				keep = append(keep, id)
			}
		}
		var news []ledger.UsageRow
		for _, row := range over {
			if !slices.Contains(keep, row.ID) {
				news = append(news, row)
			}
		}
		var a *Alert
		if len(news) > 0 && (st.LastFired.IsZero() || now.Sub(st.LastFired) >= r.Cooldown) {
			sort.SliceStable(news, func(i, j int) bool { return news[i].IdleShare() > news[j].IdleShare() })
			var parts []string
			a = &Alert{Simulated: true}
			for _, row := range news {
				keep = append(keep, row.ID)
				a.LedgerIDs = append(a.LedgerIDs, row.ID)
				a.Simulated = a.Simulated && e.simulated(row.Provider)
				parts = append(parts, fmt.Sprintf("%s %s %s GPU %s in %s is %.0f%% idle: $%s of the $%s its %s so far cost went to idle GPU-hours",
					row.Kind, row.ID, present.GPUCount(row.GPUs), present.DisplayType(row.InstanceType), present.Place(row.Region, row.Zone),
					row.IdleShare()*100, present.Money(row.IdleUSD), present.Money(row.UsedUSD()), hoursRun(row.End.Sub(row.Start))))
			}
			top := news[0]
			a.Provider, a.Region, a.Zone, a.InstanceType = strp(top.Provider), strp(top.Region), strp(top.Zone), strp(top.InstanceType)
			a.GPUCount, a.TotalUSD, a.IdleUSD = known(top.GPUs), known(top.UsedUSD()), known(top.IdleUSD)
			a.IdlePct, a.ThresholdPct = fp(top.IdleShare()*100), fp(s.AbovePct)
			a.Text = strings.Join(parts, "; ") + fmt.Sprintf(" (above %g%%)", s.AbovePct) + simNote(a.Simulated)
			st.LastFired = now
		}
		sort.Strings(keep)
		if len(keep) == 0 {
			st.Memo = nil
		} else {
			st.Memo, _ = json.Marshal(keep)
		}
		return a
	})
}

// hoursRun says how long a row has run, for an alert: "30 h", "45 min".
func hoursRun(d time.Duration) string {
	if d < time.Hour {
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return fmt.Sprintf("%.0f h", d.Hours())
}

// known is v, or nil (null in JSON) when it is unknown.
func known(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
