package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumarket/gpumarket/domain"
)

// DefaultTimeout bounds each API call that spends money.
const DefaultTimeout = 60 * time.Second

// Budget caps spending (config budget.*). Zero means no cap.
type Budget struct {
	MaxBookingUSD float64
	MaxDailyUSD   float64
	// ConfigPath is the file the caps are set in, "" for the defaults.
	ConfigPath string
}

// Options configure a Service.
type Options struct {
	Budget Budget
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// Timeout bounds each money call; 0 means DefaultTimeout.
	Timeout time.Duration
	// Actor is who acts when a request names no one ("alice@host").
	Actor string
	// Heartbeat is how often a call in flight beats; 0 means HeartbeatEvery.
	Heartbeat time.Duration
	// Describe tells of a provider not in use (a row an earlier run made).
	Describe func(name string) domain.Descriptor
}

// Service books and launches through the ledger; safe for concurrent use.
type Service struct {
	st    *Store
	provs map[string]domain.Provider
	names []string
	opt   Options

	rememberOnce sync.Once
	// keeping is set once Keep runs: this process may launch a simulated fleet.
	keeping   atomic.Bool
	fleetsNow fleetsNowCache
}

// Changes grows with every ledger row or job its store writes.
func (s *Service) Changes() uint64 { return s.st.changes.Load() }

// settle is update only from state from; on a conflict it returns the stored row.
func (s *Service) settle(ctx context.Context, r Entry, from string) (Entry, error) {
	out, err := s.st.UpdateFrom(ctx, r, from)
	if errors.Is(err, ErrConflict) {
		return s.st.Get(ctx, r.ID)
	}
	return out, err
}

// New returns a service over the store and the providers in use.
func New(st *Store, ps []domain.Provider, opt Options) *Service {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	s := &Service{st: st, provs: map[string]domain.Provider{}, opt: opt}
	for _, p := range ps {
		s.provs[p.Name()] = p
		s.names = append(s.names, p.Name())
	}
	return s
}

// Describe returns a provider's descriptor, or a bare one when it is not in use.
func (s *Service) Describe(name string) domain.Descriptor {
	if p, ok := s.provs[name]; ok {
		return p.Describe()
	}
	if s.opt.Describe != nil {
		return s.opt.Describe(name)
	}
	return domain.Descriptor{Name: name}
}

// Now is the service's clock: what it dates rows and schedules by.
func (s *Service) Now() time.Time { return s.opt.Now() }

// Store is the ledger the service writes.
func (s *Service) Store() *Store { return s.st }

// Budget is the service's budget.
func (s *Service) Budget() Budget { return s.opt.Budget }

// Timeout is the bound of each call.
func (s *Service) Timeout() time.Duration { return s.opt.Timeout }

// CanBook reports whether any provider in use sells capacity blocks.
func (s *Service) CanBook() bool {
	for _, p := range s.provs {
		if _, ok := p.(domain.Booker); ok {
			return true
		}
	}
	return false
}

// CanLaunch reports whether the named provider launches fleets.
func (s *Service) CanLaunch(provider string) bool {
	_, ok := s.provs[provider].(domain.FleetLauncher)
	return ok
}

// BudgetError refuses an action over a cap, with the figures and where the cap is set.
type BudgetError struct {
	// Cap is "max_booking_usd" or "max_daily_usd".
	Cap      string
	CapUSD   float64
	CostUSD  float64
	SpentUSD float64 // the day's sum so far, for max_daily_usd; NaN when not known
	// What says the commitment of a fleet ("90d at $4403.20/h").
	What string
	// Day is the UTC day of a max_daily_usd refusal; Today, when it is today.
	Day   time.Time
	Today bool
	// ConfigPath is the file the cap is set in ("" for the default).
	ConfigPath string
}

func (e *BudgetError) Error() string {
	key := "budget." + e.Cap
	where := fmt.Sprintf("%s is set in %s: raise it there, or set it to 0 to lift the cap", key, e.ConfigPath)
	if e.ConfigPath == "" {
		where = fmt.Sprintf("%s is the default: set it in the config file (gpumarket config), or 0 to lift the cap", key)
	}
	what := ""
	if e.What != "" {
		what = " (" + e.What + ")"
	}
	day := "today's (UTC)"
	if !e.Today && !e.Day.IsZero() {
		day = e.Day.UTC().Format("Mon 2006-01-02") + "'s (UTC)"
	}
	if e.Cap == "max_daily_usd" && math.IsNaN(e.SpentUSD) {
		return fmt.Sprintf("refused: %s spending is not known — the ledger holds purchases of that day whose cost the cloud did not say "+
			"(re-created by `gpumarket ledger --rebuild`) — so %s $%.2f cannot be checked; "+
			"nothing was bought (the cap applies again the next day; %s)", day, key, e.CapUSD, where)
	}
	if e.Cap == "max_daily_usd" {
		return fmt.Sprintf("refused: %s spending $%.2f + this $%.2f%s = $%.2f is over %s $%.2f; nothing was bought (%s)",
			day, e.SpentUSD, e.CostUSD, what, e.SpentUSD+e.CostUSD, key, e.CapUSD, where)
	}
	return fmt.Sprintf("refused: $%.2f%s is over %s $%.2f; nothing was bought (%s)", e.CostUSD, what, key, e.CapUSD, where)
}

// ErrBudget is matched by every *BudgetError.
var ErrBudget = errors.New("over budget")

// Is lets errors.Is(err, ErrBudget) match.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// ErrUnknownOutcome is matched by an *UnknownError.
var ErrUnknownOutcome = errors.New("outcome unknown")

// UnknownError is a call whose answer was lost: its row stays unknown until reconciled.
type UnknownError struct {
	Row   Entry
	Cause error
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("outcome unknown (ledger row %s): %v; it is NOT retried — `gpumarket ledger` looks it up at the provider", e.Row.ID, e.Cause)
}

// Is lets errors.Is(err, ErrUnknownOutcome) match.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknownOutcome }

// Unwrap returns the call's error.
func (e *UnknownError) Unwrap() error { return e.Cause }

// checkBudget refuses a purchase of cost today, spent already, over a cap.
func (s *Service) checkBudget(cost, spent float64) error {
	h := Hold{Whole: cost, Days: []DayAmount{{Day: s.today(), USD: cost}}}
	return s.checkHold(h, func(time.Time) (float64, error) { return spent, nil })
}

// today is the UTC midnight of the service's clock.
func (s *Service) today() time.Time {
	if s.opt.Now == nil {
		return time.Now().UTC().Truncate(24 * time.Hour)
	}
	return s.opt.Now().UTC().Truncate(24 * time.Hour)
}

// checkHold refuses a hold over a cap, in whole cents (float sums of cents overshoot).
func (s *Service) checkHold(h Hold, spent Spending) error {
	b := s.opt.Budget
	if math.IsNaN(h.Whole) {
		return errors.New("refused: the cost is unknown, so the budget cannot be checked; nothing was bought")
	}
	refuse := func(e *BudgetError) error {
		e.What, e.ConfigPath = h.What, b.ConfigPath
		return e
	}
	if b.MaxBookingUSD > 0 && cents(h.Whole) > cents(b.MaxBookingUSD) {
		return refuse(&BudgetError{Cap: "max_booking_usd", CapUSD: b.MaxBookingUSD, CostUSD: h.Whole})
	}
	if b.MaxDailyUSD <= 0 {
		return nil
	}
	today := s.today()
	for _, d := range h.Days {
		day, err := spent(d.Day)
		if err != nil {
			return err
		}
		if math.IsNaN(day) || cents(day+d.USD) > cents(b.MaxDailyUSD) {
			return refuse(&BudgetError{Cap: "max_daily_usd", CapUSD: b.MaxDailyUSD, CostUSD: d.USD, SpentUSD: day,
				Day: d.Day, Today: d.Day.Equal(today)})
		}
	}
	return nil
}

// declined reports whether err is the provider's definite "no", not a lost answer.
func (s *Service) declined(provider string, err error) bool {
	p, ok := s.provs[provider]
	if !ok {
		return errors.Is(err, domain.ErrDeclined)
	}
	return p.Describe().IsDeclined(err)
}

// Search is what FindOfferings found.
type Search struct {
	Offerings []domain.Offering
	// Failed maps a provider that gave nothing to its error.
	Failed map[string]error
	// Warnings name each provider or region that did not answer, in order.
	Warnings []Warning
	// Hidden counts offerings left out because the ledger holds them.
	Hidden int
	// SaveErr says the offerings could not be kept for a later Book by id.
	SaveErr error
	At      time.Time
}

// Warning is a provider, or one region of it, that did not answer.
type Warning struct {
	Provider string
	// Region is "" when the whole provider failed.
	Region string
	Err    error
}

func (w Warning) String() string { return fmt.Sprintf("%s: %v", w.where(), w.Err) }

// where is the provider, and the region when one failed alone.
func (w Warning) where() string { return strings.TrimSpace(w.Provider + " " + w.Region) }

// RegionErrors is returned with the offerings of the regions that answered.
type RegionErrors interface {
	error
	RegionErrors() map[string]error
}

// ledgerWork bounds a search's ledger work apart from ctx, which a hung provider may use up.
const ledgerWork = 15 * time.Second

// FindOfferings asks every block seller at once and fails only when none answered.
func (s *Service) FindOfferings(ctx context.Context, q domain.OfferingQuery) (Search, error) {
	lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerWork)
	defer lcancel()
	s.remember(lctx)
	res := Search{Failed: map[string]error{}, At: s.opt.Now()}
	if q.Instances < 0 || q.Instances > domain.MaxInstances || q.GPUs < 0 || q.GPUs > domain.MaxInstances*8 {
		return res, domain.InvalidQueryf("count %d instances (%d GPUs): want 1 to %d instances", q.Instances, q.GPUs, domain.MaxInstances)
	}
	type answer struct {
		offs []domain.Offering
		err  error
	}
	wctx, wcancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer wcancel()
	var finders []string
	answers := map[string]chan answer{}
	for _, name := range s.names {
		f, ok := s.provs[name].(domain.OfferingFinder)
		if !ok {
			continue
		}
		finders = append(finders, name)
		ch := make(chan answer, 1)
		answers[name] = ch
		go func() {
			offs, err := f.FindOfferings(wctx, q)
			ch <- answer{offs, err}
		}()
	}
	if len(finders) == 0 {
		return res, fmt.Errorf("none of the providers in use (%s) sells capacity blocks", strings.Join(s.names, ", "))
	}
	// A provider that ignores its context is not waited for past the deadline.
	answered := 0
	for _, name := range finders {
		var a answer
		select {
		case a = <-answers[name]:
		case <-wctx.Done():
			select {
			case a = <-answers[name]:
			default:
				a.err = fmt.Errorf("no answer within the search's time: %w", wctx.Err())
			}
		}
		var re RegionErrors
		switch {
		case a.err == nil:
			answered++
		case errors.As(a.err, &re):
			answered++
			for _, r := range slices.Sorted(maps.Keys(re.RegionErrors())) {
				res.Warnings = append(res.Warnings, Warning{Provider: name, Region: r, Err: re.RegionErrors()[r]})
			}
		default:
			res.Failed[name] = a.err
			res.Warnings = append(res.Warnings, Warning{Provider: name, Err: a.err})
			continue
		}
		res.Offerings = append(res.Offerings, a.offs...)
	}
	var kinds []string
	for _, t := range domain.AllTerms {
		kinds = append(kinds, t.Kind)
	}
	held, err := s.st.HeldKeys(lctx, kinds...)
	if err != nil {
		return res, err
	}
	found := len(res.Offerings)
	res.Offerings = slices.DeleteFunc(res.Offerings, func(o domain.Offering) bool { return held[o.ID] })
	res.Hidden = found - len(res.Offerings)
	sort.SliceStable(res.Offerings, func(i, j int) bool {
		a, b := res.Offerings[i], res.Offerings[j]
		// The asked length first: `book` of the top row must buy the length asked for.
		if a.FlexLength != b.FlexLength {
			return !a.FlexLength
		}
		pa, pb := a.USDPerGPUHour(), b.USDPerGPUHour()
		if pa != pb && !math.IsNaN(pa) && !math.IsNaN(pb) {
			return pa < pb
		}
		return a.Start.Before(b.Start)
	})
	if answered == 0 {
		var errs []error
		for _, w := range res.Warnings {
			// Wrapped, so a domain.ErrInvalidQuery stays one.
			errs = append(errs, fmt.Errorf("%s: %w", w.where(), w.Err))
		}
		return res, fmt.Errorf("find offerings: %w", errors.Join(errs...))
	}
	res.SaveErr = s.st.SaveOfferings(lctx, q, res.Offerings, res.At)
	return res, nil
}

// remember tells providers that forget their bookings (the simulated market) what the ledger holds.
func (s *Service) remember(ctx context.Context) {
	s.rememberOnce.Do(func() {
		remembers := func(name string) bool {
			_, ok := s.provs[name].(domain.BookingRememberer)
			return ok
		}
		if !slices.ContainsFunc(s.names, remembers) {
			return
		}
		rows, err := s.st.List(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.opt.Logger.Warn("read ledger for the simulated market", "err", err)
			}
			return
		}
		byProvider := map[string][]domain.BookedOffering{}
		for _, r := range rows {
			if !Booked(r.Kind) || r.State == StateFailed {
				continue
			}
			o, err := offeringOf(r)
			if err != nil {
				continue
			}
			byProvider[r.Provider] = append(byProvider[r.Provider], domain.BookedOffering{Offering: o, Booking: bookingOf(r)})
		}
		for _, name := range s.names {
			if r, ok := s.provs[name].(domain.BookingRememberer); ok && len(byProvider[name]) > 0 {
				r.RememberBookings(byProvider[name])
			}
		}
	})
}

// transaction is one money call over a recorded intent row.
type transaction struct {
	provider string
	noun     string // "purchase", "launch"
	subject  string // "purchase of X", "fleet launch"
	made     string // "bought", "launched"
	// cancelled is the row's state and error when ctx ended before the call: nothing was sent.
	cancelled [2]string
	// call sends it; settle writes the answer into the row, ref names what it made.
	call func(ctx context.Context) (settle func(Entry) Entry, ref string, err error)
}

// transact sends a pending intent's call and records its outcome, even past ctx:
// a definite no fails the row; a lost answer leaves it unknown, never re-sent.
func (s *Service) transact(ctx context.Context, row Entry, t transaction) (Entry, error) {
	defer s.st.EndCall(row.ID)
	defer s.beat(ctx, row.ID)()
	wctx := context.WithoutCancel(ctx)
	if err := ctx.Err(); err != nil {
		row.State, row.Error = t.cancelled[0], t.cancelled[1]
		if row.State == StateScheduled {
			row.Start = row.Schedule.Start // as asked, not the start of the launch that was not sent
		}
		out, uerr := s.st.Update(wctx, row)
		if uerr != nil {
			return out, fmt.Errorf("record cancelled %s %s: %w", t.noun, row.ID, uerr)
		}
		return out, fmt.Errorf("%s not sent: %w", t.subject, err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	settle, ref, callErr := t.call(cctx)
	cancel()
	if callErr != nil {
		if s.declined(t.provider, callErr) {
			row.State, row.Error = StateFailed, callErr.Error()
			out, err := s.st.Update(wctx, row)
			if err != nil {
				return out, fmt.Errorf("record failed %s %s: %w (%s error: %v)", t.noun, row.ID, err, t.noun, callErr)
			}
			return out, fmt.Errorf("%s declined by %s: %w", t.subject, t.provider, callErr)
		}
		row.State, row.Error = StateUnknown, "no answer: "+callErr.Error()
		out, err := s.st.Update(wctx, row)
		if err != nil {
			return out, fmt.Errorf("record unknown %s %s: %w (%s error: %v)", t.noun, row.ID, err, t.noun, callErr)
		}
		s.opt.Logger.Warn(t.noun+" outcome unknown", "row", row.ID, "err", callErr)
		return out, &UnknownError{Row: out, Cause: callErr}
	}
	out, err := s.st.Update(wctx, settle(row))
	if err != nil {
		return out, fmt.Errorf("record %s %s (%s: %s): %w", t.noun, row.ID, t.made, ref, err)
	}
	return out, nil
}

// beat beats the row's heartbeat until stop: other hosts read it.
func (s *Service) beat(ctx context.Context, id string) (stop func()) {
	every := s.opt.Heartbeat
	if every <= 0 {
		every = HeartbeatEvery
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := s.st.Beat(context.WithoutCancel(ctx), id, s.opt.Now()); err != nil {
					s.opt.Logger.Warn("heartbeat of a call in flight", "row", id, "err", err)
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
