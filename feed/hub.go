// The hub: one poll loop per source, snapshots to any number of subscribers;
// thirty subscribers cost the clouds the same calls as one.

package feed

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/fanout"
	"github.com/gpumarket/gpumarket/series"
)

// Options tune a hub.
type Options struct {
	// Query filters what the hub fetches; its Window is the first back-fill's depth (default 24h).
	Query domain.Query
	// MaxWindow is the deepest Extend may reach (default and at most domain.MaxWindow);
	// a shared hub sets its configured window, so one session cannot grow it for all.
	MaxWindow time.Duration
	// Interval returns the refresh interval of a provider (default 30s).
	Interval func(provider string) time.Duration
	// PublishEvery coalesces events into one snapshot at most this often (default 100ms).
	PublishEvery time.Duration
	// MaxBackoff caps the wait after failed fetches (default 5m).
	MaxBackoff time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Speed is how much faster than the wall clock Now runs (default 1); data is stale after three intervals times Speed.
	Speed  int
	Logger *slog.Logger
	// Cache keeps the clouds' history across restarts; nil fetches the whole window at every start.
	Cache Cache
}

// Hub polls sources and publishes snapshots.
type Hub struct {
	opt     Options
	sources []domain.Provider

	mu      sync.Mutex
	pools   map[domain.PoolKey]*poolState
	order   []*poolState // sorted by key
	status  map[string]*sourceState
	seq     uint64
	dirty   bool
	latest  *Snapshot
	subs    fanout.Set[*Snapshot] // closed when Run has ended
	window  time.Duration
	trimmed time.Time // when history was last trimmed to the window

	wake map[string]chan struct{}
	// fetched wakes the publish loop when a fetch ends: a one-shot command waits for its sources, not the tick.
	fetched chan struct{}
}

type poolState struct {
	pool    domain.Pool
	key     string
	series  series.Series
	changed uint64
}

type sourceState struct {
	SourceStatus
	regions    map[string]*RegionStatus
	haveFrom   time.Time // history back-filled from here
	started    bool      // first back-fill finished
	failed     bool      // last fetch failed
	staleAfter time.Duration
	cache      *sourceCache // nil when the source is not cached
	// missed is what each region's failed fetches missed, set on the next request.
	missed map[string]domain.Gap
	// regionFailed: the regions whose Err lost history in the fetch under way.
	regionFailed map[string]bool
}

// New makes a hub over the sources. Call Run to start polling.
func New(sources []domain.Provider, opt Options) *Hub {
	domain.OrDefault(&opt.Query.Window, 24*time.Hour)
	if opt.MaxWindow <= 0 || opt.MaxWindow > domain.MaxWindow {
		opt.MaxWindow = domain.MaxWindow
	}
	opt.MaxWindow = max(opt.MaxWindow, opt.Query.Window)
	if opt.Interval == nil {
		opt.Interval = func(string) time.Duration { return 30 * time.Second }
	}
	domain.OrDefault(&opt.PublishEvery, 100*time.Millisecond)
	domain.OrDefault(&opt.MaxBackoff, 5*time.Minute)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.Logger = cmp.Or(opt.Logger, slog.New(slog.DiscardHandler))
	h := &Hub{
		opt: opt, sources: sources,
		pools:   map[domain.PoolKey]*poolState{},
		status:  map[string]*sourceState{},
		window:  opt.Query.Window,
		wake:    map[string]chan struct{}{},
		fetched: make(chan struct{}, 1),
	}
	for _, p := range sources {
		h.status[p.Name()] = &sourceState{
			SourceStatus: SourceStatus{Provider: p.Name(), Simulated: p.Describe().Simulated, State: StateLoading, Interval: opt.Interval(p.Name())},
			regions:      map[string]*RegionStatus{},
			missed:       map[string]domain.Gap{},
			staleAfter:   3 * opt.Interval(p.Name()) * time.Duration(max(opt.Speed, 1)),
		}
		h.wake[p.Name()] = make(chan struct{}, 1)
		if opt.Cache != nil && !p.Describe().Simulated {
			h.status[p.Name()].cache = &sourceCache{regions: map[string]*regionCache{}}
		}
	}
	h.seedFromCache()
	h.latest = h.buildLocked()
	return h
}

// Providers returns the hub's sources.
func (h *Hub) Providers() []domain.Provider { return h.sources }

// Provider returns the named source.
func (h *Hub) Provider(name string) (domain.Provider, bool) {
	i := slices.IndexFunc(h.sources, func(p domain.Provider) bool { return p.Name() == name })
	if i < 0 {
		return nil, false
	}
	return h.sources[i], true
}

// Run polls every source until ctx ends, then closes every subscription.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range h.sources {
		wg.Go(func() { h.loop(ctx, p) })
	}
	wg.Go(func() { h.publishLoop(ctx) })
	wg.Wait()
	h.mu.Lock()
	h.subs.Close()
	h.mu.Unlock()
}

// Snapshot returns the latest published snapshot.
func (h *Hub) Snapshot() *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest
}

// Subscribe returns a channel of the latest snapshot, then each newer one; a
// slow reader misses intermediate ones, never the newest. Closed when ctx ends.
func (h *Hub) Subscribe(ctx context.Context) <-chan *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subs.Add(ctx, h.latest)
}

// Subscribers counts the live subscriptions.
func (h *Hub) Subscribers() int { return h.subs.Len() }

// WaitReady waits until every source finished its first back-fill and returns
// that snapshot. If ctx ends first, it returns what the hub holds (Ready false)
// with ctx's error; nil only if the hub stopped before publishing.
func (h *Hub) WaitReady(ctx context.Context) (*Snapshot, error) {
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	for s := range h.Subscribe(sub) {
		if s.Ready {
			return s, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return h.Current(), err
	}
	return nil, errors.New("hub stopped before the sources answered")
}

// Current publishes what the hub holds now, if changed, and returns it, for a reader that cannot wait.
func (h *Hub) Current() *Snapshot {
	h.publish()
	return h.Snapshot()
}

// Extend asks for history back to now − window (at most MaxWindow), back-filled at once.
func (h *Hub) Extend(window time.Duration) {
	window = min(window, h.opt.MaxWindow)
	h.mu.Lock()
	grow := window > h.window
	if grow {
		h.window = window
	}
	h.mu.Unlock()
	if grow {
		h.Refresh()
	}
}

// MaxWindow is the deepest history the hub may be asked to hold.
func (h *Hub) MaxWindow() time.Duration { return h.opt.MaxWindow }

// Window is the history depth the hub keeps.
func (h *Hub) Window() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.window
}

// Refresh makes every source poll now; a poll already running is not duplicated.
func (h *Hub) Refresh() {
	for _, w := range h.wake {
		poke(w)
	}
}

func (h *Hub) loop(ctx context.Context, p domain.Provider) {
	name := p.Name()
	interval := h.opt.Interval(name)
	var lastUntil time.Time
	failures := 0
	for ctx.Err() == nil {
		h.extendFromCache(ctx, name)
		now := h.opt.Now()
		h.mu.Lock()
		want := now.Add(-h.window)
		st := h.status[name]
		haveFrom := st.haveFrom
		var catchUp time.Time
		if st.cache != nil {
			catchUp = st.cache.catchUp
		}
		st.beginFetchLocked()
		missed := maps.Clone(st.missed)
		h.mu.Unlock()

		req := domain.FetchRequest{Query: h.opt.Query, Until: now, Missed: missed}
		switch {
		case !catchUp.IsZero():
			// Back-fill from the cache's end (at least a second: a request must not be empty).
			req.Since, req.Backfill = catchUp, true
			if !now.After(catchUp) {
				req.Since = now.Add(-time.Second)
			}
		case haveFrom.IsZero():
			req.Since, req.Backfill = want, true
		case want.Before(haveFrom):
			req.Since, req.Until, req.Backfill = want, haveFrom, true
		default:
			req.Since = lastUntil
		}
		req.Query.Window = now.Sub(req.Since)
		err := p.Fetch(ctx, req, func(ev domain.Event) { h.apply(name, ev) })
		if ctx.Err() != nil {
			return
		}
		h.mu.Lock()
		st.started = true
		if err != nil {
			failures++
			st.failed = true
			st.Err = err.Error()
			if st.LastOK.IsZero() {
				st.State = StateError
			}
			h.opt.Logger.Info("fetch failed", "provider", name, "err", err) // the source status says it to the user
		} else {
			failures = 0
			st.failed = false
			st.Err = ""
			st.State = StateReady
			st.LastOK = h.opt.Now()
			if req.Backfill && catchUp.IsZero() {
				st.haveFrom = req.Since
			}
			if !req.Backfill || haveFrom.IsZero() || !catchUp.IsZero() {
				lastUntil = now
			}
		}
		h.settleCacheLocked(st, req, err)
		st.settleGapsLocked(req, err)
		h.dirty = true
		more := err == nil && h.opt.Now().Add(-h.window).Before(st.haveFrom)
		h.mu.Unlock()
		poke(h.fetched) // unless a publish is due already
		if more {
			continue // the window grew while we fetched
		}

		wait := interval
		if failures > 0 {
			wait = backoff(interval, failures, h.opt.MaxBackoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-h.wake[name]:
		}
	}
}

// settleGapsLocked keeps what each failed region missed, to ask again; a region that answered has none left.
func (st *sourceState) settleGapsLocked(req domain.FetchRequest, err error) {
	for r := range st.regionFailed {
		g := st.missed[r]
		st.missed[r] = g.After(g.Widen(req), true)
	}
	if err != nil {
		return // the other regions may not have been asked
	}
	for r := range st.missed {
		if !st.regionFailed[r] {
			delete(st.missed, r)
		}
	}
}

func backoff(base time.Duration, failures int, max time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// apply folds one event into the hub; providers may call it concurrently.
func (h *Hub) apply(provider string, ev domain.Event) {
	if ev.Provider == "" {
		ev.Provider = provider
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	next := h.seq + 1
	st := h.status[provider]
	for _, p := range ev.Pools {
		ps := h.poolLocked(p.Key())
		ps.pool = p
		ps.changed = next
	}
	var runs []Run
	for i := 0; i < len(ev.Points); {
		k := ev.Points[i].Pool
		j := i + 1
		for j < len(ev.Points) && ev.Points[j].Pool == k {
			j++
		}
		at := make([]int64, j-i)
		usd := make([]float64, j-i)
		for x := i; x < j; x++ {
			at[x-i] = ev.Points[x].At.Unix()
			usd[x-i] = ev.Points[x].USDHour
		}
		ps := h.poolLocked(k)
		ps.series = ps.series.Merge(at, usd)
		ps.changed = next
		if st != nil && st.cache != nil {
			runs = append(runs, Run{Pool: k, At: at, USD: usd}) // Merge keeps neither
		}
		i = j
	}
	for _, ph := range ev.Histories {
		ps := h.poolLocked(ph.Pool)
		ps.series = ps.series.Join(ph.History)
		ps.changed = next
		if st != nil && st.cache != nil {
			// Whole histories are cached as points would be.
			at, usd := ph.History.Points(0)
			runs = append(runs, Run{Pool: ph.Pool, At: at, USD: usd})
		}
	}
	if st != nil {
		if ev.Region != "" && ev.Err != nil && !ev.Soft {
			st.regionFailed[ev.Region] = true
		}
		h.cacheEventLocked(st, ev, runs)
		if ev.Region != "" {
			rs := st.regions[ev.Region]
			if rs == nil {
				rs = &RegionStatus{Region: ev.Region}
				st.regions[ev.Region] = rs
			}
			if ev.Progress != nil {
				rs.Done, rs.Total = ev.Progress.Done, ev.Progress.Total
			}
			if ev.Err != nil {
				rs.Err = ev.Err.Error()
			} else if len(ev.Points) > 0 || len(ev.Histories) > 0 || len(ev.Pools) > 0 || ev.Progress != nil {
				rs.Err = ""
				rs.LastOK = h.opt.Now()
				if st.cache != nil {
					st.cache.region(ev.Region).cachedAt = time.Time{}
				}
			}
		} else if ev.Err != nil {
			st.Err = ev.Err.Error()
		}
		if ev.Note != "" {
			st.Note = ev.Note
		}
	}
	h.dirty = true
}

// poolLocked returns the pool's state, described from the catalog if prices come first.
func (h *Hub) poolLocked(k domain.PoolKey) *poolState {
	if ps, ok := h.pools[k]; ok {
		return ps
	}
	ps := &poolState{key: k.String(), pool: poolFromKey(k)}
	h.pools[k] = ps
	i := sort.Search(len(h.order), func(i int) bool { return h.order[i].key >= ps.key })
	h.order = slices.Insert(h.order, i, ps)
	return ps
}

func poolFromKey(k domain.PoolKey) domain.Pool {
	p := domain.Pool{Provider: k.Provider, Region: k.Region, Zone: k.Zone, InstanceType: k.InstanceType}
	if e, ok := domain.LookupGPU(k.InstanceType); ok {
		p.Cloud, p.GPU = e.Cloud, e.GPU
	}
	return p
}

func (h *Hub) publishLoop(ctx context.Context) {
	t := time.NewTicker(h.opt.PublishEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.publish()
		case <-h.fetched:
			h.publish()
		}
	}
}

func (h *Hub) publish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty && !h.staleChangedLocked() {
		return
	}
	h.dirty = false
	h.seq++
	h.trimLocked()
	s := h.buildLocked()
	h.latest = s
	h.subs.Publish(s)
}

func (h *Hub) buildLocked() *Snapshot {
	now := h.opt.Now()
	s := &Snapshot{Seq: h.seq, Taken: now, Pools: make([]PoolView, len(h.order)), Ready: true}
	for i, ps := range h.order {
		asOf, cached := h.asOfLocked(ps.pool.Provider, ps.pool.Region)
		s.Pools[i] = PoolView{Pool: ps.pool, Key: ps.key, History: ps.series, Changed: ps.changed, AsOf: asOf, Cached: cached}
	}
	for _, p := range h.sources {
		st := h.status[p.Name()]
		ss := st.SourceStatus
		ss.Regions = make([]RegionStatus, 0, len(st.regions))
		for _, r := range st.regions {
			rs := *r
			rs.CachedAt = st.cachedAtLocked(r.Region)
			ss.Regions = append(ss.Regions, rs)
		}
		if st.cache != nil {
			for _, rc := range st.cache.regions {
				if !rc.cachedAt.IsZero() && (ss.CachedAt.IsZero() || rc.cachedAt.Before(ss.CachedAt)) {
					ss.CachedAt = rc.cachedAt
				}
			}
		}
		sort.Slice(ss.Regions, func(i, j int) bool { return ss.Regions[i].Region < ss.Regions[j].Region })
		ss.Stale = st.staleAt(now)
		s.Sources = append(s.Sources, ss)
		if !st.started {
			s.Ready = false
		}
		if s.HistoryFrom.IsZero() || st.haveFrom.After(s.HistoryFrom) {
			s.HistoryFrom = st.haveFrom
		}
	}
	return s
}

// asOfLocked is when a region last answered, or, while its prices are the cache's, when the cache heard from it.
func (h *Hub) asOfLocked(provider, region string) (time.Time, bool) {
	st := h.status[provider]
	if st == nil {
		return time.Time{}, false
	}
	if at := st.cachedAtLocked(region); !at.IsZero() {
		return at, true
	}
	if rs := st.regions[region]; rs != nil && !rs.LastOK.IsZero() {
		return rs.LastOK, false
	}
	return st.LastOK, false
}

func (st *sourceState) cachedAtLocked(region string) time.Time {
	if st.cache != nil && st.cache.regions[region] != nil {
		return st.cache.regions[region].cachedAt
	}
	return time.Time{}
}

// staleAt reports whether the last fetch failed or the data is older than three intervals.
func (st *sourceState) staleAt(now time.Time) bool {
	return st.failed || (!st.LastOK.IsZero() && now.Sub(st.LastOK) > st.staleAfter)
}

// staleChangedLocked reports a source turned stale or live: a hung poll sends no events to say so.
func (h *Hub) staleChangedLocked() bool {
	now := h.opt.Now()
	for i, p := range h.sources {
		if i < len(h.latest.Sources) && h.latest.Sources[i].Stale != h.status[p.Name()].staleAt(now) {
			return true
		}
	}
	return false
}

// trimLocked drops, at most hourly, points older than the window (keeping the
// one in force at its start); trimmed series are new arrays, readers keep theirs.
func (h *Hub) trimLocked() {
	now := h.opt.Now()
	if now.Sub(h.trimmed) < time.Hour {
		return
	}
	h.trimmed = now
	if h.opt.Cache != nil {
		h.opt.Cache.Trim(now)
	}
	cut := now.Add(-h.window - 24*time.Hour).Unix()
	// No longer held: Extend must back-fill it, HistoryFrom must not claim it.
	for _, st := range h.status {
		if from := time.Unix(cut, 0).In(now.Location()); !st.haveFrom.IsZero() && st.haveFrom.Before(from) {
			st.haveFrom = from
		}
	}
	for _, ps := range h.order {
		if s := ps.series.DropBefore(cut); s.Len() != ps.series.Len() {
			ps.series = s
			ps.changed = h.seq
		}
	}
}
