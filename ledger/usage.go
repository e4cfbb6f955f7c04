package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
)

// UsageRow is one ledger row's usage over the span asked for.
type UsageRow struct {
	ID, Kind, Provider, Cloud, Region, Zone string
	InstanceType                            string
	Actor, State                            string
	// GPUs were booked (a fleet's target count); Start and End bound the capacity within [Since, Now].
	GPUs       float64
	Start, End time.Time
	// Active is set while the capacity runs (the ledger's "active").
	Active bool
	// busy ≤ running ≤ booked GPU-hours of the span; NaN is unknown.
	BookedGPUHours  float64
	RunningGPUHours float64
	BusyGPUHours    float64
	// Interruptions counts instances taken back in the span; -1 is unknown.
	Interruptions int
	// CostUSD is the cost so far; IdleUSD its part paid for idle GPU-hours. NaN is unknown.
	CostUSD float64
	IdleUSD float64
	// MetricsSource names the utilization metric ("" none); Note what a figure rests on or why it is unknown.
	MetricsSource, Note string
	// Days splits the row by UTC day, oldest first.
	Days []Day
	// consumed is the span's cost (a fee spread over its hours), IdleShare's base.
	consumed float64
}

// IdleShare is the share of the span's cost paid for idle GPU-hours; NaN when unknown.
func (r UsageRow) IdleShare() float64 {
	if math.IsNaN(r.IdleUSD) || !(r.consumed > 0) {
		return math.NaN()
	}
	return math.Min(r.IdleUSD/r.consumed, 1)
}

// UsedUSD is the cost of the span so far; NaN when unknown.
func (r UsageRow) UsedUSD() float64 {
	if !(r.consumed > 0) {
		return math.NaN()
	}
	return r.consumed
}

// NoMetrics reports whether the row's busy GPU-hours are unknown.
func (r UsageRow) NoMetrics() bool { return math.IsNaN(r.BusyGPUHours) }

// Day is one UTC day of a row, or the total of a day over rows.
type Day struct {
	// Day is the UTC midnight starting it.
	Day             time.Time
	BookedGPUHours  float64
	RunningGPUHours float64
	BusyGPUHours    float64
	// CostUSD is the day's capacity cost; IdleUSD the part of it idle.
	CostUSD float64
	IdleUSD float64
	// Interruptions counts instances taken back that day; -1 is unknown.
	Interruptions int
}

// Total sums rows by a key; NoMetrics counts rows whose busy GPU-hours are unknown.
type Total struct {
	Key             string
	Rows            int
	BookedGPUHours  float64
	RunningGPUHours float64
	BusyGPUHours    float64
	Interruptions   int
	CostUSD         float64
	IdleUSD         float64
	NoMetrics       int
}

// Alert is a running row whose idle share is over budget.max_idle_pct.
type Alert struct {
	Row     UsageRow
	IdlePct float64
	MaxPct  float64
}

// String is the alert as one line.
func (a Alert) String() string {
	return fmt.Sprintf("%s (%s %d GPUs of %s) is %.0f%% idle, over budget.max_idle_pct %.0f%%",
		a.Row.ID, a.Row.Kind, int(math.Round(a.Row.GPUs)), a.Row.InstanceType, a.IdlePct, a.MaxPct)
}

// UsageReport is the usage of every row over [Since, Now].
type UsageReport struct {
	Since, Now time.Time
	// Rows are the five most idle first, then the rest newest first.
	Rows []UsageRow
	// Days are per UTC day, oldest first; Actors by idle cost; All over every row.
	Days   []Total
	Actors []Total
	All    Total
	// Alerts are the running rows over budget.max_idle_pct.
	Alerts []Alert
}

// UsageOptions of Compute.
type UsageOptions struct {
	Since, Now time.Time
	// Reporter returns a provider's usage reporter, false when there is none.
	Reporter func(provider string) (domain.UsageReporter, bool)
	// Timeout bounds each call (default 30s); Concurrency how many run (default 4).
	Timeout     time.Duration
	Concurrency int
	// MaxIdlePct alerts on a running row idle over this % of its cost; 0 is off.
	MaxIdlePct float64
	Kept       Kept
	// SaveFailed is told once per Compute that a report could not be kept.
	SaveFailed func(error)
}

// saveTimeout keeps a report from waiting long on another process's write lock.
const saveTimeout = 5 * time.Second

// readRow is a row's report: the live read merged with what was kept.
func readRow(ctx context.Context, r Entry, q domain.UsageQuery, opt UsageOptions, saveFailed func(error), notes *[]string) *domain.UsageReport {
	var live domain.UsageReport
	var liveErr error
	if rp, ok := opt.Reporter(r.Provider); !ok {
		liveErr = fmt.Errorf("%s is not in use in this run or reports no usage", r.Provider)
	} else {
		cctx, cancel := context.WithTimeout(ctx, opt.Timeout)
		live, liveErr = rp.Usage(cctx, q)
		cancel()
		if liveErr != nil {
			liveErr = fmt.Errorf("usage: %w", liveErr)
		}
	}
	var kept domain.UsageReport
	var keptAt time.Time
	var haveKept bool
	var keptErr error
	if opt.Kept != nil {
		kept, keptAt, haveKept, keptErr = opt.Kept.LoadUsage(ctx, r.ID)
		if keptErr != nil {
			haveKept = false
		}
	}
	withNote := func(rep domain.UsageReport) *domain.UsageReport {
		if rep.Note != "" {
			*notes = append(*notes, rep.Note)
		}
		return &rep
	}
	switch {
	case liveErr != nil && haveKept:
		// Counted as seen then, not guessed to have run on since.
		*notes = append(*notes, keptNote(keptAt, "the live read failed: "+liveErr.Error()))
		return withNote(closeOpen(kept, keptAt))
	case liveErr != nil:
		*notes = append(*notes, liveErr.Error())
		if keptErr != nil {
			*notes = append(*notes, "the usage kept in the ledger could not be read: "+keptErr.Error())
		}
		return nil
	case haveKept && !q.End.IsZero() && !q.End.After(opt.Now) && len(live.Instances) == 0 && len(kept.Instances) > 0:
		// Ended and forgotten by the cloud: this read adds nothing and is not kept.
		*notes = append(*notes, keptNote(keptAt, "the cloud no longer lists its instances"))
		return withNote(merge(kept, keptAt, live))
	}
	rep := live
	if haveKept {
		rep = merge(kept, keptAt, live)
	}
	if keptErr != nil {
		*notes = append(*notes, "the usage kept in the ledger could not be read: "+keptErr.Error()+
			"; the figures are what the cloud lists now")
	}
	rep = capForKeeping(bound(rep, q.Start, q.End))
	if opt.Kept != nil && keptErr == nil {
		// A kept report that could not be read is not saved over.
		if ro, ok := opt.Kept.(readOnly); !ok || !ro.ReadOnly() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
			if err := opt.Kept.SaveUsage(sctx, r.ID, rep, opt.Now); err != nil {
				saveFailed(err)
			}
			cancel()
		}
	}
	return withNote(rep)
}

// TopIdle is how many of the most idle rows come first.
const TopIdle = 5

// Counted reports whether a row has capacity usage counts: a cloud id and a state past its call.
func Counted(r Entry) bool {
	return r.ProviderRef != "" && slices.Contains([]string{StateScheduled, StateActive, StateEnded, StateDeleted}, r.State)
}

// Compute works out the usage of the rows over [Since, Now].
func Compute(ctx context.Context, rows []Entry, opt UsageOptions) UsageReport {
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	if opt.Concurrency <= 0 {
		opt.Concurrency = 4
	}
	rep := UsageReport{Since: opt.Since.UTC(), Now: opt.Now.UTC()}
	var todo []Entry
	for _, r := range rows {
		if !Counted(r) {
			continue
		}
		if start, end := Span(r); !start.IsZero() {
			if start, end = clip(start, end, opt.Since, opt.Now); end.After(start) {
				todo = append(todo, r)
			}
		}
	}
	var once sync.Once
	saveFailed := func(err error) {
		if opt.SaveFailed != nil {
			once.Do(func() { opt.SaveFailed(err) })
		}
	}
	out := make([]UsageRow, len(todo))
	fanout.Each(len(todo), opt.Concurrency, func(i int) { out[i] = computeRow(ctx, todo[i], opt, saveFailed) })
	rep.Rows = order(out)
	rep.Days, rep.Actors, rep.All = totals(rep.Rows)
	if opt.MaxIdlePct > 0 {
		for _, r := range rep.Rows {
			if s := r.IdleShare(); r.Active && s*100 > opt.MaxIdlePct {
				rep.Alerts = append(rep.Alerts, Alert{Row: r, IdlePct: s * 100, MaxPct: opt.MaxIdlePct})
			}
		}
	}
	return rep
}

// query is the usage question of a row.
func query(r Entry, opt UsageOptions) domain.UsageQuery {
	start, end := Span(r)
	q := domain.UsageQuery{Ref: r.ID, Kind: r.Kind, ProviderRef: r.ProviderRef, Region: r.Region, Zone: r.Zone,
		InstanceType: r.InstanceType, InstanceCount: r.InstanceCount, Start: start, End: end, From: opt.Since, To: opt.Now}
	if r.Kind == KindFleet {
		var spec domain.FleetSpec
		if json.Unmarshal(r.Request, &spec) == nil {
			q.InstanceTypes = spec.InstanceTypes
			q.OnDemand = spec.OnDemandBase
			q.Zones, q.Strategy, q.MaxPriceUSD = spec.Zones, spec.Strategy, spec.MaxPriceUSD
			if len(spec.Zones) == 1 && q.Zone == "" {
				q.Zone = spec.Zones[0]
			}
		}
	}
	if len(q.InstanceTypes) == 0 && q.InstanceType != "" {
		q.InstanceTypes = []string{q.InstanceType}
	}
	return q
}

// perInstanceGPUs is the GPUs of one booked instance.
func perInstanceGPUs(r Entry) float64 {
	if r.InstanceCount > 0 && r.GPUCount > 0 {
		return r.GPUCount / float64(r.InstanceCount)
	}
	if e, ok := domain.LookupGPU(r.InstanceType); ok {
		return e.GPU.Count
	}
	return math.NaN()
}

func computeRow(ctx context.Context, r Entry, opt UsageOptions, saveFailed func(error)) UsageRow {
	q := query(r, opt)
	start, end := clip(q.Start, q.End, opt.Since, opt.Now)
	per := perInstanceGPUs(r)
	gpus := r.GPUCount
	if !(gpus > 0) {
		gpus = per * float64(r.InstanceCount)
	}
	row := UsageRow{ID: r.ID, Kind: r.Kind, Provider: r.Provider, Cloud: r.Cloud, Region: r.Region, Zone: r.Zone,
		InstanceType: r.InstanceType, Actor: r.Actor, State: r.State, GPUs: gpus, Start: start, End: end,
		Active: r.State == StateActive, Interruptions: -1,
		RunningGPUHours: math.NaN(), BusyGPUHours: math.NaN(), CostUSD: math.NaN(), IdleUSD: math.NaN()}
	var notes []string

	rep := readRow(ctx, r, q, opt, saveFailed, &notes)
	// With a report, running and busy hours count up from 0; interruptions too, unless unknown.
	counted := math.NaN()
	if rep != nil {
		counted = 0
		if !rep.InterruptionsUnknown {
			row.Interruptions = 0
		}
		if n := lastSeenNote(*rep, start, end); n != "" {
			notes = append(notes, n)
		}
	}
	days := dayStarts(start, end)
	row.Days = make([]Day, len(days))
	held := rowWindows(r) // a training plan holds only its segments
	for i, d := range days {
		d0, d1 := domain.Later(d, start), domain.Earlier(d.Add(24*time.Hour), end)
		row.Days[i] = Day{Day: d, BookedGPUHours: gpus * heldHours(held, d0, d1), Interruptions: row.Interruptions,
			RunningGPUHours: counted, BusyGPUHours: counted, CostUSD: math.NaN(), IdleUSD: math.NaN()}
		row.BookedGPUHours += row.Days[i].BookedGPUHours
	}

	measured := 0.0 // GPU-hours of running time covered by samples
	if rep != nil {
		for _, in := range rep.Instances {
			g := per
			if e, ok := domain.LookupGPU(in.InstanceType); ok {
				g = e.GPU.Count
			}
			i0, i1 := clip(in.Start, in.End, start, end)
			if in.Interrupted && !in.End.IsZero() && !in.End.Before(start) && !in.End.After(end) && row.Interruptions >= 0 {
				row.Interruptions++
				for di, d := range days {
					if !in.End.Before(d) && in.End.Before(d.Add(24*time.Hour)) || di == len(days)-1 && in.End.Equal(end) {
						row.Days[di].Interruptions++
						break
					}
				}
			}
			if !i1.After(i0) {
				continue
			}
			for di, d := range days {
				d0, d1 := domain.Later(d, i0), domain.Earlier(d.Add(24*time.Hour), i1)
				if !d1.After(d0) {
					continue
				}
				row.Days[di].RunningGPUHours += g * hours(d0, d1)
				for _, s := range in.Busy {
					s0, s1 := domain.Later(s.At, d0), domain.Earlier(s.At.Add(s.Period), d1)
					if !s1.After(s0) {
						continue
					}
					h := g * hours(s0, s1)
					measured += h
					row.Days[di].BusyGPUHours += h * math.Max(0, math.Min(1, s.Share))
				}
			}
		}
		row.RunningGPUHours, row.BusyGPUHours = 0, 0
		for i := range row.Days {
			d := &row.Days[i]
			// Running counts at most what was booked, busy at most what ran.
			d.RunningGPUHours = math.Min(d.RunningGPUHours, d.BookedGPUHours)
			d.BusyGPUHours = math.Min(d.BusyGPUHours, d.RunningGPUHours)
			row.RunningGPUHours += d.RunningGPUHours
			row.BusyGPUHours += d.BusyGPUHours
		}
		switch {
		case row.RunningGPUHours == 0:
			// Nothing ran: nothing was busy, whatever the metrics say.
			row.MetricsSource = "no instance ran"
		case measured == 0:
			row.BusyGPUHours = math.NaN()
			for i := range row.Days {
				row.Days[i].BusyGPUHours = math.NaN()
			}
			notes = append(notes, "no metrics")
		default:
			row.MetricsSource = rep.Source
			if cover := measured / row.RunningGPUHours; cover < 0.9 {
				notes = append(notes, fmt.Sprintf("metrics cover %.0f%% of the running GPU-hours; the rest is counted not busy", cover*100))
			}
		}
	}

	row.Note = strings.Join(notes, "; ")
	costRow(&row, r)
	return row
}

// costRow fills a row's and its days' cost (CostSoFar) and idle figures.
func costRow(row *UsageRow, r Entry) {
	row.CostUSD = CostSoFar(r, row.Start, row.End)
	if t := domain.TermsOfKind(r.Kind); t != nil && t.Upfront {
		row.CostUSD = CostSoFar(r, time.Time{}, row.End) // paid in full, up front
	}
	if !Booked(r.Kind) && r.Kind != KindFleet {
		return
	}
	idleKnown := !math.IsNaN(row.BusyGPUHours)
	row.IdleUSD = 0
	for i := range row.Days {
		d := &row.Days[i]
		d0, d1 := domain.Later(d.Day, row.Start), domain.Earlier(d.Day.Add(24*time.Hour), row.End)
		d.CostUSD = CostSoFar(r, d0, d1)
		row.consumed += d.CostUSD
		switch {
		case !idleKnown:
			d.IdleUSD = math.NaN()
		case r.Kind == KindFleet && d.RunningGPUHours > 0:
			// A fleet bills only while it runs: idle is the running share not busy.
			d.IdleUSD = d.CostUSD * (d.RunningGPUHours - d.BusyGPUHours) / d.RunningGPUHours
		case r.Kind == KindFleet:
			d.IdleUSD = 0
		case d.BookedGPUHours > 0:
			// A fixed window bills whether used or not.
			d.IdleUSD = d.CostUSD * (d.BookedGPUHours - d.BusyGPUHours) / d.BookedGPUHours
		default:
			d.IdleUSD = 0
		}
		row.IdleUSD += d.IdleUSD
	}
	if !idleKnown {
		row.IdleUSD = math.NaN()
	}
	switch {
	case CostUnknown(r):
		row.Note = joinNote(row.Note, "no price known")
	case r.Kind == KindFleet:
		row.Note = joinNote(row.Note, "cost at the launch estimate")
	}
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// order puts the TopIdle rows of highest idle cost first, then newest first.
func order(rows []UsageRow) []UsageRow {
	byStart := append([]UsageRow(nil), rows...)
	slices.SortStableFunc(byStart, func(a, b UsageRow) int { return cmp.Or(b.Start.Compare(a.Start), strings.Compare(b.ID, a.ID)) })
	idle := append([]UsageRow(nil), byStart...)
	slices.SortStableFunc(idle, func(a, b UsageRow) int { return cmp.Compare(nanLast(b.IdleUSD), nanLast(a.IdleUSD)) })
	out := make([]UsageRow, 0, len(rows))
	top := map[string]bool{}
	for _, r := range idle {
		if len(top) == TopIdle || math.IsNaN(r.IdleUSD) || r.IdleUSD <= 0 {
			break
		}
		top[r.ID] = true
		out = append(out, r)
	}
	for _, r := range byStart {
		if !top[r.ID] {
			out = append(out, r)
		}
	}
	return out
}

func nanLast(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(-1)
	}
	return v
}

// totals sums the rows per day, per actor and over all.
func totals(rows []UsageRow) (days, actors []Total, all Total) {
	byDay, byActor := map[time.Time]Total{}, map[string]Total{}
	for _, r := range rows {
		a := byActor[r.Actor]
		a.Key = r.Actor
		a.addRow(r)
		byActor[r.Actor] = a
		all.addRow(r)
		for _, d := range r.Days {
			t := byDay[d.Day]
			if t.Rows == 0 {
				t.Key = d.Day.Format("2006-01-02")
			}
			t.add(math.IsNaN(d.BusyGPUHours), d.Interruptions, d.BookedGPUHours, d.RunningGPUHours, d.BusyGPUHours, d.CostUSD, d.IdleUSD)
			byDay[d.Day] = t
		}
	}
	days = slices.SortedFunc(maps.Values(byDay), func(a, b Total) int { return strings.Compare(a.Key, b.Key) })
	actors = slices.SortedFunc(maps.Values(byActor), func(a, b Total) int {
		return cmp.Or(cmp.Compare(b.IdleUSD, a.IdleUSD), strings.Compare(a.Key, b.Key))
	})
	all.Key = "all"
	return days, actors, all
}

func (t *Total) addRow(r UsageRow) {
	t.add(r.NoMetrics(), r.Interruptions, r.BookedGPUHours, r.RunningGPUHours, r.BusyGPUHours, r.CostUSD, r.IdleUSD)
}

// add counts one row (or a row's day); -1 interruptions is unknown.
func (t *Total) add(noMetrics bool, interruptions int, booked, running, busy, cost, idle float64) {
	t.Rows++
	if noMetrics {
		t.NoMetrics++
	}
	t.Interruptions += max(interruptions, 0)
	t.BookedGPUHours += known(booked)
	t.RunningGPUHours += known(running)
	t.BusyGPUHours += known(busy)
	t.CostUSD += known(cost)
	t.IdleUSD += known(idle)
}

// known is a figure to sum, or for JSON, which cannot hold NaN: unknown is 0.
func known(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// dayStarts are the UTC midnights of the days [start, end) touches.
func dayStarts(start, end time.Time) []time.Time {
	var out []time.Time
	for d := start.UTC().Truncate(24 * time.Hour); d.Before(end); d = d.Add(24 * time.Hour) {
		out = append(out, d)
	}
	return out
}

// clip is [start, end) within [from, to]; a zero end has not come.
func clip(start, end, from, to time.Time) (time.Time, time.Time) {
	if end.IsZero() || end.After(to) {
		end = to
	}
	if start.Before(from) {
		start = from
	}
	return start, end
}

func hours(a, b time.Time) float64 {
	if !b.After(a) {
		return 0
	}
	return b.Sub(a).Hours()
}

// Bar draws GPU-hours as one bar: █ busy, ▓ running not busy, ▒ booked not running.
func Bar(booked, running, busy, peak float64, width int) string {
	if !(peak > 0) || width <= 0 || math.IsNaN(booked) {
		return ""
	}
	cells := func(v float64) int {
		if math.IsNaN(v) || v <= 0 {
			return 0
		}
		return int(math.Round(v / peak * float64(width)))
	}
	b, r, u := cells(booked), cells(running), cells(busy)
	r, u = min(r, b), min(u, min(r, b))
	return strings.Repeat("█", u) + strings.Repeat("▓", r-u) + strings.Repeat("▒", b-r)
}

// KindTrainingPlan is a SageMaker training plan's row.
const KindTrainingPlan = domain.KindTrainingPlan

// rowWindows are a training plan's segments; none for one window.
func rowWindows(r Entry) []domain.Segment {
	var o domain.Offering
	if r.Kind != KindFleet && json.Unmarshal(r.Request, &o) == nil {
		return o.Segments
	}
	return nil
}

// heldHours are the hours of [from, to) the windows hold; all of them for none.
func heldHours(ws []domain.Segment, from, to time.Time) float64 {
	if len(ws) == 0 {
		return hours(from, to)
	}
	h := 0.0
	for _, w := range ws {
		a, b := domain.Later(w.Start, from), to
		if !w.End.IsZero() {
			b = domain.Earlier(w.End, to)
		}
		h += hours(a, b)
	}
	return h
}

// Reporters returns each provider's usage reporter by name.
func Reporters(ps []domain.Provider) func(string) (domain.UsageReporter, bool) {
	m := map[string]domain.UsageReporter{}
	for _, p := range ps {
		if r, ok := p.(domain.UsageReporter); ok {
			m[p.Name()] = r
		}
	}
	return func(name string) (domain.UsageReporter, bool) {
		r, ok := m[name]
		return r, ok
	}
}

// TrackerOptions configure a Tracker.
type TrackerOptions struct {
	Ledger *Store
	// Reporter is as in UsageOptions.
	Reporter func(provider string) (domain.UsageReporter, bool)
	// Since is how far back a report reaches (default 7 days).
	Since time.Duration
	// TTL is how long a report is reused (default 5m): metrics APIs bill per request.
	TTL         time.Duration
	MaxIdlePct  float64
	Timeout     time.Duration
	Concurrency int
	Now         func() time.Time
	Kept        Kept
	// Log is told once that a report could not be kept; nil logs nothing.
	Log *slog.Logger
}

// Tracker shares one report among a process's sessions for TTL.
type Tracker struct {
	opt TrackerOptions

	mu     sync.Mutex
	last   *UsageReport
	lastAt time.Time
	// lastRows is the ledger the report came from: a change makes it stale at once.
	lastRows   string
	flight     chan struct{}
	saveWarned atomic.Bool
}

// DefaultSince is how far back a usage report reaches unless asked.
const DefaultSince = 7 * 24 * time.Hour

// NewTracker makes a tracker.
func NewTracker(opt TrackerOptions) *Tracker {
	if opt.Since <= 0 {
		opt.Since = DefaultSince
	}
	if opt.TTL <= 0 {
		opt.TTL = 5 * time.Minute
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Reporter == nil {
		opt.Reporter = func(string) (domain.UsageReporter, bool) { return nil, false }
	}
	return &Tracker{opt: opt}
}

// Since is how far back the tracker's reports reach.
func (t *Tracker) Since() time.Duration { return t.opt.Since }

// MaxIdlePct is the alert threshold (0: off).
func (t *Tracker) MaxIdlePct() float64 { return t.opt.MaxIdlePct }

// Report returns the latest report unless it is older than TTL or the rows changed.
func (t *Tracker) Report(ctx context.Context) (UsageReport, error) {
	for {
		rows, err := t.opt.Ledger.List(ctx)
		if err != nil {
			return UsageReport{}, err
		}
		key := rowsKey(rows)
		t.mu.Lock()
		now := t.opt.Now()
		if t.last != nil && now.Sub(t.lastAt) < t.opt.TTL && key == t.lastRows {
			r := *t.last
			t.mu.Unlock()
			return r, nil
		}
		if t.flight != nil {
			ch := t.flight
			t.mu.Unlock()
			select {
			case <-ch:
				continue // its report, if the rows are still those
			case <-ctx.Done():
				return UsageReport{}, ctx.Err()
			}
		}
		ch := make(chan struct{})
		t.flight = ch
		t.mu.Unlock()

		rep := t.compute(ctx, rows)
		t.mu.Lock()
		t.flight = nil
		t.last, t.lastAt, t.lastRows = &rep, t.opt.Now(), key
		t.mu.Unlock()
		close(ch)
		return rep, nil
	}
}

// rowsKey is what a report depends on of the rows (not their heartbeat).
func rowsKey(rows []Entry) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s|%s|%d|%d|%d|%s;", r.ID, r.State, r.Start.UnixNano(), r.End.UnixNano(), r.InstanceCount, r.ProviderRef)
	}
	return b.String()
}

func (t *Tracker) compute(ctx context.Context, rows []Entry) UsageReport {
	now := t.opt.Now()
	return Compute(ctx, rows, UsageOptions{Since: now.Add(-t.opt.Since), Now: now, Reporter: t.opt.Reporter,
		Timeout: t.opt.Timeout, Concurrency: t.opt.Concurrency, MaxIdlePct: t.opt.MaxIdlePct,
		Kept: t.opt.Kept, SaveFailed: t.saveFailed})
}

// saveFailed logs the first failure to keep a report.
func (t *Tracker) saveFailed(err error) {
	if t.opt.Log != nil && t.saveWarned.CompareAndSwap(false, true) {
		t.opt.Log.Warn("usage: what the clouds showed could not be kept in the ledger; reports are still computed, "+
			"but usage the clouds forget (ended instances, deleted reservations) will be missing later", "err", err)
	}
}
