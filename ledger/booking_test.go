package ledger_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/cloud/aws/awserr"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type fixture struct {
	st   *ledger.Store
	fake *ledgertest.Fake
	svc  *ledger.Service
	now  time.Time
}

func newFixture(t *testing.T, dir, provider string, budget ledger.Budget) *fixture {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := ledger.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, now: t0}
	f.fake = describedAs(ledgertest.New(provider,
		ledgertest.Offering(provider, "cb-cheap", t0.Add(24*time.Hour), 48, 1, 2000),
		ledgertest.Offering(provider, "cb-dear", t0.Add(48*time.Hour), 24, 2, 9000),
	))
	f.svc = ledger.New(st, []domain.Provider{f.fake}, ledger.Options{Budget: budget, Now: func() time.Time { return f.now },
		Timeout: time.Second, Actor: "tester"})
	return f
}

// describedAs makes a fake named after a real provider describe itself
// as that provider does: the simulated market's answers, AWS's error
// codes (the booking service learns both from the descriptor only).
func describedAs(f *ledgertest.Fake) *ledgertest.Fake {
	switch f.Name() {
	case "sim":
		return f.Simulated()
	case "aws":
		f.Desc.Cloud, f.Desc.Declined = domain.CloudAWS, awserr.Declined
	}
	return f
}

// bookInFlight starts a purchase of cb-cheap by actor whose call blocks
// until release is closed; it returns once the call is on the wire.
func bookInFlight(t *testing.T, f *fixture, actor string) (release chan struct{}, done <-chan error) {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	f.fake.BookHook = func(context.Context, domain.BookRequest) error {
		close(started)
		<-release
		return nil
	}
	out := make(chan error, 1)
	go func() {
		_, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap", Actor: actor})
		out <- err
	}()
	<-started
	return release, out
}

func (f *fixture) search(t *testing.T) ledger.Search {
	t.Helper()
	res, err := f.svc.FindOfferings(context.Background(), domain.OfferingQuery{GPU: "H100", Instances: 1, Duration: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestBookRecordsOutcome(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	res := f.search(t)
	if len(res.Offerings) != 2 || res.Offerings[0].ID != "cb-cheap" {
		t.Fatalf("offerings sorted by $/GPU-h: %+v", res.Offerings)
	}
	ctx := context.Background()
	out, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Row
	if r.State != ledger.StateScheduled || r.ProviderRef != "cr-cb-cheap" || r.CostUSD != 2000 || r.GPUCount != 8 ||
		r.Actor != "tester" || !r.Start.Equal(t0.Add(24*time.Hour)) || r.Kind != ledger.KindBlock {
		t.Fatalf("row %+v", r)
	}
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases, want 1", n)
	}
	// The booked offering disappears from later searches, even when the
	// provider still offers it (the sim in another process).
	if res := f.search(t); len(res.Offerings) != 1 || res.Offerings[0].ID != "cb-dear" {
		t.Fatalf("after booking: %+v", res.Offerings)
	}
}

func TestDoubleBookRefused(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx := context.Background()
	first, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if !errors.Is(err, ledger.ErrDuplicate) || !strings.Contains(err.Error(), first.Row.ID) || !strings.Contains(err.Error(), "already booked") {
		t.Fatalf("second purchase: %v", err)
	}
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases, want 1", n)
	}
}

func TestBudgetRefusedBeforeAnyCall(t *testing.T) {
	ctx := context.Background()
	t.Run("max_booking_usd", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 5000})
		f.search(t)
		_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-dear"})
		var be *ledger.BudgetError
		if !errors.As(err, &be) || be.CostUSD != 9000 || be.CapUSD != 5000 || !strings.Contains(err.Error(), "$9000.00") {
			t.Fatalf("err %v", err)
		}
		if f.fake.Calls("Book")+f.fake.Calls("BookDryRun") != 0 {
			t.Fatal("a purchase call was made over budget")
		}
		// A dry run says it would be refused, and still brings the
		// cloud's answer to its own dry run; nothing is bought.
		dry, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-dear", DryRun: true})
		if !errors.Is(err, ledger.ErrBudget) || !dry.Booking.DryRun || f.fake.Calls("Book") != 0 {
			t.Fatalf("dry run over budget: %+v, %v", dry.Booking, err)
		}
		noRows(t, f.st)
	})
	t.Run("max_daily_usd", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 10000, MaxDailyUSD: 10000})
		f.search(t)
		if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); err != nil {
			t.Fatal(err)
		}
		_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-dear"})
		var be *ledger.BudgetError
		if !errors.As(err, &be) || be.Cap != "max_daily_usd" || be.SpentUSD != 2000 || !strings.Contains(err.Error(), "$11000.00") {
			t.Fatalf("err %v", err)
		}
		if n := f.fake.Calls("Book"); n != 1 {
			t.Fatalf("%d purchases, want 1", n)
		}
		// The next UTC day has its own budget.
		f.now = f.now.Add(20 * time.Hour)
		f.search(t)
		if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-dear"}); err != nil {
			t.Fatalf("next day: %v", err)
		}
	})
}

func TestDryRunBuysNothing(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	res, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || !res.Booking.DryRun || !strings.Contains(res.Booking.Message, "would have succeeded") {
		t.Fatalf("dry run result %+v", res)
	}
	if f.fake.Calls("Book") != 0 || f.fake.Calls("BookDryRun") != 1 || f.fake.Bought("cb-cheap") {
		t.Fatalf("calls: book %d dry %d", f.fake.Calls("Book"), f.fake.Calls("BookDryRun"))
	}
	noRows(t, f.st)
}

func TestExpiredOrUnknownOfferingRefused(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	f.now = f.now.Add(2 * time.Hour)
	if _, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"}); !errors.Is(err, ledger.ErrOfferingExpired) ||
		!strings.Contains(err.Error(), "search again") {
		t.Fatalf("expired: %v", err)
	}
	if _, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-nope"}); !errors.Is(err, ledger.ErrOfferingUnknown) {
		t.Fatalf("unknown: %v", err)
	}
	if f.fake.Calls("Book") != 0 {
		t.Fatal("purchase sent")
	}
}

func TestTimedOutPurchaseIsNeverResent(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	// The cloud buys, then the answer never comes within the timeout.
	f.fake.BuyThenFail = true
	f.fake.BookHook = func(ctx context.Context, _ domain.BookRequest) error {
		<-ctx.Done()
		return ctx.Err()
	}
	ctx := context.Background()
	_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	var ue *ledger.UnknownError
	if !errors.As(err, &ue) || !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("timed out purchase: %v", err)
	}
	row, _ := f.st.Get(ctx, ue.Row.ID)
	if row.State != ledger.StateUnknown {
		t.Fatalf("row state %q, want unknown", row.State)
	}
	f.fake.BookHook = nil
	// Running the same command again reconciles, finds the purchase, and
	// still does not buy again.
	_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("retry: %v", err)
	}
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases sent, want 1", n)
	}
	row, _ = f.st.Get(ctx, ue.Row.ID)
	if row.State != ledger.StateScheduled || row.ProviderRef != "cr-cb-cheap" {
		t.Fatalf("reconciled row %+v", row)
	}
}

func TestUnknownNotFoundStaysUnknown(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	f.fake.BookHook = func(ctx context.Context, _ domain.BookRequest) error {
		return errors.New("connection reset by peer")
	}
	ctx := context.Background()
	if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatalf("lost answer: %v", err)
	}
	rep, err := f.svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Unsettled) != 1 || rep.Unsettled[0].Row.State != ledger.StateUnknown || !strings.Contains(rep.Unsettled[0].Reason, "never retried") {
		t.Fatalf("report %+v", rep)
	}
	_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err == nil || !strings.Contains(err.Error(), "unknown outcome") {
		t.Fatalf("retry while unknown: %v", err)
	}
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases sent, want 1", n)
	}
}

func TestDeclinedIsFailedAndRetryable(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	f.fake.BookHook = func(ctx context.Context, _ domain.BookRequest) error {
		return errors.Join(domain.ErrDeclined, errors.New("InsufficientInstanceCapacity"))
	}
	ctx := context.Background()
	res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err == nil || res.Row.State != ledger.StateFailed || !strings.Contains(res.Row.Error, "InsufficientInstanceCapacity") {
		t.Fatalf("declined: %v %+v", err, res.Row)
	}
	f.fake.BookHook = nil
	if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); err != nil {
		t.Fatalf("retry after a declined purchase: %v", err)
	}
	// The failed row does not count against the day's budget.
	spent, _ := f.st.DaySpent(ctx, f.now)
	if spent != 2000 {
		t.Fatalf("day spent %v, want 2000", spent)
	}
}

type codedErr struct{ code string }

func (e codedErr) Error() string     { return "api error " + e.code }
func (e codedErr) ErrorCode() string { return e.code }

func TestAPIErrorCodes(t *testing.T) {
	for code, want := range map[string]string{"InsufficientInstanceCapacity": ledger.StateFailed, "InternalError": ledger.StateUnknown} {
		f := newFixture(t, "", "aws", ledger.Budget{})
		f.search(t)
		f.fake.BookHook = func(context.Context, domain.BookRequest) error { return codedErr{code} }
		res, _ := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
		if res.Row.State != want {
			t.Errorf("%s: state %q, want %q", code, res.Row.State, want)
		}
	}
}

// statusErr is an API error that came with an HTTP status, as the AWS
// SDK's errors do (smithyhttp.ResponseError).
type statusErr struct {
	codedErr
	status int
}

func (e statusErr) HTTPStatusCode() int { return e.status }

// TestLostAnswerBehindAProxyIsUnknown: a 5xx whose body is not an EC2
// error document reaches the booking service as the code "UnknownError";
// the purchase may have been made, so it is unknown, never failed (which
// would let the same offering be bought again).
func TestLostAnswerBehindAProxyIsUnknown(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{statusErr{codedErr{"UnknownError"}, 502}, ledger.StateUnknown},
		{statusErr{codedErr{"UnknownError"}, 400}, ledger.StateUnknown},
		{statusErr{codedErr{"SomethingNew"}, 500}, ledger.StateUnknown},
		{statusErr{codedErr{"RequestLimitExceeded"}, 503}, ledger.StateFailed},
		{statusErr{codedErr{"InsufficientInstanceCapacity"}, 500}, ledger.StateFailed},
		{statusErr{codedErr{"InvalidParameterValue"}, 400}, ledger.StateFailed},
	} {
		f := newFixture(t, "", "aws", ledger.Budget{})
		f.search(t)
		f.fake.BookHook = func(context.Context, domain.BookRequest) error { return c.err }
		res, _ := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
		if res.Row.State != c.want {
			t.Errorf("%v (HTTP %d): state %q, want %q", c.err, c.err.(statusErr).status, res.Row.State, c.want)
		}
	}
}

func TestBlocksFollowTheClock(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx := context.Background()
	res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{{t0.Add(25 * time.Hour), ledger.StateActive}, {t0.Add(80 * time.Hour), ledger.StateEnded}} {
		f.now = c.at
		if _, err := f.svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		r, _ := f.st.Get(ctx, res.Row.ID)
		if r.State != c.want {
			t.Fatalf("at %s: %s, want %s", c.at, r.State, c.want)
		}
	}
}

func TestSimRowLostWithItsProcessIsSettledFailed(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, "sim", ledger.Budget{})
	f.search(t)
	f.fake.BookHook = func(ctx context.Context, _ domain.BookRequest) error { return context.DeadlineExceeded }
	if _, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"}); !errors.Is(err, ledger.ErrUnknownOutcome) {
		t.Fatal(err)
	}
	// A new process: a fresh simulated market that never heard of it.
	g := newFixture(t, dir, "sim", ledger.Budget{})
	rep, err := g.svc.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Settled) != 1 || rep.Settled[0].State != ledger.StateFailed || !strings.Contains(rep.Settled[0].Error, "nothing was spent") {
		t.Fatalf("report %+v", rep)
	}
}

// The crash test re-runs this test binary as a child that records a
// purchase intent and is killed (SIGKILL) inside the purchase call.
const crashEnv = "GPUMARKET_BOOKING_CRASH_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		bookingChild(dir, ledger.Options{}, func(context.Context, domain.BookRequest) error {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		})
		return
	}
	if dir := os.Getenv(hangEnv); dir != "" {
		// Another process with a purchase in flight.
		bookingChild(dir, ledger.Options{Timeout: time.Hour}, func(context.Context, domain.BookRequest) error { select {} })
		return
	}
	os.Exit(m.Run())
}

// bookingChild books cb-cheap, which the parent's search found, from
// the data dir with hook inside the purchase call; it never returns.
func bookingChild(dir string, opt ledger.Options, hook func(context.Context, domain.BookRequest) error) {
	st, err := ledger.Open(dir)
	if err != nil {
		os.Exit(3)
	}
	c, err := st.Offering(context.Background(), "cb-cheap", time.Now())
	if err != nil {
		os.Exit(3)
	}
	fake := describedAs(ledgertest.New("aws", c.Offering))
	fake.BookHook = hook
	svc := ledger.New(st, []domain.Provider{fake}, opt)
	svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
	os.Exit(4)
}

func TestKilledBetweenIntentAndOutcome(t *testing.T) {
	for _, boughtAtCloud := range []bool{true, false} {
		dir := t.TempDir()
		// The parent searches (so the id is in the store) with the real
		// clock: the child books with it.
		f := newFixture(t, dir, "aws", ledger.Budget{})
		f.now = time.Now()
		f.fake = describedAs(ledgertest.New("aws", ledgertest.Offering("aws", "cb-cheap", time.Now().Add(24*time.Hour), 48, 1, 2000)))
		f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: time.Now})
		f.search(t)

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("child: %v", err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("child did not die by SIGKILL: %v", err)
		}
		ctx := context.Background()
		rows, err := f.st.List(ctx)
		if err != nil || len(rows) != 1 || rows[0].State != ledger.StatePending {
			t.Fatalf("after the crash: %+v, %v", rows, err)
		}
		id := rows[0].ID

		// The next start, later than the call's timeout: the cloud is asked.
		if boughtAtCloud {
			o := ledgertest.Offering("aws", "cb-cheap", time.Now().Add(24*time.Hour), 48, 1, 2000)
			f.fake.Book(ctx, domain.BookRequest{Offering: o})
		}
		later := time.Now().Add(5 * time.Minute)
		next := ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return later }, Timeout: time.Second})
		rep, err := next.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := f.st.Get(ctx, id)
		if boughtAtCloud {
			if len(rep.Settled) != 1 || r.State != ledger.StateScheduled || r.ProviderRef != "cr-cb-cheap" {
				t.Fatalf("reconciled: %+v / %+v", rep, r)
			}
		} else {
			if len(rep.Unsettled) != 1 || r.State != ledger.StateUnknown {
				t.Fatalf("not found: %+v / %+v", rep, r)
			}
		}
		if f.fake.Calls("FindBooking") != 1 {
			t.Fatalf("FindBooking calls %d", f.fake.Calls("FindBooking"))
		}
	}
}

func TestFleetLaunchAndDelete(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{MaxBookingUSD: 24 * 240}) // its first day at $240/h
	f.fake.SpotUSDHour = 40
	ctx := context.Background()
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 4, OnDemandBase: 1}

	dry := spec
	dry.DryRun = true
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: dry})
	if err != nil || !res.Fleet.DryRun || f.fake.Calls("LaunchFleet") != 0 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	noRows(t, f.st)

	res, err = f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	// 1 on-demand at 120 $/h + 3 spot at 40 $/h.
	r := res.Row
	if r.State != ledger.StateActive || r.ProviderRef != "fleet-0001" || r.USDHour != 240 || r.GPUCount != 32 ||
		r.IdemKey != r.ID || !strings.HasPrefix(r.CostNote, "estimate at current prices") {
		t.Fatalf("row %+v", r)
	}
	if math.Abs(res.Estimate.USDHour-240) > 1e-9 {
		t.Fatalf("estimate %+v", res.Estimate)
	}

	big := spec
	big.TargetCapacity = 40
	if _, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: big}); !errors.Is(err, ledger.ErrBudget) {
		t.Fatalf("over budget: %v", err)
	}
	if n := f.fake.Calls("LaunchFleet"); n != 1 {
		t.Fatalf("%d launches", n)
	}

	d, err := f.svc.DeleteFleet(ctx, "fleet-0001", "tester")
	if err != nil || d.State != ledger.StateDeleted {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if _, err := f.svc.DeleteFleet(ctx, r.ID, "tester"); err == nil {
		t.Fatal("deleting twice should say it is deleted")
	}
}

func TestFleetLostAnswerIsFoundByToken(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	ctx := context.Background()
	var token string
	f.fake.LaunchHook = func(ctx context.Context, spec domain.FleetSpec) error {
		token = spec.ClientToken
		return context.DeadlineExceeded
	}
	spec := domain.FleetSpec{Provider: "aws", Region: "us-east-1", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	max := 30.0
	spec.MaxPriceUSD = &max
	res, err := f.svc.LaunchFleet(ctx, ledger.FleetRequest{Spec: spec})
	if !errors.Is(err, ledger.ErrUnknownOutcome) || token != res.Row.ID {
		t.Fatalf("lost launch: %v, token %q row %q", err, token, res.Row.ID)
	}
	// The launch did land: the cloud has a fleet for the token.
	f.fake.LaunchHook = nil
	f.fake.LaunchFleet(ctx, domain.FleetSpec{Region: "us-east-1", ClientToken: token, TargetCapacity: 2})
	rep, err := f.svc.Reconcile(ctx)
	if err != nil || len(rep.Settled) != 1 || rep.Settled[0].ProviderRef != "fleet-0001" {
		t.Fatalf("reconcile: %+v %v", rep, err)
	}
}

func TestCheckFleet(t *testing.T) {
	ok := domain.FleetSpec{Provider: "aws", Region: "r", InstanceTypes: []string{"p5.48xlarge"}, TargetCapacity: 2}
	if err := ledger.CheckFleet(ok); err != nil {
		t.Fatal(err)
	}
	bad := []func(*domain.FleetSpec){
		func(s *domain.FleetSpec) { s.Region = "" },
		func(s *domain.FleetSpec) { s.InstanceTypes = nil },
		func(s *domain.FleetSpec) { s.TargetCapacity = 0 },
		func(s *domain.FleetSpec) { s.OnDemandBase = 3 },
		func(s *domain.FleetSpec) { s.Strategy = "cheapest" },
		func(s *domain.FleetSpec) { s.MaxPriceUSD = domain.Float(-1) },
	}
	for i, mut := range bad {
		s := ok
		mut(&s)
		if err := ledger.CheckFleet(s); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

// TestSecondBookWhileFirstInFlight is the same key pressed twice (or the
// same command run twice) while the first purchase is on the wire.
func TestSecondBookWhileFirstInFlight(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx := context.Background()
	release, first := bookInFlight(t, f, "")
	_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("second press: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := f.fake.Calls("Book"); n != 1 {
		t.Fatalf("%d purchases, want 1", n)
	}
}

func TestAzureOfferingIsAReservation(t *testing.T) {
	f := newFixture(t, "", "azure", ledger.Budget{})
	o := ledgertest.Offering("azure", "azcr-1", t0.Add(24*time.Hour), 24, 1, 500)
	o.Cloud, o.Region, o.Zone, o.InstanceType = domain.CloudAzure, "eastus", "1", "Standard_ND96isr_H100_v5"
	f.fake = ledgertest.New("azure", o)
	f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second})
	f.search(t)
	ctx := context.Background()
	res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "azcr-1"})
	if err != nil || res.Row.Kind != ledger.KindReservation {
		t.Fatalf("row %+v %v", res.Row, err)
	}
	if _, err := f.svc.Quote(ctx, "azcr-1"); !errors.Is(err, ledger.ErrDuplicate) {
		t.Fatalf("quote after booking: %v", err)
	}
	if s := f.search(t); len(s.Offerings) != 0 {
		t.Fatalf("booked reservation offered again: %+v", s.Offerings)
	}
}

// TestTermsChangedSinceConfirmationRefused: the user confirms the total a
// Quote showed; if another search re-prices the same offering id before
// the purchase is sent, nothing is bought at a total they never saw.
func TestTermsChangedSinceConfirmationRefused(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx := context.Background()
	q, err := f.svc.Quote(ctx, "cb-cheap")
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile another session searches; the cloud now asks more.
	f.fake = describedAs(ledgertest.New("aws", ledgertest.Offering("aws", "cb-cheap", t0.Add(24*time.Hour), 48, 1, 2600)))
	f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second})
	f.search(t)
	_, err = f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", Confirmed: q.Offering})
	if err == nil || !strings.Contains(err.Error(), "$2600.00") || !strings.Contains(err.Error(), "$2000.00") {
		t.Fatalf("book at changed terms: %v", err)
	}
	if f.fake.Calls("Book") != 0 {
		t.Fatal("a purchase was sent at terms the user did not confirm")
	}
	noRows(t, f.st)
	// Confirming the new terms buys.
	q, _ = f.svc.Quote(ctx, "cb-cheap")
	if _, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", Confirmed: q.Offering}); err != nil {
		t.Fatal(err)
	}
}

// cancelOnIntent is a log handler that cancels the purchase's context
// the moment the intent is recorded: ctrl+c between the ledger write and
// the call.
type cancelOnIntent struct {
	slog.Handler
	cancel context.CancelFunc
}

func (h cancelOnIntent) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOnIntent) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "intent recorded") {
		h.cancel()
	}
	return nil
}

// TestCancelledBeforeTheCallIsFailed: a purchase cancelled after its
// intent is written but before the call goes out bought nothing, and the
// ledger knows it; "unknown" would hold the offering (and the day's
// budget) until someone checked the console, since no look-up can ever
// find a purchase that was never sent.
func TestCancelledBeforeTheCallIsFailed(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Second,
		Logger: slog.New(cancelOnIntent{cancel: cancel})})
	// The cloud honours a cancelled context, as the SDK does.
	f.fake.BookHook = func(ctx context.Context, _ domain.BookRequest) error { return ctx.Err() }
	res, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
	if err == nil || res.Row.State != ledger.StateFailed || !strings.Contains(res.Row.Error, "not sent") {
		t.Fatalf("cancelled before the call: %v, row %+v", err, res.Row)
	}
	if f.fake.Calls("Book") != 0 {
		t.Fatal("the purchase was sent after the cancel")
	}
	// The offering can be bought again.
	if _, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"}); err != nil {
		t.Fatal(err)
	}
}
