// Package job carries jobs out: a driver (one per job, by a lease in the
// ledger) reviews each running job and makes the moves its plan's policy
// decides (planner.LiveJob), each launch through the ledger's booking path.
package job

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/planner"
)

// CapacityReader knows a pool's spot capacity now and until when it holds.
type CapacityReader interface {
	SpotCapacity(pool string, instances int, t time.Time) (up bool, until time.Time, err error)
}

// FleetWatcher counts a fleet's instances that run and are not being taken
// back; an error with a Partial() true method comes with a count that stands.
type FleetWatcher interface {
	WatchFleet(ctx context.Context, region, id string) (running int, err error)
}

const (
	// Every is the longest a running job goes without a review.
	Every = time.Minute
	// LeaseFor: a driver that stops is taken over that long after its last review.
	LeaseFor = 3 * time.Minute
	// downFor is how long a pool whose launch found no capacity is left alone.
	downFor = 10 * time.Minute
)

// Options tune a driver.
type Options struct {
	Now func() time.Time
	// Speed is how many times faster than the wall clock Now runs: waits
	// between reviews are in wall time, so they shrink by it.
	Speed  float64
	Every  time.Duration
	Lease  time.Duration
	Logger *slog.Logger
	// Alert is told what a user should hear of; key is stable per job and
	// kind, so a notifier can say each once.
	Alert    func(j ledger.Job, key, text string)
	Template func(provider string) string
	// Risk, when set, is a pool's spot process on the market now, for n
	// instances: the on-time chance reads it over the plan's.
	Risk  func(pool string, instances int) (planner.Risk, bool)
	Actor string
}

// Driver reviews the ledger's jobs; it is safe for concurrent use.
type Driver struct {
	svc    *ledger.Service
	st     *ledger.Store
	provs  map[string]domain.Provider
	opt    Options
	holder string
	wake   chan struct{}
	mu     sync.Mutex // one review at a time
	// oddsLeft is what is left of a pass's runs beyond minRuns.
	oddsLeft int
	// hook, in tests, stops a review at a step as a kill would.
	hook func(point string) error
}

var errKilled = errors.New("stopped at a test hook")

func (d *Driver) at(point string) error {
	if d.hook == nil {
		return nil
	}
	if err := d.hook(point); err != nil {
		return fmt.Errorf("%w: %w", errKilled, err)
	}
	return nil
}

// New returns a driver over the service's ledger and the providers in use.
func New(svc *ledger.Service, provs []domain.Provider, opt Options) *Driver {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Every <= 0 {
		opt.Every = Every
	}
	if opt.Speed < 1 {
		opt.Speed = 1
	}
	if opt.Lease <= 0 {
		// A lease must outlast the wall time between two reviews, or a
		// fast clock would let it lapse under a driver that is alive.
		opt.Lease = max(LeaseFor, time.Duration(float64(10*time.Second)*opt.Speed))
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Driver{svc: svc, st: svc.Store(), provs: map[string]domain.Provider{}, opt: opt, wake: make(chan struct{}, 1)}
	for _, p := range provs {
		d.provs[p.Name()] = p
	}
	d.holder = d.st.Owner().String() + "#" + ledger.NewID(time.Now())[16:]
	if err := d.st.HoldProcessLock(); err != nil {
		// Others then take the job over only once its lease lapses.
		opt.Logger.Warn("job driver: process lock", "err", err)
	}
	return d
}

// Holder names this driver in the jobs' leases.
func (d *Driver) Holder() string { return d.holder }

// gone reports whether a lease holder's process on this host has ended.
func (d *Driver) gone(holder string) bool {
	owner, _, _ := strings.Cut(holder, "#")
	l, _ := d.st.ProcessLiveness(owner)
	return l == ledger.OwnerGone
}

// Wake asks for a review now (an event the caller saw).
func (d *Driver) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Pass is what one review of every job came to.
type Pass struct {
	// Active counts the jobs still to be driven, by anyone; Next is the
	// latest next review of this driver.
	Active int
	Next   time.Time
	Errs   []error
}

// Review reviews every active job once: leases taken in one transaction,
// routine progress saved in another, plus one per move.
func (d *Driver) Review(ctx context.Context) (Pass, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.opt.Now()
	pass := Pass{Next: now.Add(d.opt.Every)}
	later := func(t time.Time) {
		if !t.IsZero() && t.Before(pass.Next) {
			pass.Next = t
		}
	}
	jobs, err := d.st.ListJobs(ctx, ledger.JobScheduled, ledger.JobRunning)
	if err != nil {
		return pass, err
	}
	pass.Active = len(jobs)
	held, err := d.st.TakeLeases(ctx, jobs, d.holder, now, now.Add(d.opt.Lease), d.gone)
	if err != nil {
		return pass, err
	}
	mine := map[string]bool{}
	for _, j := range held {
		mine[j.ID] = true
	}
	for _, j := range jobs {
		if !mine[j.ID] {
			later(j.LeaseUntil) // another driver's: taken over if it lapses
		}
	}
	runs := map[string]*jobRun{}
	var batch []ledger.Job
	d.oddsLeft = extraRuns * len(held)
	for _, j := range held {
		r, err := d.review(ctx, j, now)
		switch {
		case errors.Is(err, ledger.ErrJobEnded):
			// Cancelled meanwhile: whatever this review launched ends too.
			r.endAll(ctx, "the job was cancelled")
			pass.Active--
			continue
		case errors.Is(err, ledger.ErrLeaseLost):
			continue
		case err != nil:
			pass.Errs = append(pass.Errs, fmt.Errorf("job %s: %w", j.ID, err))
			d.opt.Logger.Warn("job review", "job", j.ID, "err", err)
		}
		if r == nil {
			continue
		}
		if !ledger.JobActive(r.j.State) {
			pass.Active--
			continue
		}
		later(r.next)
		if err == nil && !r.saved {
			if err := r.prepare(); err != nil {
				pass.Errs = append(pass.Errs, fmt.Errorf("job %s: %w", j.ID, err))
				continue
			}
			runs[j.ID] = r
			batch = append(batch, r.j)
		}
	}
	if len(batch) > 0 {
		failed, err := d.st.SaveJobs(ctx, batch, d.holder)
		if err != nil {
			return pass, err
		}
		for id, ferr := range failed {
			if errors.Is(ferr, ledger.ErrJobEnded) {
				runs[id].endAll(ctx, "the job was cancelled")
				pass.Active--
			}
		}
	}
	return pass, nil
}

// Run reviews the jobs until ctx ends (with untilIdle, until none is active).
func (d *Driver) Run(ctx context.Context, untilIdle bool) error {
	for {
		pass, err := d.Review(ctx)
		if err != nil && ctx.Err() == nil {
			d.opt.Logger.Warn("job review pass", "err", err)
		}
		if untilIdle && err == nil && pass.Active == 0 {
			return nil
		}
		wait := d.wallWait(pass.Next)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-d.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// reaction is how late a due move may be carried out: a review's own wall
// time, scaled by a fast clock, and the cloud's answer to a launch.
func (d *Driver) reaction() time.Duration {
	return max(ReactionFloor, time.Duration(float64(reactionWall)*d.opt.Speed))
}

// ReactionFloor is the least time the safety net keeps for the driver to
// act; reactionWall is the wall time a loaded machine may take to.
const (
	ReactionFloor = 2 * time.Minute
	reactionWall  = 250 * time.Millisecond
)

func (d *Driver) wallWait(next time.Time) time.Duration {
	wait := min(next.Sub(d.opt.Now()), d.opt.Every)
	return max(time.Duration(float64(wait)/d.opt.Speed), 50*time.Millisecond)
}

type progress struct {
	planner.LiveState
	Key       string      `json:"key,omitempty"`
	Row       string      `json:"row,omitempty"`
	DownUntil []time.Time `json:"down_until,omitempty"`
	// Reported is what the job itself last reported.
	Reported  *float64 `json:"reported,omitempty"`
	ReportErr string   `json:"report_error,omitempty"`
	// OnTime is the on-time chance the last review computed.
	OnTime  *float64 `json:"on_time,omitempty"`
	OddsLow bool     `json:"odds_low,omitempty"`
}

type jobRun struct {
	d     *Driver
	j     ledger.Job
	lj    planner.LiveJob
	p     progress
	now   time.Time
	next  time.Time
	rows  []ledger.Entry
	saved bool
}

func (d *Driver) review(ctx context.Context, j ledger.Job, now time.Time) (*jobRun, error) {
	r := &jobRun{d: d, j: j, now: now, next: now.Add(d.opt.Every)}
	if err := json.Unmarshal(j.Live, &r.lj); err != nil {
		return nil, fmt.Errorf("its plan: %w", err)
	}
	r.lj.Reaction = d.reaction().Hours()
	r.p.LiveState = planner.NewLiveState(r.lj.Start)
	if len(j.Progress) > 2 {
		if err := json.Unmarshal(j.Progress, &r.p); err != nil {
			return nil, fmt.Errorf("its progress: %w", err)
		}
	}
	if len(r.p.DownUntil) != len(r.lj.Lanes) {
		r.p.DownUntil = make([]time.Time, len(r.lj.Lanes))
	}
	return r, r.step(ctx)
}

func (r *jobRun) step(ctx context.Context) error {
	if r.now.Before(r.lj.Start) {
		r.next = r.lj.Start
		return nil
	}
	if r.j.State == ledger.JobScheduled {
		r.j.State = ledger.JobRunning
	}
	if err := r.readRows(ctx); err != nil {
		return err
	}
	interrupted, err := r.readHeld(ctx)
	if err != nil {
		return err
	}
	r.p.LiveState = r.lj.Advance(r.p.LiveState, r.now)
	if interrupted != "" {
		from := r.laneName(r.p.Cur)
		r.endHeld(ctx, "interrupted")
		if err := r.d.at("interrupt-ended"); err != nil {
			return err
		}
		r.p.LiveState = r.lj.Interrupted(r.p.LiveState)
		if _, err := r.move(ctx, ledger.JobMove{From: from, To: "none", Reason: interrupted}); err != nil {
			return err
		}
	}
	if err := r.readReported(ctx); err != nil {
		return err
	}
	spent := r.spent()
	r.j.SpentUSD, r.j.WorkDone = spent, r.p.Progress()
	if r.lj.Done(r.p.LiveState) {
		return r.finish(ctx, ledger.JobDone, fmt.Sprintf("done: %.1f h of work, $%.2f spent (plan $%.2f)", r.p.Progress(), spent, r.j.Plan.ExpectedUSD))
	}
	// The lane held is paid until the next review or the work's end; half a
	// cent absorbs the rounding of a limit that is exactly the cost.
	ahead := r.d.opt.Every
	if fin := r.lj.Finish(r.p.LiveState); !fin.IsZero() && fin.Sub(r.now) < ahead {
		ahead = fin.Sub(r.now)
	}
	if limit := r.limit(); spent+r.hourOf(r.p.Cur)*ahead.Hours() > limit+0.005 {
		return r.finish(ctx, ledger.JobFailed, fmt.Sprintf("limit reached: $%.2f spent of $%.2f; everything it ran was ended", spent, limit))
	}
	var up []bool
	for range 4 {
		up = r.up()
		if !r.lj.Due(r.p.LiveState, up) {
			break
		}
		mv, err := r.lj.Decide(r.p.LiveState, up)
		if err != nil {
			return err
		}
		if why := r.unaffordable(mv, spent); why != "" {
			return r.finish(ctx, ledger.JobFailed, why)
		}
		ok, err := r.carry(ctx, mv, up)
		if err != nil {
			return err
		}
		if ok {
			break
		}
	}
	r.sooner(r.p.Review)
	r.sooner(r.lj.Finish(r.p.LiveState))
	r.odds(up)
	r.outlook()
	return nil
}

// sooner brings the next review forward to t, if t is set and sooner.
func (r *jobRun) sooner(t time.Time) {
	if !t.IsZero() && t.Before(r.next) {
		r.next = t
	}
}

// readRows settles what a driver that stopped left: a running fleet not
// the lane held is adopted if it is the latest launch, else ended.
func (r *jobRun) readRows(ctx context.Context) error {
	rows, err := r.d.st.JobRows(ctx, r.j.ID)
	if err != nil {
		return err
	}
	live := func(e ledger.Entry) bool {
		return e.State == ledger.StateActive || (e.State == ledger.StateScheduled && e.ProviderRef != "")
	}
	latest := -1 // the newest launch that runs (rows come in launch order)
	for i := range rows {
		row, settled, why := r.d.svc.ReconcileRow(ctx, rows[i])
		rows[i] = row
		if !settled && row.State == ledger.StatePending {
			return fmt.Errorf("launch %s (ledger row %s) is not settled yet: %s", row.IdemKey, row.ID, why)
		}
		if !settled {
			// Looked up again at each review; ended if it turns out to run.
			r.d.opt.Logger.Warn("job: a launch's outcome is unknown", "job", r.j.ID, "row", row.ID, "why", why)
		}
		if live(row) {
			latest = i
		}
	}
	r.rows = rows
	if latest >= 0 && rows[latest].IdemKey != r.p.Key {
		// A move cut short after its launch: the job holds that lane.
		if lane, ok := laneOfKey(rows[latest].IdemKey); ok && r.lj.Lane(lane) != nil {
			r.p.LiveState = r.lj.Advance(r.p.LiveState, r.now)
			r.p.LiveState = r.lj.Apply(r.p.LiveState, planner.LiveMove{To: lane, Review: r.now}, r.p.Up)
			r.p.Key, r.p.Row = rows[latest].IdemKey, rows[latest].ID
		}
	}
	for _, row := range rows {
		if live(row) && row.IdemKey != r.p.Key {
			r.end(ctx, row, "not the job's lane: left by a driver that stopped in the middle of a move")
		}
	}
	return nil
}

// readHeld says why the lane held was interrupted, if it was: a gang
// progresses only with all of its instances.
func (r *jobRun) readHeld(ctx context.Context) (string, error) {
	if r.p.Cur == planner.Idle {
		return "", nil
	}
	lane := r.lj.Lane(r.p.Cur)
	var row *ledger.Entry
	for i := range r.rows {
		if r.rows[i].IdemKey == r.p.Key && r.p.Key != "" {
			row = &r.rows[i]
		}
	}
	if row == nil {
		// The launch never reached the ledger: nothing was launched.
		return r.laneName(r.p.Cur) + ": its launch was not recorded (the driver stopped before it)", nil
	}
	if row.State != ledger.StateActive {
		return fmt.Sprintf("%s: its fleet %s is %s", r.laneName(r.p.Cur), row.ProviderRef, row.State), nil
	}
	running, err := r.d.running(ctx, *row)
	var partial interface{ Partial() bool }
	if err != nil && errors.As(err, &partial) && partial.Partial() {
		r.d.opt.Logger.Warn("job: read its fleet in part", "job", r.j.ID, "fleet", row.ProviderRef, "err", err)
		err = nil
	}
	if err != nil {
		if r.d.svc.Describe(row.Provider).Ephemeral {
			return fmt.Sprintf("%s: the simulated fleet is gone (%v)", r.laneName(r.p.Cur), err), nil
		}
		r.d.opt.Logger.Warn("job: read its fleet", "job", r.j.ID, "fleet", row.ProviderRef, "err", err)
		return "", nil
	}
	if running < lane.Instances {
		return fmt.Sprintf("%s interrupted at %s (%d of %d instances run and are not being taken back)", r.laneName(r.p.Cur), r.now.UTC().Format("15:04"), running, lane.Instances), nil
	}
	return "", nil
}

func (d *Driver) running(ctx context.Context, row ledger.Entry) (int, error) {
	p := d.provs[row.Provider]
	cctx, cancel := context.WithTimeout(ctx, d.svc.Timeout())
	defer cancel()
	if w, ok := p.(FleetWatcher); ok {
		return w.WatchFleet(cctx, row.Region, row.ProviderRef)
	}
	fl, ok := p.(domain.FleetLauncher)
	if !ok {
		return 0, fmt.Errorf("provider %s is not in use in this run", row.Provider)
	}
	f, err := fl.DescribeFleet(cctx, row.Region, row.ProviderRef)
	if err != nil {
		return 0, err
	}
	if f.State != "" && f.State != ledger.StateActive && f.State != ledger.StatePending {
		return 0, nil
	}
	return f.Instances, nil
}

// up says which spot lanes have capacity now, as far as can be known.
func (r *jobRun) up() []bool {
	up := make([]bool, len(r.lj.Lanes))
	for i, l := range r.lj.Lanes {
		if r.now.Before(r.p.DownUntil[i]) {
			r.sooner(r.p.DownUntil[i])
			continue
		}
		up[i] = true
		if c, ok := r.d.provs[l.Provider].(CapacityReader); ok {
			u, until, err := c.SpotCapacity(l.Pool, l.Instances, r.now)
			if err == nil {
				up[i] = u
				if until.After(r.now) {
					r.sooner(until)
				}
			}
		}
	}
	return up
}

// carry carries a decision out; !ok (no capacity) asks the policy again.
func (r *jobRun) carry(ctx context.Context, mv planner.LiveMove, up []bool) (bool, error) {
	if mv.To == r.p.Cur {
		r.p.LiveState = r.lj.Apply(r.p.LiveState, mv, up)
		return true, nil
	}
	from, to := r.laneName(r.p.Cur), r.laneName(mv.To)
	reason := r.why(mv.To)
	if r.p.Cur != planner.Idle {
		r.endHeld(ctx, "moved to "+to)
		if err := r.d.at("old-ended"); err != nil {
			return false, err
		}
	}
	if mv.To == planner.Idle {
		r.p.LiveState = r.lj.Apply(r.p.LiveState, mv, up)
		_, err := r.move(ctx, ledger.JobMove{From: from, To: "none", Reason: reason})
		return true, err
	}
	key := fmt.Sprintf("%s-%d-L%d", r.j.ID, r.j.Seq+1, mv.To)
	if _, err := r.move(ctx, ledger.JobMove{From: from, To: to, Reason: reason, Key: key}); err != nil {
		return false, err
	}
	if err := r.d.at("move-recorded"); err != nil {
		return false, err
	}
	row, err := r.launch(ctx, mv.To, key)
	if herr := r.d.at("launched"); herr != nil {
		return false, herr
	}
	if err != nil || row.State != ledger.StateActive {
		// Either way the pool is left alone a while and another is tried.
		what, why := "launch found no capacity", cmp.Or(row.Error, "no capacity")
		if err != nil {
			what, why = "launch failed", err.Error()
		}
		r.d.opt.Logger.Info("job: "+what, "job", r.j.ID, "lane", to, "why", why)
		if row.ID != "" && row.State == ledger.StateActive {
			r.end(ctx, row, "short of the job's instances")
		}
		if mv.To < len(r.p.DownUntil) {
			r.p.DownUntil[mv.To] = r.now.Add(downFor)
		}
		r.p.LiveState = r.lj.Apply(r.p.LiveState, mv, up)
		r.p.LiveState = r.lj.Interrupted(r.p.LiveState)
		r.p.Key, r.p.Row = "", ""
		if _, merr := r.move(ctx, ledger.JobMove{From: to, To: "none", Reason: to + ": " + what + " (" + short(why) + ")"}); merr != nil {
			return false, merr
		}
		if mv.To == r.lj.OnDemandLane() {
			return true, nil // asked again at the next review
		}
		return false, nil
	}
	r.p.LiveState = r.lj.Apply(r.p.LiveState, mv, up)
	r.p.Key, r.p.Row = key, row.ID
	r.rows = append(r.rows, row)
	if mv.To == r.lj.OnDemandLane() && r.d.opt.Alert != nil {
		r.d.opt.Alert(r.j, r.j.ID+"/on-demand", fmt.Sprintf("job %s switched to on-demand (%s): %s", r.j.ID, to, reason))
	}
	return true, nil
}

// launch launches the lane's fleet under the move's key; a fleet short of
// the lane's instances is ended and counts as no capacity.
func (r *jobRun) launch(ctx context.Context, lane int, key string) (ledger.Entry, error) {
	l := r.lj.Lane(lane)
	spec := domain.FleetSpec{Provider: l.Provider, Region: l.Region, InstanceTypes: []string{l.InstanceType}, TargetCapacity: l.Instances,
		ClientToken: key, Actor: r.actor()}
	if l.Zone != "" && lane != r.lj.OnDemandLane() {
		spec.Zones = []string{l.Zone}
	}
	if lane == r.lj.OnDemandLane() {
		spec.OnDemandBase = l.Instances
	}
	if r.d.opt.Template != nil {
		spec.LaunchTemplate = r.d.opt.Template(l.Provider)
	}
	req := ledger.FleetRequest{Spec: spec, Estimate: ledger.FleetEstimate{USDHour: l.USDHour}, Job: r.j.ID, Actor: r.actor()}
	res, err := r.d.svc.LaunchFleet(ctx, req)
	var changed *ledger.EstimateChangedError
	if errors.As(err, &changed) {
		// The job's hold covers its launches; its limit is checked at reviews.
		req.Estimate = changed.Now
		res, err = r.d.svc.LaunchFleet(ctx, req)
	}
	if err != nil {
		return res.Row, err
	}
	if res.Row.State == ledger.StateActive && res.Fleet.Instances < l.Instances {
		r.end(ctx, res.Row, fmt.Sprintf("launched %d of %d instances: the job needs all", res.Fleet.Instances, l.Instances))
		res.Row.State = ledger.StateDeleted
		res.Row.Error = fmt.Sprintf("launched %d of %d instances", res.Fleet.Instances, l.Instances)
	}
	return res.Row, nil
}

func (r *jobRun) actor() string {
	if r.j.Actor != "" {
		return r.j.Actor + " (job " + r.j.ID + ")"
	}
	return "job " + r.j.ID
}

func (r *jobRun) why(to int) string {
	switch {
	case to == planner.Idle:
		return "waiting: no pool is worth taking now and the slack allows it"
	case to == r.lj.OnDemandLane():
		return fmt.Sprintf("safety net: %.1f h of work left, deadline %s", r.lj.Work-r.p.Progress(), r.lj.Deadline.UTC().Format("Jan 2 15:04"))
	case r.p.Cur == r.lj.OnDemandLane():
		return "back to spot: a pool has capacity and the slack allows it"
	}
	return "cheapest pool with capacity now"
}

func (r *jobRun) endHeld(ctx context.Context, why string) {
	for _, row := range r.rows {
		if row.IdemKey == r.p.Key && r.p.Key != "" {
			r.end(ctx, row, why)
		}
	}
	r.p.Key, r.p.Row = "", ""
}

// end deletes a row's fleet: one that runs, or one scheduled.
func (r *jobRun) end(ctx context.Context, row ledger.Entry, why string) {
	if row.State != ledger.StateScheduled && (row.State != ledger.StateActive || row.ProviderRef == "") {
		return
	}
	if _, err := r.d.svc.DeleteFleet(ctx, row.ID, "job "+r.j.ID+" ("+why+")"); err != nil {
		r.d.opt.Logger.Warn("job: end its fleet", "job", r.j.ID, "fleet", row.ProviderRef, "err", err)
	}
}

func (r *jobRun) endAll(ctx context.Context, why string) {
	rows, err := r.d.st.JobRows(ctx, r.j.ID)
	if err != nil {
		rows = r.rows
	}
	for _, row := range rows {
		r.end(ctx, row, why)
	}
	r.p.Key, r.p.Row = "", ""
}

func (r *jobRun) finish(ctx context.Context, state, reason string) error {
	r.endAll(ctx, reason)
	if r.p.Cur != planner.Idle {
		from := r.laneName(r.p.Cur)
		r.p.LiveState = r.lj.Apply(r.p.LiveState, planner.LiveMove{To: planner.Idle}, r.p.Up)
		if _, err := r.move(ctx, ledger.JobMove{From: from, To: "none", Reason: reason}); err != nil {
			return err
		}
	}
	r.j.SpentUSD = r.spent()
	if err := r.save(ctx); err != nil {
		return err
	}
	if _, err := r.d.st.EndJob(ctx, r.j.ID, state, reason, r.now); err != nil {
		return err
	}
	r.j.State = state
	_ = r.d.st.ReleaseLease(ctx, r.j.ID, r.d.holder)
	if r.d.opt.Alert != nil {
		r.d.opt.Alert(r.j, r.j.ID+"/"+state, fmt.Sprintf("job %s %s", r.j.ID, reason))
	}
	r.next = time.Time{}
	return nil
}

func (r *jobRun) move(ctx context.Context, m ledger.JobMove) (ledger.JobMove, error) {
	m.At = r.now
	out, err := r.d.st.RecordMove(ctx, r.j.ID, r.d.holder, m)
	if err == nil {
		r.j.Seq = out.Seq
	}
	return out, err
}

func (r *jobRun) prepare() error {
	b, err := json.Marshal(r.p)
	if err != nil {
		return err
	}
	r.j.Progress = b
	r.j.LeaseUntil = r.now.Add(r.d.opt.Lease)
	return nil
}

func (r *jobRun) save(ctx context.Context) error {
	if err := r.prepare(); err != nil {
		return err
	}
	r.saved = true
	_, err := r.d.st.SaveJob(ctx, r.j, r.d.holder)
	return err
}

func (r *jobRun) spent() float64 { return ledger.JobSpent(r.rows, r.now) }

func (r *jobRun) limit() float64 {
	if r.j.MaxUSD > 0 {
		return r.j.MaxUSD
	}
	return r.j.HoldUSD
}

// unaffordable says why a move to the safety net cannot be paid within the
// job's limit: its cost to the end is known, and a job stopped at its limit
// after buying most of it has paid for nothing.
func (r *jobRun) unaffordable(mv planner.LiveMove, spent float64) string {
	l := r.lj.Lane(mv.To)
	if mv.To != r.lj.OnDemandLane() || mv.To == r.p.Cur || l == nil || l.Speed <= 0 {
		return ""
	}
	left := r.lj.Work - r.p.Progress()
	cost := l.USDHour * (left/l.Speed + r.lj.D)
	if limit := r.limit(); spent+cost > limit {
		return fmt.Sprintf("limit: the on-demand safety net (%s) would cost $%.2f for the %.1f h of work left, $%.2f with the $%.2f spent, over the job's limit of $%.2f; nothing launched (a job started with a larger --max-usd can finish it)",
			r.laneName(mv.To), cost, left, spent+cost, spent, limit)
	}
	return ""
}

func (r *jobRun) hourOf(i int) float64 {
	if l := r.lj.Lane(i); l != nil {
		return l.USDHour
	}
	return 0
}

func (r *jobRun) outlook() {
	left := r.lj.Work - r.p.Progress()
	l := r.lj.Lane(r.p.Cur)
	if l == nil {
		l = r.lj.OnDemand
	}
	if l == nil || l.Speed <= 0 {
		r.j.Outlook = fmt.Sprintf("%.1f h of work left; waiting for capacity", left)
		return
	}
	fin := r.now.Add(time.Duration((r.p.Over + left/l.Speed) * float64(time.Hour)))
	word := "on time"
	if fin.After(r.lj.Deadline) {
		word = "late"
	}
	r.j.Outlook = fmt.Sprintf("%.1f h of work left; at this pace done %s (%s)", left, fin.UTC().Format("Jan 2 15:04 UTC"), word)
	// Behind the plan's line: less done than a uniform pace asks.
	line := r.lj.Work * r.now.Sub(r.lj.Start).Hours() / r.lj.Deadline.Sub(r.lj.Start).Hours()
	if fin.After(r.lj.Deadline) && r.p.Progress() < line && r.d.opt.Alert != nil {
		r.d.opt.Alert(r.j, r.j.ID+"/behind", fmt.Sprintf("job %s is behind its line: %.1f h of %.1f done", r.j.ID, r.p.Progress(), r.lj.Work))
	}
}

func (r *jobRun) laneName(i int) string {
	l := r.lj.Lane(i)
	if l == nil {
		return "none"
	}
	place := l.Region
	if l.Zone != "" && i != r.lj.OnDemandLane() {
		place = l.Zone
	}
	kind := "spot"
	if i == r.lj.OnDemandLane() {
		kind = "on-demand"
	}
	return fmt.Sprintf("%s %s %d×%s %s", l.Provider, place, l.Instances, l.InstanceType, kind)
}

// laneOfKey reads the lane from a launch key "<job>-<seq>-L<lane>".
func laneOfKey(key string) (int, bool) {
	i := strings.LastIndex(key, "-L")
	if i < 0 {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(key[i+2:], "%d", &n); err != nil {
		return 0, false
	}
	return n, true
}

func short(s string) string {
	if len(s) > 120 {
		return s[:117] + "…"
	}
	return s
}

// Cancel records the job cancelled first, so no driver launches for it
// after, then ends everything it runs.
func Cancel(ctx context.Context, svc *ledger.Service, id, actor string) (ledger.Job, error) {
	st := svc.Store()
	j, err := st.GetJob(ctx, id)
	if err != nil {
		return j, err
	}
	if !ledger.JobActive(j.State) {
		return j, fmt.Errorf("job %s is already %s", j.ID, j.State)
	}
	reason := "cancelled"
	if actor != "" {
		reason = "cancelled by " + actor
	}
	if _, err := st.EndJob(ctx, j.ID, ledger.JobCancelled, reason, svc.Now()); err != nil {
		return j, err
	}
	rows, err := st.JobRows(ctx, j.ID)
	if err != nil {
		return j, err
	}
	var errs []error
	for _, row := range rows {
		if row.State != ledger.StateActive && row.State != ledger.StateScheduled {
			continue
		}
		if _, err := svc.DeleteFleet(ctx, row.ID, actor+" (job "+j.ID+" cancelled)"); err != nil {
			errs = append(errs, err)
		}
	}
	j, _ = st.GetJob(ctx, j.ID)
	return j, errors.Join(errs...)
}
