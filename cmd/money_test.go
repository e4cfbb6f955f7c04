package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/ledger/ledgertest"
)

// acme is a command line with one more provider, a ledgertest fake that
// lives across the commands of a test (a cloud does).
type acme struct {
	t    *testing.T
	fake *ledgertest.Fake
	cli  *cli
	dir  string
}

func newAcme(t *testing.T, extra ...domain.Provider) *acme {
	t.Helper()
	isolate(t)
	dir := filepath.Join(t.TempDir(), "data")
	t.Setenv("GPUMARKET_DATA_DIR", dir)
	fake := ledgertest.New("acme", ledgertest.Offering("acme", "acme-1", time.Now().Add(48*time.Hour), 48, 1, 3000))
	fake.SpotUSDHour = 10
	fake.Desc.IsRegion = func(r string) bool { return r == "us-east-1" }
	fake.Desc.RegionExample = "us-east-1"
	table := append(app.DefaultTable(), app.Row{Desc: fake.Desc,
		Build: func(context.Context, *app.Settings) (domain.Provider, error) { return fake, nil }})
	for _, p := range extra {
		table = append(table, app.Row{Desc: p.Describe(), Build: func(context.Context, *app.Settings) (domain.Provider, error) { return p, nil }})
	}
	return &acme{t: t, fake: fake, cli: &cli{table: table}, dir: dir}
}

func (a *acme) run(args ...string) (int, string, string) {
	a.t.Helper()
	var out, errOut bytes.Buffer
	code := a.cli.run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func (a *acme) search() {
	a.t.Helper()
	if code, _, errOut := a.run("offerings", "--provider", "acme", "--gpu", "H100", "--count", "1", "--duration", "48h", "-o", "json"); code != 0 {
		a.t.Fatalf("offerings: exit %d: %s", code, errOut)
	}
}

func (a *acme) ledger(args ...string) []map[string]any {
	a.t.Helper()
	code, out, errOut := a.run(append([]string{"ledger", "--provider", "acme", "-o", "json"}, args...)...)
	if code != 0 {
		a.t.Fatalf("ledger: exit %d: %s", code, errOut)
	}
	rows, _ := jsonRows(a.t, out)
	return rows
}

// TestBookYesRefusesChangedTerms: the cloud repriced a block
// to 3× after the search; `book --yes` sent the purchase at the cached
// price, and the budget and the ledger used it. Now it describes the
// offering again first: with --yes it exits 1 with the new terms and how
// to buy at them; run again, it buys at them, and the ledger says so.
func TestBookYesRefusesChangedTerms(t *testing.T) {
	a := newAcme(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("budget: {max_booking_usd: 20000, max_daily_usd: 50000}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GPUMARKET_CONFIG", cfg)
	a.search()
	a.fake.Reprice("acme-1", func(o *domain.Offering) { o.UpfrontUSD *= 3 })
	code, _, errOut := a.run("book", "acme-1", "--yes")
	if code != 1 || !strings.Contains(errOut, "The new terms") || !strings.Contains(errOut, "$9000.00") ||
		!strings.Contains(errOut, "run `gpumarket book acme-1 --yes` again") {
		t.Fatalf("book --yes at repriced terms: exit %d: %s", code, errOut)
	}
	if a.fake.Calls("Book") != 0 || len(a.ledger()) != 0 {
		t.Fatal("bought at terms never shown")
	}
	code, _, errOut = a.run("book", "acme-1", "--yes")
	rows := a.ledger()
	if code != 0 || len(rows) != 1 || rows[0]["committed_usd"] != 9000.0 {
		t.Fatalf("book again: exit %d, rows %v: %s", code, rows, errOut)
	}
	// Over the cap at the new price: refused at the new price.
	b := newAcme(t)
	b.search()
	b.fake.Reprice("acme-1", func(o *domain.Offering) { o.UpfrontUSD = 6000 })
	b.run("book", "acme-1", "--yes") // shows the new terms
	code, _, errOut = b.run("book", "acme-1", "--yes")
	if code != 1 || !strings.Contains(errOut, "$6000.00 is over budget.max_booking_usd $5000.00") || b.fake.Calls("Book") != 0 {
		t.Fatalf("over the default cap at the new price: exit %d: %s", code, errOut)
	}
}

// TestBookAsksAgainOnNewTerms: on a terminal, the new terms are shown
// and asked for; yes buys at them.
func TestBookAsksAgainOnNewTerms(t *testing.T) {
	a := newAcme(t)
	a.search()
	code, errOut := onTerminal(t, a.cli, []string{"book", "acme-1"}, func(n int, _ *promptWatch) string {
		if n == 1 {
			a.fake.Reprice("acme-1", func(o *domain.Offering) { o.UpfrontUSD += 49 })
		}
		return "yes"
	})
	rows := a.ledger()
	if code != 0 || strings.Count(errOut, "Type yes to buy it for $3049.00") != 1 || len(rows) != 1 || rows[0]["committed_usd"] != 3049.0 {
		t.Fatalf("exit %d, rows %v: %s", code, rows, errOut)
	}
}

// TestCountFlagsBounded: `fleet launch --target 4294967298`
// was sent as TotalTargetCapacity 2 and recorded as 4294967298 instances.
// Counts are bounded at the flag: exit 2 naming it and the limit.
func TestCountFlagsBounded(t *testing.T) {
	s := newSession(t, "")
	for _, args := range [][]string{
		{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "4294967298", "--yes"},
		{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "10001", "--dry-run"},
		{"offerings", "--gpu", "H100", "--count", "4294967298", "--duration", "48h"},
	} {
		code, _, errOut := s.run(args...)
		flag := args[len(args)-3]
		if args[0] == "offerings" {
			flag = "--count"
		}
		if code != 2 || !strings.Contains(errOut, flag) || !strings.Contains(errOut, "10000") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s and 10000", args, code, errOut, flag)
		}
	}
	if rows, _ := s.ledger(); len(rows) != 0 {
		t.Fatalf("rows written: %v", rows)
	}
}

// TestEmptyLedgerRefusedAndRebuilt: a 0-byte ledger was
// taken for a new one and the same block bought again. Every command now
// refuses it with how to rebuild; `ledger --rebuild` keeps it aside and
// re-creates the rows from the cloud's tags, under their old ids, once.
func TestEmptyLedgerRefusedAndRebuilt(t *testing.T) {
	a := newAcme(t)
	a.search()
	if code, _, errOut := a.run("book", "acme-1", "--yes"); code != 0 {
		t.Fatalf("book: %s", errOut)
	}
	before := a.ledger()
	path := filepath.Join(a.dir, ledger.FileName)
	for _, ext := range []string{"-wal", "-shm"} {
		os.Remove(path + ext)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ledger"}, {"offerings", "--provider", "acme", "--gpu", "H100", "--duration", "48h"}, {"book", "acme-1", "--yes"}} {
		code, _, errOut := a.run(args...)
		if code != 1 || !strings.Contains(errOut, "0 bytes") || !strings.Contains(errOut, "ledger --rebuild") {
			t.Errorf("%v on an empty ledger: exit %d: %s", args, code, errOut)
		}
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 0 {
		t.Fatalf("the empty ledger was changed: %v %v", st, err)
	}
	if a.fake.Calls("Book") != 1 {
		t.Fatal("bought again")
	}
	code, out, errOut := a.run("ledger", "--rebuild", "--provider", "acme", "-o", "json")
	rows, _ := jsonRows(t, out)
	if code != 0 || len(rows) != 1 || rows[0]["id"] != before[0]["id"] || rows[0]["provider_ref"] != before[0]["provider_ref"] ||
		!strings.Contains(errOut, "kept aside") || !strings.Contains(errOut, "re-created 1 row") {
		t.Fatalf("rebuild: exit %d, rows %v: %s", code, rows, errOut)
	}
	if aside, _ := filepath.Glob(path + ".unreadable-*"); len(aside) != 1 {
		t.Fatalf("the empty ledger was not kept aside: %v", aside)
	}
	if code, _, errOut := a.run("ledger", "--rebuild", "--provider", "acme"); code != 0 || !strings.Contains(errOut, "re-created 0 row(s); 1 already") {
		t.Fatalf("rebuild again: exit %d: %s", code, errOut)
	}
	if len(a.ledger()) != 1 {
		t.Fatal("a second rebuild duplicated rows")
	}
	// And the table shows why the row is there.
	if _, out, _ := a.run("ledger", "--provider", "acme"); !strings.Contains(out, "NOTE") || !strings.Contains(out, "re-created by") {
		t.Fatalf("table: %s", out)
	}
}

// TestLedgerTimeoutDoesNotJudgeOthers: `ledger --timeout 1s`
// marked a purchase that another process was still waiting on as
// unknown. Another handle on the file (another process) records a
// purchase an hour ago and is still in its call: the ledger leaves it
// pending, and takes it up only once the call is over.
func TestLedgerTimeoutDoesNotJudgeOthers(t *testing.T) {
	a := newAcme(t)
	a.search()
	st, err := ledger.Open(a.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	row, err := st.RecordIntent(ctx, ledger.Entry{Kind: ledger.KindBlock, Provider: "acme", IdemKey: "acme-1", State: ledger.StatePending,
		CreatedAt: time.Now().Add(-time.Hour), Request: []byte(`{"ID":"acme-1","Provider":"acme"}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := a.run("ledger", "--provider", "acme", "--timeout", "1s", "-o", "json")
	rows, _ := jsonRows(t, out)
	if code != 0 || len(rows) != 1 || rows[0]["state"] != "pending" || !strings.Contains(errOut, "in flight") {
		t.Fatalf("ledger while another process waits: exit %d, rows %v: %s", code, rows, errOut)
	}
	if a.fake.Calls("FindBooking") != 0 {
		t.Fatal("a purchase still in flight was looked up")
	}
	st.EndCall(row.ID) // its call is over, its outcome never written
	rows = a.ledger("--timeout", "1s")
	if len(rows) != 1 || rows[0]["state"] != "unknown" {
		t.Fatalf("after the call ended: %v", rows)
	}
}

// TestFleetDeleteIsANoteAndSimFleetsEnd: an ordinary delete
// was written to the error column, and a simulated fleet launched from the
// CLI showed "active" for ever. The delete is a note; a simulated fleet
// whose process ended is ended, with a note and an end.
func TestFleetDeleteIsANoteAndSimFleetsEnd(t *testing.T) {
	s := newSession(t, "")
	// An on-demand base: the simulated market places spot instances only
	// where its pools have capacity at the (wall-clock) launch, and a fleet
	// that launched nothing has failed; this one always runs.
	launch := []string{"fleet", "launch", "--region", "us-east-1", "--instance-types", "p5.48xlarge", "--target", "2", "--on-demand-base", "1", "--yes", "-o", "json"}
	code, out, errOut := s.run(launch...)
	if code != 0 {
		t.Fatalf("launch: %s", errOut)
	}
	first, _ := jsonRows(t, out)
	rows, _ := s.ledger()
	if len(rows) != 1 || rows[0]["state"] != "ended" || rows[0]["end"] == nil || rows[0]["error"] != nil {
		t.Fatalf("a simulated fleet whose process ended: %v", rows)
	}
	if code, out, _ := s.run("ledger"); code != 0 || !strings.Contains(out, "ended with the process") {
		t.Fatalf("the table does not say why it ended: %s", out)
	}
	code, out, errOut = s.run(append([]string{}, launch...)...)
	if code != 0 {
		t.Fatalf("launch: %s", errOut)
	}
	second, _ := jsonRows(t, out)
	code, out, errOut = s.run("fleet", "delete", second[0]["id"].(string), "--yes", "-o", "json")
	deleted, _ := jsonRows(t, out)
	if code != 0 || len(deleted) != 1 || deleted[0]["error"] != nil || deleted[0]["state"] != "deleted" {
		t.Fatalf("delete: exit %d %v: %s", code, deleted, errOut)
	}
	_ = first
}

// hangingFinder is a provider whose search never answers before its
// context ends.
type hangingFinder struct{}

func (hangingFinder) Name() string { return "hang" }
func (hangingFinder) Describe() domain.Descriptor {
	return domain.Descriptor{Name: "hang", Sells: []*domain.BookingTerms{domain.ReservationTerms}}
}
func (hangingFinder) Fetch(context.Context, domain.FetchRequest, domain.Sink) error { return nil }
func (hangingFinder) FindOfferings(ctx context.Context, _ domain.OfferingQuery) ([]domain.Offering, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("us-west-2: %w", ctx.Err())
}

// TestOfferingsOneProviderHangs: with one source
// hanging, `offerings` exited 1 after its timeout blaming "ledger keys:
// context deadline exceeded". It prints what the others gave, warns of
// the hung one, keeps the offerings for `book`, and exits 0.
func TestOfferingsOneProviderHangs(t *testing.T) {
	a := newAcme(t, hangingFinder{})
	start := time.Now()
	code, out, errOut := a.run("offerings", "--provider", "acme,hang", "--gpu", "H100", "--count", "1", "--duration", "48h", "--timeout", "1s", "-o", "json")
	rows, _ := jsonRows(t, out)
	if code != 0 || len(rows) != 1 || !strings.Contains(errOut, "gpumarket: warning: offerings: hang:") || strings.Contains(errOut, "ledger keys") {
		t.Fatalf("exit %d, rows %v: %s", code, rows, errOut)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("took %s", took)
	}
	if code, _, errOut := a.run("book", "acme-1", "--dry-run"); code != 0 {
		t.Fatalf("the answering provider's offering cannot be booked: %s", errOut)
	}
}

// TestLedgerOnReadOnlyDataDir: `ledger` could not read a
// ledger on a data dir it may not write. It lists it read-only, says it
// did not reconcile, and `ledger --rebuild` says it cannot. As root (who
// writes anywhere) the commands run in a copy of this test binary as
// nobody.
func TestLedgerOnReadOnlyDataDir(t *testing.T) {
	if args := os.Getenv(readOnlyChildEnv); args != "" {
		var out, errOut bytes.Buffer
		code := run(context.Background(), strings.Split(args, " "), strings.NewReader(""), &out, &errOut)
		fmt.Printf("exit=%d\n%s\nSTDERR\n%s", code, out.String(), errOut.String())
		return
	}
	s := newSession(t, "")
	id := s.search()[0]["id"].(string)
	if code, _, errOut := s.run("book", id, "--yes"); code != 0 {
		t.Fatal(errOut)
	}
	dir := os.Getenv("GPUMARKET_DATA_DIR")
	// Rows that ran, their usage read (and kept) while the dir was
	// writable.
	block, _ := seedLedger(t, dir)
	if code, _, errOut := s.run("usage", "-o", "json"); code != 0 {
		t.Fatal(errOut)
	}
	keptAt := func() time.Time {
		st, err := ledger.OpenReadOnly(filepath.Join(dir, ledger.FileName))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		_, at, ok, err := st.LoadUsage(context.Background(), block.ID)
		if !ok || err != nil {
			t.Fatalf("no usage kept for %s: %v", block.ID, err)
		}
		return at
	}
	wasKept := keptAt()
	base := filepath.Dir(dir)
	for p := base; p != "/" && p != "."; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(p, st.Mode().Perm()|0o055)
		}
	}
	os.Chmod(filepath.Join(dir, ledger.FileName), 0o644)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	bin := os.Args[0]
	if os.Geteuid() == 0 {
		// nobody may not run what root's go test built in its 0700 dir.
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(base, "cmd.test")
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runRO := func(args ...string) (int, string) {
		cmd := exec.Command(bin, "-test.run=^TestLedgerOnReadOnlyDataDir$")
		// The session's config dir is private (0700): nobody reads no
		// config, as a user without one would.
		cmd.Env = append(os.Environ(), readOnlyChildEnv+"="+strings.Join(args, " "), "HOME="+base, "XDG_CONFIG_HOME="+base)
		cmd.Dir = base
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		var code int
		fmt.Sscanf(string(out), "exit=%d", &code)
		return code, string(out)
	}
	code, out := runRO("ledger", "-o", "json")
	if code != 0 || !strings.Contains(out, `"id":`) || !strings.Contains(out, "read-only") || !strings.Contains(out, "nothing was reconciled") {
		t.Fatalf("ledger on a read-only data dir: exit %d: %s", code, out)
	}
	if code, out := runRO("ledger", "--rebuild"); code != 1 || !strings.Contains(out, "read-only") {
		t.Fatalf("rebuild on a read-only data dir: exit %d: %s", code, out)
	}
	// usage reads the rows and what is kept, and keeps nothing, without
	// a warning: a read-only ledger is not a failure to report.
	code, out = runRO("usage", "-o", "json")
	if code != 0 || !strings.Contains(out, block.ID) || strings.Contains(out, "could not be kept") {
		t.Fatalf("usage on a read-only data dir: exit %d: %s", code, out)
	}
	if at := keptAt(); !at.Equal(wasKept) {
		t.Errorf("the kept usage was read at %v, now %v: a read-only run saved it", wasKept, at)
	}
}

const readOnlyChildEnv = "GPUMARKET_CMD_READONLY_ARGS"

// A fleet the cloud took but launched nothing of (here no pool under the
// max price) is a failure: exit 1, one line saying why, and the ledger row
// failed with the cloud's message, never "launched".
func TestFleetThatLaunchedNothingExitsOne(t *testing.T) {
	s := newSession(t, "")
	code, out, errOut := s.run("fleet", "launch", "--region", "us-east-1", "--instance-types", "g6.xlarge", "--target", "2",
		"--max-price", "0.0001", "--yes", "-o", "json")
	if code != exitFailure || strings.Contains("\n"+errOut, "\nlaunched: ") || !strings.Contains(errOut, "gpumarket: fleet launch: not launched: ") ||
		!strings.Contains(errOut, "2 spot instances not launched") {
		t.Fatalf("exit %d, stderr %q: want 1 and why nothing was launched", code, errOut)
	}
	rows, _ := jsonRows(t, out)
	if len(rows) != 1 || rows[0]["state"] != "failed" || rows[0]["error"] == nil {
		t.Fatalf("printed rows %v: want the failed ledger row", rows)
	}
	ledger, _ := s.ledger()
	if len(ledger) != 1 || ledger[0]["state"] != "failed" || !strings.Contains(fmt.Sprint(ledger[0]["error"]), "not launched") {
		t.Errorf("ledger %v", ledger)
	}
	// Part of it launched (the on-demand base): it runs, exit 0, and a
	// warning says what did not launch and why.
	code, _, errOut = s.run("fleet", "launch", "--region", "us-east-1", "--instance-types", "g6.xlarge", "--target", "2",
		"--on-demand-base", "1", "--max-price", "0.0001", "--yes", "-o", "json")
	if code != 0 || !strings.Contains("\n"+errOut, "\nlaunched: ") || !strings.Contains(errOut, "warning: simulated fleet") ||
		!strings.Contains(errOut, "launched 1 of 2 instances; 1 spot instance not launched: no pool is under the max price") {
		t.Errorf("a partial launch: exit %d, stderr %q", code, errOut)
	}
}
