package cmd

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/app"
	"github.com/gpumarket/gpumarket/config"
	"github.com/gpumarket/gpumarket/domain"
	"github.com/gpumarket/gpumarket/internal/testutil"
	"github.com/gpumarket/gpumarket/ledger"
	"github.com/gpumarket/gpumarket/server"
)

// serveWait bounds the waits of the serve tests (a ceiling against a hung
// test, not a performance assertion).
const serveWait = 20 * time.Second

func TestServeUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "--authorized-keys"},
		{[]string{"serve", "--authorized-keys", "/nonexistent/ak"}, "--authorized-keys"},
		{[]string{"serve", "--authorized-keys", "/dev/null", "--listen", "2222"}, "--listen"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q, want exit 2 naming %s", tc.args, code, stderr, tc.want)
		}
	}
}

// Through the command: serve refuses to start on an
// authorized_keys file others could change, says which and how to fix
// it, and exits 1 (the command line was right; the file is not).
func TestServeRefusesUnsafeAuthorizedKeys(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, line := testutil.SSHKey(t, "", "alice")
	ak := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(ak, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ak, 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "serve", "--listen", freeAddr(t), "--authorized-keys", ak)
	if code != exitFailure || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line", code, stderr)
	}
	for _, w := range []string{ak, "writable by its group and others", "chmod go-w " + ak} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q lacks %q", stderr, w)
		}
	}
}

// TestServeRealTUI runs `gpumarket serve` in-process on the simulated
// market and connects two SSH clients: each gets the real TUI, a viewer's
// is read-only, their screens are their own, and a shutdown tells them.
func TestServeRealTUI(t *testing.T) {
	viewer, vline := testutil.SSHKey(t, "", "attendee")
	booker, bline := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker"`, "organizer")
	srv := startServe(t, vline+"\n"+bline+"\n")
	addr, cancel, exited, logs := srv.addr, srv.cancel, srv.exited, &srv.logs

	a := sshTerm(t, addr, viewer, 120, 40)
	a.WaitText(t, "SIMULATED MARKET")
	a.WaitText(t, "read-only")
	a.WaitText(t, "sort effective")
	b := sshTerm(t, addr, booker, 120, 40)
	b.WaitText(t, "SIMULATED MARKET")
	b.WaitText(t, "sort effective")
	if strings.Contains(b.Text(), "read-only") {
		t.Error("a booker's session says read-only")
	}

	// One session's sort is its own. The renderer redraws only the cells
	// that change, so each screen is read after a full redraw (a resize).
	b.Press(t, "s")
	b.WaitText(t, "$/GPU-h") // the changed cells of the status line: the key landed
	if err := b.Sess.WindowChange(40, 110); err != nil {
		t.Fatal(err)
	}
	b.WaitText(t, "sort $/GPU-h")
	if err := a.Sess.WindowChange(40, 110); err != nil {
		t.Fatal(err)
	}
	a.WaitText(t, "sort effective")

	cancel() // SIGTERM
	a.WaitStderr(t, "server shutting down")
	b.WaitStderr(t, "server shutting down")
	select {
	case code := <-exited:
		exited <- code // for the cleanup
		if code != 0 {
			t.Errorf("serve exit %d after a shutdown, want 0; log:\n%s", code, logs.String())
		}
	case <-time.After(serveWait):
		t.Fatal("serve did not return after its context ended")
	}
	for _, want := range []string{"session start", "role=viewer", "role=booker", "organizer"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the server log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestServeBookingRoles: over SSH, a viewer's booking key in the Blocks
// view spends nothing and says the session is read-only; a booker's books
// the block through the ledger, which records the key that did it.
func TestServeBookingRoles(t *testing.T) {
	clearOfSimDayTurns(t)
	viewer, vline := testutil.SSHKey(t, "", "attendee")
	booker, bline := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker"`, "organizer")
	srv := startServe(t, vline+"\n"+bline+"\n")
	ledgerRows := func() []ledger.Entry {
		st, err := ledger.Open(srv.dataDir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		rows, err := st.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}

	v := sshTerm(t, srv.addr, viewer, 120, 40)
	v.WaitText(t, "SIMULATED MARKET")
	v.Press(t, "\t\t")                           // Market → Chart → Blocks
	v.WaitText(t, "r searches with these terms") // a viewer searches when asked
	v.Press(t, "r")
	v.WaitText(t, "offerings at")
	v.Press(t, "b")
	v.WaitText(t, "read-only session")
	if rows := ledgerRows(); len(rows) != 0 {
		t.Fatalf("a viewer's b wrote %d ledger rows, want none: %+v", len(rows), rows)
	}

	b := sshTerm(t, srv.addr, booker, 120, 40)
	b.WaitText(t, "SIMULATED MARKET")
	b.Press(t, "\t\t")
	b.WaitText(t, "offerings at")
	b.Press(t, "b")
	b.WaitText(t, "Type y then enter to buy")
	b.Press(t, "y")
	b.Press(t, "\r")
	b.WaitText(t, "booked ")
	rows := ledgerRows()
	if len(rows) != 1 {
		t.Fatalf("after the booker's purchase the ledger has %d rows, want 1", len(rows))
	}
	want := server.Actor(gossh.FingerprintSHA256(booker.PublicKey()), "organizer")
	if r := rows[0]; r.Actor != want || r.State == ledger.StatePending || r.State == ledger.StateFailed {
		t.Errorf("ledger row actor %q state %q, want actor %q and a settled purchase", r.Actor, r.State, want)
	}
}

// servedCmd is `gpumarket serve` running in-process.
type servedCmd struct {
	addr    string
	dataDir string
	cancel  context.CancelFunc
	exited  chan int
	logs    testutil.Buffer
}

// startServe runs `gpumarket serve` on the simulated market (no budget
// caps) for the given authorized_keys content.
func startServe(t *testing.T, authorized string) *servedCmd {
	t.Helper()
	isolate(t)
	dir := t.TempDir()
	// serve refuses an authorized_keys file in a directory others may
	// write, which t.TempDir's can be under a umask of 002.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ak := filepath.Join(dir, "authorized_keys")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(ak, []byte(authorized), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("budget: {max_booking_usd: 0, max_daily_usd: 0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir, err := config.DataDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &servedCmd{addr: freeAddr(t), dataDir: dataDir, cancel: cancel, exited: make(chan int, 1)}
	go func() {
		s.exited <- run(ctx, []string{"serve", "--config", cfg, "--listen", s.addr, "--authorized-keys", ak},
			strings.NewReader(""), io.Discard, &s.logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.exited:
		case <-time.After(serveWait):
			t.Error("serve did not stop")
		}
	})
	return s
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// sshTerm dials addr (retrying while the server starts) and opens a
// shell with a PTY of w×h.
func sshTerm(t *testing.T, addr string, key gossh.Signer, w, h int) *testutil.Term {
	t.Helper()
	var c *gossh.Client
	var err error
	for deadline := time.Now().Add(serveWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err = gossh.Dial("tcp", addr, &gossh.ClientConfig{
			User: "tester", Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: serveWait,
		})
		var op *net.OpError
		if err == nil || !errors.As(err, &op) {
			break
		}
	}
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestPty("xterm-256color", h, w, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	return testutil.StartShell(t, sess, serveWait)
}

// The shutdown drain waits for a purchase an SSH session started until
// its outcome is recorded, ignores rows that are not the server's, and
// gives up at its bound naming what is still pending.
func TestDrainLedger(t *testing.T) {
	st, err := ledger.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	start := time.Now().Add(-time.Second)
	intent := func(actor, key string) ledger.Entry {
		r, err := st.RecordIntent(ctx, ledger.Entry{Kind: ledger.KindBlock, Provider: "sim", IdemKey: key,
			State: ledger.StatePending, Actor: actor}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	intent("alice@laptop", "local-one") // a local purchase: not the server's to wait for
	drain := app.DrainLedger(st, start)
	if err := drain(ctx); err != nil {
		t.Fatalf("drain with only a local row pending: %v", err)
	}

	row := intent("ssh:SHA256:abc organizer", "ssh-one")
	done := make(chan error, 1)
	go func() { done <- drain(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("drain returned (%v) while a session's purchase was pending", err)
	case <-time.After(300 * time.Millisecond): // it must still be waiting; no timing is asserted
	}
	row.State = ledger.StateScheduled
	if _, err := st.Update(ctx, row); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("drain after the outcome was recorded: %v", err)
		}
	case <-time.After(serveWait):
		t.Fatal("drain did not notice the recorded outcome")
	}

	stuck := intent("ssh:SHA256:def attendee", "ssh-two")
	bounded, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := drain(bounded); err == nil || !strings.Contains(err.Error(), stuck.ID) {
		t.Errorf("drain past its bound = %v, want an error naming row %s", err, stuck.ID)
	}
}

func TestSessionZone(t *testing.T) {
	if loc := sessionZone([]string{"TERM=xterm", "TZ=America/New_York"}); loc == nil || loc.String() != "America/New_York" {
		t.Errorf("TZ=America/New_York: %v", loc)
	}
	if loc := sessionZone([]string{"TZ=:Europe/Berlin"}); loc == nil || loc.String() != "Europe/Berlin" {
		t.Errorf("TZ=:Europe/Berlin: %v", loc)
	}
	for _, env := range [][]string{nil, {"TERM=xterm"}, {"TZ="}, {"TZ=Not/AZone"}} {
		if loc := sessionZone(env); loc != nil {
			t.Errorf("%q: %v, want the server's zone", env, loc)
		}
	}
}

// TestServedHubHoldsTheConfiguredWindow: the hub the SSH sessions share
// may hold the server's configured window and no more, whatever one
// session's w asks for; the local TUI's hub may still go to 90 days.
func TestServedHubHoldsTheConfiguredWindow(t *testing.T) {
	e, _, _ := testEnv(t, domain.Query{Window: 7 * 24 * time.Hour})
	served := newCLI().appOf(context.Background(), e)
	defer served.Close()
	served.SharedWindow = true
	h := served.HubOver(nil)
	h.Extend(domain.MaxWindow)
	if h.MaxWindow() != 7*24*time.Hour || h.Window() != 7*24*time.Hour {
		t.Errorf("served hub: max %v, window %v after a 90-day ask; want the configured 168h", h.MaxWindow(), h.Window())
	}
	local := newCLI().appOf(context.Background(), e)
	defer local.Close()
	if got := local.HubOver(nil).MaxWindow(); got != domain.MaxWindow {
		t.Errorf("local hub max %v, want %v", got, domain.MaxWindow)
	}
}
