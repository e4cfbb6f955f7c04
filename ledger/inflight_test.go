package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// hangEnv makes the test binary a child that books cb-cheap and waits on
// the purchase call forever: another process with a purchase in flight.
const hangEnv = "GPUMARKET_BOOKING_HANG_DIR"

// TestInFlightInAnotherProcess: `ledger --timeout 1s` marked
// a purchase that another process was still waiting on as unknown ("the
// process stopped between intent and answer"). The row names its owner,
// whose lock says it is alive: a reconciliation with a one-millisecond
// timeout and a clock a day ahead leaves it pending, and a second
// purchase is refused as in flight. Once the owner is killed, the next
// reconciliation takes it up.
func TestInFlightInAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, "aws", ledger.Budget{})
	f.now = time.Now()
	f.fake = describedAs(ledgertest.New("aws", ledgertest.Offering("aws", "cb-cheap", time.Now().Add(24*time.Hour), 48, 1, 2000)))
	f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: time.Now})
	f.search(t)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), hangEnv+"="+dir)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() { child.Process.Kill() })
	var row ledger.Entry
	deadline := time.Now().Add(20 * time.Second)
	for row.ID == "" {
		if time.Now().After(deadline) {
			t.Fatal("the child recorded no intent")
		}
		select {
		case err := <-exited:
			t.Fatalf("the child ended: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if rows := listRows(t, f.st); len(rows) == 1 {
			row = rows[0]
		}
	}
	if row.State != ledger.StatePending || !strings.Contains(row.Owner, "/") || row.Owner == f.st.Owner().String() {
		t.Fatalf("the child's row %+v: want pending, owned by the child", row)
	}

	// This process, with its own (tiny) timeout and a clock a day ahead.
	later := time.Now().Add(24 * time.Hour)
	obs := ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return later }, Timeout: time.Millisecond})
	ctx := context.Background()
	rep, err := obs.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Unsettled) != 1 || !strings.Contains(rep.Unsettled[0].Reason, "in flight") {
		t.Fatalf("report %+v: want the row in flight", rep)
	}
	if r, _ := f.st.Get(ctx, row.ID); r.State != ledger.StatePending {
		t.Fatalf("a purchase another process waits on was moved to %s", r.State)
	}
	again := ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Timeout: time.Millisecond})
	if _, err := again.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("a second purchase while the first is in flight: %v", err)
	}
	if f.fake.Calls("FindBooking")+f.fake.Calls("Book") != 0 {
		t.Fatal("the provider was asked about a purchase still in flight")
	}

	// The owner dies: its call is over, and the row is looked up.
	child.Process.Signal(syscall.SIGKILL)
	<-exited
	rep, err = obs.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := f.st.Get(ctx, row.ID)
	if r.State != ledger.StateUnknown || f.fake.Calls("FindBooking") != 1 || !strings.Contains(r.Error, "no longer makes the call") {
		t.Fatalf("after the owner died: %+v (report %+v)", r, rep)
	}
}

// TestInFlightTwoStoresOneFile: the same with two handles on one file in
// one process, and the legacy rule for a row that names no owner.
func TestInFlightTwoStoresOneFile(t *testing.T) {
	dir := t.TempDir()
	a := newFixture(t, dir, "aws", ledger.Budget{})
	a.search(t)
	b := newFixture(t, dir, "aws", ledger.Budget{})
	b.now = t0.Add(time.Hour) // an hour later by b's clock: far past a's timeout
	b.fake = a.fake
	b.svc = ledger.New(b.st, []domain.Provider{a.fake}, ledger.Options{Now: func() time.Time { return b.now }, Timeout: time.Millisecond})

	release, done := bookInFlight(t, a, "")
	ctx := context.Background()
	rep, err := b.svc.Reconcile(ctx)
	if err != nil || len(rep.Unsettled) != 1 || !strings.Contains(rep.Unsettled[0].Reason, "still waiting") {
		t.Fatalf("report %+v, %v", rep, err)
	}
	close(release)
	within(t, 10*time.Second, "the purchase", func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	rows := listRows(t, a.st)
	if len(rows) != 1 || rows[0].State != ledger.StateScheduled {
		t.Fatalf("rows %+v", rows)
	}

}

// TestInFlightWithoutOwner: a pending row that names no owner (written
// by an earlier gpumarket) is in flight for the longest a call may take
// — the same for every process, whatever its own timeout.
func TestInFlightWithoutOwner(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, "aws", ledger.Budget{})
	ctx := context.Background()
	r, err := f.st.RecordIntent(ctx, ledger.Entry{Kind: ledger.KindBlock, Provider: "aws", IdemKey: "cb-x", State: ledger.StatePending,
		CreatedAt: t0, Request: []byte(`{"ID":"cb-x","Provider":"aws"}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.st.EndCall(r.ID)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, ledger.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE ledger SET owner = '', heartbeat_at = '' WHERE id = ?`, r.ID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, c := range []struct {
		after    time.Duration
		inFlight bool
	}{{time.Minute, true}, {89 * time.Second, true}, {91 * time.Second, false}} {
		f.now = t0.Add(c.after)
		svc := ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: func() time.Time { return f.now }, Timeout: time.Millisecond})
		rep, err := svc.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := f.st.Get(ctx, r.ID)
		if (got.State == ledger.StatePending) != c.inFlight {
			t.Fatalf("%s after its intent: state %s (report %+v), want in flight %v", c.after, got.State, rep, c.inFlight)
		}
	}
}

// TestHeartbeatDuringACall: the owner beats into its row while the call
// lasts, so that a process on another host can tell it lives.
func TestHeartbeatDuringACall(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	clock := make(chan time.Time, 1)
	clock <- t0
	now := func() time.Time {
		c := <-clock
		clock <- c
		return c
	}
	f.svc = ledger.New(f.st, []domain.Provider{f.fake}, ledger.Options{Now: now, Timeout: 10 * time.Second, Heartbeat: time.Millisecond})
	release, done := bookInFlight(t, f, "")
	<-clock
	clock <- t0.Add(time.Minute)
	var beat time.Time
	for i := 0; i < 500 && !beat.Equal(t0.Add(time.Minute)); i++ {
		time.Sleep(2 * time.Millisecond)
		rows := listRows(t, f.st)
		beat = rows[0].Heartbeat
	}
	close(release)
	<-done
	if !beat.Equal(t0.Add(time.Minute)) {
		t.Fatalf("heartbeat %v, want it moved to the clock's %v during the call", beat, t0.Add(time.Minute))
	}
}

// TestMadeBeforeFoundAtTheCloud: the ledger was lost (an
// emptied file, set aside), and the same block was bought again. Before
// buying, the provider is asked for a reservation already made from the
// offering — by its tags, or by its terms where it lists none — and the
// ledger row is re-created instead.
func TestMadeBeforeFoundAtTheCloud(t *testing.T) {
	ctx := context.Background()
	for _, byTags := range []bool{true, false} {
		name := "by tags"
		if !byTags {
			name = "by terms"
		}
		t.Run(name, func(t *testing.T) {
			first := newFixture(t, "", "aws", ledger.Budget{})
			first.search(t)
			bought, err := first.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap", Actor: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			// A new, empty ledger over the same cloud.
			g := newFixture(t, "", "aws", ledger.Budget{})
			var p domain.Provider = first.fake
			if !byTags {
				p = noRecords{first.fake}
			}
			g.svc = ledger.New(g.st, []domain.Provider{p}, ledger.Options{Now: func() time.Time { return g.now }, Timeout: time.Second})
			g.search(t)
			_, err = g.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
			if !errors.Is(err, ledger.ErrDuplicate) || !strings.Contains(err.Error(), "already bought") {
				t.Fatalf("buying again what the cloud shows bought: %v", err)
			}
			if n := first.fake.Calls("Book"); n != 1 {
				t.Fatalf("%d purchases, want 1", n)
			}
			rows := listRows(t, g.st)
			if len(rows) != 1 || rows[0].ProviderRef != "cr-cb-cheap" || rows[0].State != ledger.StateScheduled || rows[0].IdemKey != "cb-cheap" || rows[0].Note == "" {
				t.Fatalf("re-created row %+v", rows)
			}
			if byTags && (rows[0].ID != bought.Row.ID || rows[0].Actor != "alice") {
				t.Fatalf("re-created row %s by %q: want the tagged row id %s by alice", rows[0].ID, rows[0].Actor, bought.Row.ID)
			}
			// The row holds the offering now: plain duplicate from here.
			if _, err := g.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"}); !errors.Is(err, ledger.ErrDuplicate) {
				t.Fatalf("again: %v", err)
			}
		})
	}
	t.Run("look-up fails", func(t *testing.T) {
		f := newFixture(t, "", "aws", ledger.Budget{})
		f.search(t)
		f.fake.ListHook = func(context.Context) error { return errors.New("RequestLimitExceeded") }
		_, err := f.svc.Book(ctx, ledger.BookRequest{OfferingID: "cb-cheap"})
		if err == nil || !strings.Contains(err.Error(), "could not check") || f.fake.Calls("Book") != 0 {
			t.Fatalf("blind purchase: %v", err)
		}
		noRows(t, f.st)
	})
}

// noRecords is a provider that lists no records: only its Booker and
// Provider methods show.
type noRecords struct{ f *ledgertest.Fake }

func (n noRecords) Name() string                { return n.f.Name() }
func (n noRecords) Describe() domain.Descriptor { return n.f.Describe() }
func (n noRecords) Fetch(ctx context.Context, req domain.FetchRequest, sink domain.Sink) error {
	return n.f.Fetch(ctx, req, sink)
}
func (n noRecords) FindOfferings(ctx context.Context, q domain.OfferingQuery) ([]domain.Offering, error) {
	return n.f.FindOfferings(ctx, q)
}
func (n noRecords) Book(ctx context.Context, req domain.BookRequest) (domain.Booking, error) {
	return n.f.Book(ctx, req)
}
func (n noRecords) FindBooking(ctx context.Context, req domain.BookRequest) (*domain.Booking, error) {
	return n.f.FindBooking(ctx, req)
}

// TestFailedRecordDoesNotBlockAPurchase: a record of a purchase the
// cloud refused (failed) holds nothing: the offering is bought.
func TestFailedRecordDoesNotBlockAPurchase(t *testing.T) {
	f := newFixture(t, "", "aws", ledger.Budget{})
	f.search(t)
	f.fake.AddRecord(domain.CloudRecord{Kind: ledger.KindBlock, Ref: "01OLD", OfferingID: "cb-cheap", ProviderRef: "cr-failed",
		Provider: "aws", State: ledger.StateFailed, CreatedAt: t0})
	res, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil || res.Row.State != ledger.StateScheduled || f.fake.Calls("Book") != 1 {
		t.Fatalf("%v, %+v", err, res.Row)
	}
}

// TestCallLockLastsTheCallOnly: once a purchase returns, its call is
// over: were its row still pending (its outcome could not be written),
// every other process would see it abandoned at once, not when this
// process exits.
func TestCallLockLastsTheCallOnly(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir, "aws", ledger.Budget{})
	f.search(t)
	res, err := f.svc.Book(context.Background(), ledger.BookRequest{OfferingID: "cb-cheap"})
	if err != nil {
		t.Fatal(err)
	}
	other := newFixture(t, dir, "aws", ledger.Budget{})
	r := res.Row
	r.State = ledger.StatePending
	if l, why := other.st.CallLiveness(r, f.now); l != ledger.OwnerGone {
		t.Fatalf("after the purchase returned its call is %v (%s), want gone", l, why)
	}
}
