// Package watch evaluates the alert rules, one Evaluator per process, on
// snapshots, timers and the ledger; each rule kind is one file (kind_*.go).
// Its SQLite file makes a restart repeat and lose nothing (docs/DESIGN.md).
package watch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/internal/fanout"
	"github.com/gpumarket/gpumarket/internal/sqlitedb"
	"github.com/gpumarket/gpumarket/ledger"
)

// OfferingSearcher searches blocks and reservations (the booking service).
type OfferingSearcher interface {
	FindOfferings(ctx context.Context, q domain.OfferingQuery) (ledger.Search, error)
}

// LedgerReader reads the ledger's rows.
type LedgerReader interface {
	List(ctx context.Context, states ...string) ([]ledger.Entry, error)
}

// Options configure an Evaluator.
type Options struct {
	// Hub is the market the rules follow; Market, when set, gives the hub for the
	// rules in force (a headless watch fetches only what they read).
	Hub    *feed.Hub
	Market func(rules []Spec) (*feed.Hub, error)
	// The other kinds' sources; a rule whose source is nil says so. Usage is the
	// process's one tracker.
	Offerings OfferingSearcher
	Ledger    LedgerReader
	Planner   Planner
	Usage     UsageSource
	State     *State // required
	// Rules are the config's, read from ConfigPath.
	Rules      []Spec
	ConfigPath string
	Notify     config.Notify
	Notifiers  []Notifier
	// RulesFile keeps the rules made in the TUI; "": none can be made.
	RulesFile string
	// Check asks the providers in use about a rule; nil accepts every rule.
	Check    func(Spec) error
	Describe func(provider string) domain.Descriptor
	// MaxLead is how far ahead blocks are sold (0: no limit).
	MaxLead time.Duration
	// Tick paces the timers (default 15s).
	Tick          time.Duration
	SearchTimeout time.Duration // one block search or plan (default 2m)
	// Now is the rules' clock; deliveries run on real time.
	Now    func() time.Time
	Logger *slog.Logger
	// OnAlert is told each alert this process raises, once recorded.
	OnAlert func(Alert)
}

// UsageSource reports what the ledger's rows used.
type UsageSource interface {
	Report(ctx context.Context) (ledger.UsageReport, error)
}

// Evaluator evaluates the rules of one process; every session shares it.
type Evaluator struct {
	opt       Options
	log       *slog.Logger
	notifiers map[string]Notifier
	channels  []string
	owner     string
	lease     time.Duration

	mu         sync.Mutex
	config     []Rule
	file       []Rule
	fileStamp  fileStamp
	rt         map[string]*runtime
	recent     []Alert
	lastID     int64
	subs       fanout.Set[struct{}]
	latest     *feed.Snapshot
	noPoolSaid map[string]bool
	hub        *feed.Hub
	newHub     chan struct{}

	fired    atomic.Int64
	searches atomic.Int64
	wake     chan struct{}
	inflight sync.WaitGroup
}

// runtime is what the evaluator remembers of a rule between evaluations.
type runtime struct {
	st      ruleState
	loaded  bool
	nextDue time.Time
	// said: what was logged, so a rule says why it cannot run once.
	said map[string]bool
	note string
}

// recentCap is how many alerts are kept in memory for the sessions.
const recentCap = 500

// New reads the rules file and returns an evaluator; Run starts it.
func New(opt Options) (*Evaluator, error) {
	if opt.State == nil {
		return nil, errors.New("watch: no state")
	}
	domain.OrDefault(&opt.Tick, 15*time.Second)
	domain.OrDefault(&opt.SearchTimeout, 2*time.Minute)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	opt.Logger = cmp.Or(opt.Logger, slog.New(slog.DiscardHandler))
	e := &Evaluator{opt: opt, log: opt.Logger, notifiers: map[string]Notifier{}, rt: map[string]*runtime{},
		wake: make(chan struct{}, 1), noPoolSaid: map[string]bool{},
		hub: opt.Hub, newHub: make(chan struct{}, 1)}
	for _, n := range opt.Notifiers {
		e.notifiers[n.Channel()] = n
		e.channels = append(e.channels, n.Channel())
		e.lease = max(e.lease, n.Timeout()+30*time.Second)
	}
	e.owner = fmt.Sprintf("%d-%s", os.Getpid(), sqlitedb.RandomHex(6))
	for i, w := range opt.Rules {
		r := Compile(w, opt.Notify)
		r.From, r.File, r.Index = FromConfig, opt.ConfigPath, i
		e.config = append(e.config, r)
	}
	if opt.RulesFile != "" {
		rules, stamp, err := e.readRulesFile()
		if err != nil {
			return nil, err
		}
		e.file, e.fileStamp = rules, stamp
	}
	if opt.State.Rebuilt() != nil {
		rules := map[string]string{}
		for _, r := range e.rules() {
			rules[r.Name] = r.Fingerprint
		}
		if err := opt.State.quiet(context.Background(), rules, opt.Now()); err != nil {
			return nil, err
		}
	}
	recent, err := opt.State.Recent(context.Background(), recentCap)
	if err != nil {
		return nil, err
	}
	for i := len(recent) - 1; i >= 0; i-- {
		e.recent = append(e.recent, recent[i].Alert)
		e.lastID = max(e.lastID, recent[i].ID)
	}
	return e, nil
}

func (e *Evaluator) now() time.Time { return e.opt.Now() }

// simulated asks the provider's descriptor, never its name.
func (e *Evaluator) simulated(provider string) bool {
	return e.opt.Describe != nil && e.opt.Describe(provider).Simulated
}

// rules returns the rules in force: the config's, then the file's.
func (e *Evaluator) rules() []Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Rule, 0, len(e.config)+len(e.file))
	return append(append(out, e.config...), e.file...)
}

// Run evaluates the rules until ctx ends, then lets deliveries in flight finish.
func (e *Evaluator) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); e.snapshotLoop(ctx) }()
	go func() { defer wg.Done(); e.timerLoop(ctx) }()
	go func() { defer wg.Done(); e.deliverLoop(ctx) }()
	wg.Wait()
	e.inflight.Wait()
}

// Once evaluates every rule once, delivers what is owed, and returns the alerts raised.
func (e *Evaluator) Once(ctx context.Context, snap *feed.Snapshot) (int, error) {
	start := e.fired.Load()
	if snap != nil {
		e.setLatest(snap)
		e.evalSnapshot(ctx, snap)
	}
	e.tick(ctx, true)
	for ctx.Err() == nil {
		e.deliverDue(ctx)
		e.inflight.Wait()
		n, next, err := e.opt.State.owed(ctx, e.channels)
		if err != nil {
			return int(e.fired.Load() - start), err
		}
		if n == 0 || next.IsZero() {
			break // all settled, or in another live process's hands
		}
		domain.Sleep(ctx, max(time.Until(next), time.Millisecond)) // ctx's end ends the loop
	}
	return int(e.fired.Load() - start), nil
}

// Searches counts the block searches made.
func (e *Evaluator) Searches() int64 { return e.searches.Load() }

func (e *Evaluator) setLatest(s *feed.Snapshot) {
	e.mu.Lock()
	e.latest = s
	e.mu.Unlock()
}

// snapshotLoop evaluates the market rules per snapshot, following the hub the rules need.
func (e *Evaluator) snapshotLoop(ctx context.Context) {
	for ctx.Err() == nil {
		e.mu.Lock()
		h := e.hub
		e.mu.Unlock()
		sctx, cancel := context.WithCancel(ctx)
		var snaps <-chan *feed.Snapshot // nil until there is a hub
		if h != nil {
			snaps = h.Subscribe(sctx)
		}
		e.follow(ctx, snaps)
		cancel()
	}
}

// follow evaluates snaps until ctx ends or another hub comes.
func (e *Evaluator) follow(ctx context.Context, snaps <-chan *feed.Snapshot) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.newHub:
			return
		case snap, ok := <-snaps:
			if !ok {
				snaps = nil // the hub stopped: wait for another, or the end
				continue
			}
			e.setLatest(snap)
			e.evalSnapshot(ctx, snap)
		}
	}
}

// remarket follows the hub Options.Market gives for the rules in force.
func (e *Evaluator) remarket() {
	if e.opt.Market == nil {
		return
	}
	h, err := e.opt.Market(specsOf(e.rules()))
	if err != nil {
		e.log.Warn("watch: the rules file's rules need a market this run cannot fetch; they cannot fire until it can", "err", err)
		return
	}
	e.mu.Lock()
	moved := h != e.hub
	e.hub = h
	e.mu.Unlock()
	if moved {
		poke(e.newHub)
	}
}

func (e *Evaluator) timerLoop(ctx context.Context) {
	t := time.NewTicker(e.opt.Tick)
	defer t.Stop()
	for {
		e.tick(ctx, false)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick does the timers' work: the rules file, others' alerts, and the rules due (all with all).
func (e *Evaluator) tick(ctx context.Context, all bool) {
	e.reloadRulesFile()
	e.pullAlerts(ctx)
	now := e.now()
	e.mu.Lock()
	rd := &round{snap: e.latest, searched: map[string]search{}}
	e.mu.Unlock()
	for _, r := range e.rules() {
		if ctx.Err() != nil {
			return
		}
		switch kinds[r.Kind].When {
		case onTick:
			r.Cond.evaluate(ctx, e, r, rd)
		case onSchedule:
			e.mu.Lock()
			rt := e.runtimeLocked(r)
			due := all || !now.Before(rt.nextDue)
			if due {
				rt.nextDue = now.Add(r.Every)
			}
			e.mu.Unlock()
			if due {
				r.Cond.evaluate(ctx, e, r, rd)
			}
		}
	}
}

func (e *Evaluator) evalSnapshot(ctx context.Context, snap *feed.Snapshot) {
	// Until every source back-filled, nothing is decided on half a market.
	if snap == nil || !snap.Ready {
		return
	}
	rd := &round{snap: snap}
	for _, r := range e.rules() {
		if kinds[r.Kind].When == onMarket {
			r.Cond.evaluate(ctx, e, r, rd)
		}
	}
}

// round is one evaluation: what its rules read is asked once.
type round struct {
	snap     *feed.Snapshot
	searched map[string]search
	used     *usageAnswer
}

type search struct {
	res ledger.Search
	err error
}

func (rd *round) search(ctx context.Context, e *Evaluator, q domain.OfferingQuery) search {
	key := fmt.Sprintf("%s|%d|%d|%s|%d|%d|%s", q.GPU, q.GPUs, q.Instances, q.Duration, q.StartAfter.Unix(), q.StartBefore.Unix(), strings.Join(q.Regions, ","))
	s, ok := rd.searched[key]
	if !ok {
		sctx, cancel := context.WithTimeout(ctx, e.opt.SearchTimeout)
		s.res, s.err = e.opt.Offerings.FindOfferings(sctx, q)
		cancel()
		e.searches.Add(1)
		rd.searched[key] = s
	}
	return s
}

type usageAnswer struct {
	rep ledger.UsageReport
	err error
}

var errNoUsage = errors.New("no ledger in this run: idle rules are not evaluated")

func (rd *round) usage(ctx context.Context, e *Evaluator) *usageAnswer {
	if rd.used != nil {
		return rd.used
	}
	rd.used = &usageAnswer{err: errNoUsage}
	if e.opt.Usage != nil {
		cctx, cancel := context.WithTimeout(ctx, e.opt.SearchTimeout)
		defer cancel()
		rep, err := e.opt.Usage.Report(cctx)
		rd.used = &usageAnswer{rep: rep, err: err}
	}
	return rd.used
}

func (e *Evaluator) runtimeLocked(r Rule) *runtime {
	rt, ok := e.rt[r.Name]
	if !ok {
		rt = &runtime{said: map[string]bool{}}
		e.rt[r.Name] = rt
	}
	return rt
}

// sayOnce logs msg for the rule the first time.
func (e *Evaluator) sayOnce(r Rule, msg string) {
	e.mu.Lock()
	rt := e.runtimeLocked(r)
	said := rt.said[msg]
	rt.said[msg] = true
	rt.note = msg
	e.mu.Unlock()
	if !said {
		e.log.Warn("watch: rule "+r.Name+": "+msg, "rule", r.Name)
	}
}

func (e *Evaluator) clearNote(r Rule) {
	e.mu.Lock()
	e.runtimeLocked(r).note = ""
	e.mu.Unlock()
}

// step makes one decision: tried on the cached state first (the database is
// touched only on a change), then again on the stored state under the write
// lock, so two processes cannot both raise it.
func (e *Evaluator) step(ctx context.Context, r Rule, next func(st *ruleState) *Alert) {
	hushed := false
	next = quietFirst(next, &hushed)
	e.mu.Lock()
	rt := e.runtimeLocked(r)
	cached, loaded := rt.st, rt.loaded
	e.mu.Unlock()
	if !loaded || cached.Fingerprint != r.Fingerprint {
		st, err := e.opt.State.Load(ctx, r.Name, r.Fingerprint)
		if err != nil {
			e.log.Error("watch: read rule state", "rule", r.Name, "err", err)
			return
		}
		cached = st
	}
	trial := cached
	trial.Memo = append([]byte(nil), cached.Memo...)
	if a := next(&trial); a == nil && trial.equal(cached) {
		e.keep(r, cached)
		return
	}
	a, st, err := e.opt.State.decide(ctx, r.Name, r.Fingerprint, e.now(), e.channels, func(st *ruleState) *Alert {
		a := next(st)
		if a != nil {
			a.Rule, a.Kind, a.Tell = r.Name, r.Kind, r.Tell
		}
		return a
	})
	if err != nil {
		e.log.Error("watch: record rule state", "rule", r.Name, "err", err)
		e.mu.Lock()
		e.runtimeLocked(r).loaded = false
		e.mu.Unlock()
		return
	}
	e.keep(r, st)
	if hushed {
		e.log.Warn("watch: rule "+r.Name+": its condition holds, not told: the watch state was rebuilt and it may have been told before", "rule", r.Name)
	}
	if a != nil {
		e.raised(*a)
	}
}

// quietFirst records a Quiet rule's condition without telling it; hushed says one was held back.
func quietFirst(next func(*ruleState) *Alert, hushed *bool) func(*ruleState) *Alert {
	return func(st *ruleState) *Alert {
		*hushed = false
		if !st.Quiet {
			return next(st)
		}
		last := st.LastFired
		a := next(st)
		st.Quiet = false
		*hushed = a != nil
		if a != nil {
			st.LastFired = last
		}
		return nil
	}
}

func (e *Evaluator) keep(r Rule, st ruleState) {
	e.mu.Lock()
	rt := e.runtimeLocked(r)
	rt.st, rt.loaded = st, true
	e.mu.Unlock()
}

// crossing fires once per crossing and cooldown; one in the cooldown is told at its end if it holds.
func crossing(cond bool, now time.Time, cooldown time.Duration, alert func() *Alert) func(*ruleState) *Alert {
	return func(st *ruleState) *Alert {
		if !cond {
			st.Active, st.Owed = false, false
			return nil
		}
		fresh := !st.Active
		st.Active = true
		if !fresh && !st.Owed {
			return nil
		}
		if !st.LastFired.IsZero() && now.Sub(st.LastFired) < cooldown {
			st.Owed = true
			return nil
		}
		st.Owed, st.LastFired = false, now
		return alert()
	}
}

// raised shares an alert this process raised.
func (e *Evaluator) raised(a Alert) {
	e.fired.Add(1)
	e.log.Debug("watch: alert", "rule", a.Rule, "id", a.ID, "text", a.Text)
	e.share([]Alert{a})
	poke(e.wake)
	if e.opt.OnAlert != nil {
		e.opt.OnAlert(a)
	}
}

// poke wakes ch's reader unless a wake-up is pending already.
func poke(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (e *Evaluator) share(as []Alert) {
	e.mu.Lock()
	defer e.mu.Unlock()
	added := false
	for _, a := range as {
		if a.ID <= e.lastID {
			continue // known already (raised here, or pulled before)
		}
		e.recent = append(e.recent, a)
		e.lastID = a.ID
		added = true
	}
	if !added {
		return
	}
	if n := len(e.recent); n > recentCap {
		e.recent = append([]Alert(nil), e.recent[n-recentCap:]...)
	}
	e.subs.Publish(struct{}{})
}

// pullAlerts shares the alerts another process raised on the state.
func (e *Evaluator) pullAlerts(ctx context.Context) {
	e.mu.Lock()
	last := e.lastID
	e.mu.Unlock()
	as, err := e.opt.State.AlertsAfter(ctx, last, recentCap)
	if err != nil {
		if ctx.Err() == nil { // not the evaluator stopping
			e.log.Warn("watch: read alerts", "err", err)
		}
		return
	}
	e.share(as)
}

// Subscribe wakes the caller when alerts are added; a slow reader misses wake-ups, never alerts.
func (e *Evaluator) Subscribe(ctx context.Context) <-chan struct{} { return e.subs.Add(ctx) }

// Subscribers counts the live subscriptions.
func (e *Evaluator) Subscribers() int { return e.subs.Len() }

// Alerts returns the recent alerts after id, oldest first.
func (e *Evaluator) Alerts(after int64) []Alert {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := len(e.recent)
	for i > 0 && e.recent[i-1].ID > after {
		i--
	}
	return append([]Alert(nil), e.recent[i:]...)
}

// LastID is the newest alert's id, 0 when there is none.
func (e *Evaluator) LastID() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastID
}

// History returns the newest alerts first, with their deliveries.
func (e *Evaluator) History(ctx context.Context, n int) ([]Record, error) {
	return e.opt.State.Recent(ctx, n)
}

// RuleStatus is a rule and where it stands, for the Alerts view.
type RuleStatus struct {
	Rule
	Active    bool
	LastFired time.Time
	// Note says why the rule does not evaluate; "" when it does.
	Note string
}

// Rules returns the rules in force and where each stands.
func (e *Evaluator) Rules() []RuleStatus {
	rules := e.rules()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]RuleStatus, len(rules))
	for i, r := range rules {
		out[i] = RuleStatus{Rule: r}
		if rt, ok := e.rt[r.Name]; ok {
			out[i].Active, out[i].LastFired, out[i].Note = rt.st.Active, rt.st.LastFired, rt.note
		}
	}
	return out
}

// CanMakeRules reports whether rules made in the TUI can be saved.
func (e *Evaluator) CanMakeRules() bool { return e.opt.RulesFile != "" }

// RulesFile is the file the TUI's rules are saved in.
func (e *Evaluator) RulesFile() string { return e.opt.RulesFile }

// rowsWhat says which of the ledger's rows a rule watches.
func rowsWhat(all, ofKind, kind, id string) string {
	switch {
	case id != "":
		return "ledger row " + id
	case kind != "":
		return ofKind + kind
	}
	return all
}

// checkRowKind refuses a kind of row gpumarket does not book.
func checkRowKind(kind, fleet string) error {
	if kind != "" && kind != domain.KindBlock && kind != domain.KindReservation && kind != domain.KindFleet {
		return ruleErr("kind", "%q; want %s, %s or %s%s, or none for all three", kind, domain.KindBlock, domain.KindReservation, domain.KindFleet, fleet)
	}
	return nil
}

// tellRows tells the rows of due not told yet, at most once per cooldown; a
// told row stays told while it is in still. The memo keeps the told rows.
func tellRows[T any](now time.Time, cooldown time.Duration, still []string, due []T, id func(T) string, alert func([]T) *Alert) func(*ruleState) *Alert {
	return func(st *ruleState) *Alert {
		var told, keep []string
		if len(st.Memo) > 0 {
			json.Unmarshal(st.Memo, &told)
		}
		for _, t := range told {
			if slices.Contains(still, t) {
				keep = append(keep, t)
			}
		}
		var news []T
		for _, row := range due {
			if !slices.Contains(keep, id(row)) {
				news = append(news, row)
			}
		}
		var a *Alert
		if len(news) > 0 && (st.LastFired.IsZero() || now.Sub(st.LastFired) >= cooldown) {
			a = alert(news)
			for _, row := range news {
				keep = append(keep, id(row))
			}
			st.LastFired = now
		}
		sort.Strings(keep)
		st.Memo = nil
		if len(keep) > 0 {
			st.Memo, _ = json.Marshal(keep)
		}
		return a
	}
}
