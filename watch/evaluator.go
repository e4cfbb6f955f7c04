package watch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/ledger"
)

// OfferingSearcher searches capacity blocks and reservations: the
// booking service, which keeps what it finds for `gpumarket book ID`.
type OfferingSearcher interface {
	FindOfferings(ctx context.Context, q domain.OfferingQuery) (ledger.Search, error)
}

// LedgerReader reads the ledger's rows (the store).
type LedgerReader interface {
	List(ctx context.Context, states ...string) ([]ledger.Entry, error)
}

// Options configure an Evaluator.
type Options struct {
	// Hub is the market feed the spot and bucket rules follow; the
	// Evaluator subscribes once, however many sessions watch its alerts.
	Hub *feed.Hub
	// Market, when set, gives the market feed for the rules in force
	// each time the rules file changes (a headless watch fetches only
	// what its rules read): the Evaluator follows the hub it returns.
	// nil: Hub is fixed (the TUI's), and a rule whose pool it lacks
	// says so once.
	Market func(rules []Spec) (*feed.Hub, error)
	// Offerings answers block rules; Ledger starts_in rules; Planner plan
	// rules. A rule whose source is nil is not evaluated.
	Offerings OfferingSearcher
	Ledger    LedgerReader
	Planner   Planner
	// Usage answers idle rules: the process's usage report (a
	// ledger.Tracker, shared with the TUI's Usage view, so the clouds'
	// metrics are asked once per its TTL). nil: idle rules are not
	// evaluated.
	Usage UsageSource
	// State is where firings and deliveries are kept (required).
	State *State
	// Rules are the config's `watch:` rules, checked (Check) and read
	// from ConfigPath.
	Rules      []Spec
	ConfigPath string
	// Notify is the config's `notify:`; Notifiers deliver it.
	Notify    config.Notify
	Notifiers []Notifier
	// RulesFile is the data dir's file of the rules made in the TUI; ""
	// when rules cannot be made in this run.
	RulesFile string
	// Check asks the providers in use about a rule of the rules file or
	// one made in the TUI (cmd gives watch.Check over their
	// descriptors); nil accepts every rule.
	Check func(Spec) error
	// Describe returns a provider's descriptor (the booking service's
	// Describe): whether a ledger row's provider is simulated. nil: none
	// is.
	Describe func(provider string) domain.Descriptor
	// MaxLead is how far ahead the providers in use sell blocks: a block
	// rule whose range starts later is not searched yet. 0: no limit.
	MaxLead time.Duration
	// Tick is how often the timers are looked at: block and plan rules
	// that are due, starts_in and idle rules, the rules file, alerts raised by
	// another process (default 15s).
	Tick time.Duration
	// SearchTimeout bounds one block search or plan (default 2m).
	SearchTimeout time.Duration
	// Now is the clock of the rules (default time.Now). Deliveries'
	// timeouts and backoffs are real time whatever it says.
	Now    func() time.Time
	Logger *slog.Logger
	// OnAlert is called once for each alert this process raises, after
	// it is recorded (the `watch` command logs it).
	OnAlert func(Alert)
}

// UsageSource reports what the ledger's rows used (ledger.Tracker).
type UsageSource interface {
	Report(ctx context.Context) (ledger.UsageReport, error)
}

// Evaluator evaluates the rules of one process. Make one per process and
// share it: every TUI session subscribes to its alerts.
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
	subs       map[int]chan struct{}
	nextSub    int
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
	// said holds the messages already logged for the rule, so a rule
	// that cannot be searched says why once, not every ten minutes.
	said map[string]bool
	note string
}

// recentCap is how many alerts the evaluator keeps in memory for the
// sessions.
const recentCap = 500

// New checks the rules file and returns an evaluator over the options;
// Run starts it.
func New(opt Options) (*Evaluator, error) {
	if opt.State == nil {
		return nil, errors.New("watch: no state")
	}
	if opt.Tick <= 0 {
		opt.Tick = 15 * time.Second
	}
	if opt.SearchTimeout <= 0 {
		opt.SearchTimeout = 2 * time.Minute
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Evaluator{opt: opt, log: opt.Logger, notifiers: map[string]Notifier{}, rt: map[string]*runtime{},
		subs: map[int]chan struct{}{}, wake: make(chan struct{}, 1), noPoolSaid: map[string]bool{},
		hub: opt.Hub, newHub: make(chan struct{}, 1)}
	for _, n := range opt.Notifiers {
		e.notifiers[n.Channel()] = n
		e.channels = append(e.channels, n.Channel())
		e.lease = max(e.lease, n.Timeout()+30*time.Second)
	}
	var b [6]byte
	rand.Read(b[:])
	e.owner = fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
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

// rules returns every rule in force: the config's, then the rules
// file's.
func (e *Evaluator) rules() []Rule {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Rule, 0, len(e.config)+len(e.file))
	return append(append(out, e.config...), e.file...)
}

// Run evaluates the rules until ctx ends, then finishes the deliveries in
// flight and returns. Deliveries not yet begun stay owed in the State
// for the next run.
func (e *Evaluator) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); e.snapshotLoop(ctx) }()
	go func() { defer wg.Done(); e.timerLoop(ctx) }()
	go func() { defer wg.Done(); e.deliverLoop(ctx) }()
	wg.Wait()
	e.inflight.Wait()
}

// Once evaluates every rule once — the spot and bucket rules on snap
// (nil: none), every block, plan and starts_in rule now — delivers what
// is owed, and returns how many alerts it raised.
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
		t := time.NewTimer(max(time.Until(next), time.Millisecond))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return int(e.fired.Load() - start), nil
}

// Searches counts the block searches made, for tests and benchmarks.
func (e *Evaluator) Searches() int64 { return e.searches.Load() }

func (e *Evaluator) setLatest(s *feed.Snapshot) {
	e.mu.Lock()
	e.latest = s
	e.mu.Unlock()
}

// snapshotLoop evaluates the market rules on each snapshot of the hub,
// following the hub to a new one when the rules need another market.
func (e *Evaluator) snapshotLoop(ctx context.Context) {
	for ctx.Err() == nil {
		e.mu.Lock()
		h := e.hub
		e.mu.Unlock()
		if h != nil {
			e.follow(ctx, h)
		}
		e.mu.Lock()
		same := e.hub == h
		e.mu.Unlock()
		if same {
			select { // the hub stopped: wait for another, or the end
			case <-ctx.Done():
			case <-e.newHub:
			}
		}
	}
}

// follow evaluates h's snapshots until it stops, ctx ends or the
// evaluator moves to another hub.
func (e *Evaluator) follow(ctx context.Context, h *feed.Hub) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snaps := h.Subscribe(sctx)
	for {
		select {
		case <-e.newHub:
			return
		case snap, ok := <-snaps:
			if !ok {
				return
			}
			e.setLatest(snap)
			e.evalSnapshot(ctx, snap)
		}
	}
}

// remarket asks Options.Market for the market of the rules in force and
// follows the hub it gives.
func (e *Evaluator) remarket() {
	if e.opt.Market == nil {
		return
	}
	rules := e.rules()
	specs := make([]Spec, len(rules))
	for i, r := range rules {
		specs[i] = r.Spec
	}
	h, err := e.opt.Market(specs)
	if err != nil {
		e.log.Warn("watch: the rules file's rules need a market this run cannot fetch; they cannot fire until it can", "err", err)
		return
	}
	e.mu.Lock()
	moved := h != e.hub
	e.hub = h
	e.mu.Unlock()
	if moved {
		select {
		case e.newHub <- struct{}{}:
		default:
		}
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

// tick does the timers' work: the rules file, other processes' alerts,
// the rules of every tick, and the rules on a schedule that are due (all
// of them when all is set).
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
	// Until every source has back-filled, a pool that has not arrived
	// yet is not a price that rose: nothing is decided on half a market.
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

// round is one evaluation of the rules: what they read in it is asked
// once (a block search per query, the usage report).
type round struct {
	snap     *feed.Snapshot
	searched map[string]search
	used     *usageAnswer
}

// search is one block search's answer.
type search struct {
	res ledger.Search
	err error
}

// search asks the booking service for q once per round.
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

// usageAnswer is the usage report a round's idle rules share.
type usageAnswer struct {
	rep ledger.UsageReport
	err error
}

var errNoUsage = errors.New("no ledger in this run: idle rules are not evaluated")

// usage asks the usage source once per round.
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

// sayOnce logs msg for the rule the first time it is said.
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

// clearNote forgets the rule's last message once it is evaluated again.
func (e *Evaluator) clearNote(r Rule) {
	e.mu.Lock()
	e.runtimeLocked(r).note = ""
	e.mu.Unlock()
}

// step makes one decision for a rule. next computes the rule's new state
// (and the alert to raise, if any) from a state. It is tried on the
// evaluator's cached state first: when nothing would change, the
// database is not touched (a spot rule is evaluated on every market
// tick). Otherwise the decision is made again on the stored state under
// the database's lock, so that two processes cannot both raise it.
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

// quietFirst makes a Quiet rule's decision record the condition without
// telling it (and without starting a cooldown); hushed is set when an
// alert was held back.
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

// crossing is the decision of a condition rule: it fires when the
// condition becomes true (once per crossing), at most once per cooldown.
// A crossing that falls in the cooldown is owed: it is told when the
// cooldown ends if the condition still holds then.
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

// raised shares an alert this process raised: the sessions, the
// deliverer and OnAlert.
func (e *Evaluator) raised(a Alert) {
	e.fired.Add(1)
	e.log.Debug("watch: alert", "rule", a.Rule, "id", a.ID, "text", a.Text)
	e.share([]Alert{a})
	select {
	case e.wake <- struct{}{}:
	default:
	}
	if e.opt.OnAlert != nil {
		e.opt.OnAlert(a)
	}
}

// share adds alerts to the recent ones and tells the subscribers.
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
	for _, ch := range e.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// pullAlerts shares the alerts another process raised on the same state
// (a `gpumarket watch` beside a `serve`): its sessions see them too.
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

// Subscribe returns a channel that receives a value whenever alerts are
// added; Alerts says which. It is closed when ctx ends. A slow reader
// misses wake-ups, never alerts.
func (e *Evaluator) Subscribe(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	e.mu.Lock()
	id := e.nextSub
	e.nextSub++
	e.subs[id] = ch
	e.mu.Unlock()
	go func() {
		<-ctx.Done()
		e.mu.Lock()
		delete(e.subs, id)
		close(ch)
		e.mu.Unlock()
	}()
	return ch
}

// Subscribers counts the live subscriptions.
func (e *Evaluator) Subscribers() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs)
}

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

// History returns the newest alerts, newest first, with their
// deliveries.
func (e *Evaluator) History(ctx context.Context, n int) ([]Record, error) {
	return e.opt.State.Recent(ctx, n)
}

// RuleStatus is a rule and where it stands, for the Alerts view.
type RuleStatus struct {
	Rule
	Active    bool
	LastFired time.Time
	// Note is the last thing said about the rule (why it is not
	// searched), "" when it evaluates normally.
	Note string
}

// Rules returns every rule in force, config's first, and where each
// stands in this process.
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
