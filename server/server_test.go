package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/colorprofile"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

func TestMarketAppearsAndSessionUnsubscribes(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "alice@laptop")
	r := newRig(t, line+"\n", rigOptions{})
	c := mustDial(t, r.addr(), k)
	tm := openTerm(t, c, 100, 30, nil)
	tm.WaitText(t, "SIMULATED MARKET")
	tm.WaitText(t, "role=viewer")

	info := <-r.infos
	if info.Role != RoleViewer || info.Comment != "alice@laptop" {
		t.Errorf("session info = role %q comment %q, want viewer alice@laptop", info.Role, info.Comment)
	}
	fp := gossh.FingerprintSHA256(k.PublicKey())
	if info.Fingerprint != fp || info.Actor != "ssh:"+fp+" alice@laptop" {
		t.Errorf("fingerprint %q actor %q, want %q and ssh:%s alice@laptop", info.Fingerprint, info.Actor, fp, fp)
	}
	if info.Width != 100 || info.Height != 30 || info.Term != "xterm-256color" {
		t.Errorf("pty %dx%d %q, want 100x30 xterm-256color", info.Width, info.Height, info.Term)
	}
	if info.ColorProfile != colorprofile.ANSI256 || info.NoColor {
		t.Errorf("profile %v no_color %v, want ANSI256 from TERM=xterm-256color", info.ColorProfile, info.NoColor)
	}
	if n := r.hub.Subscribers(); n != 1 {
		t.Errorf("hub subscribers with one session = %d, want 1", n)
	}

	tm.Press(t, "q")
	if st := tm.ExitStatus(t); st != 0 {
		t.Errorf("exit status after q = %d, want 0", st)
	}
	eventually(t, "the session's subscription ends", func() bool { return r.hub.Subscribers() == 0 })
	eventually(t, "the server forgets the session", func() bool { return r.srv.Sessions() == 0 })
}

func TestUnknownKeyRefused(t *testing.T) {
	_, line := testutil.SSHKey(t, "", "listed")
	stranger, _ := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	if _, err := dial(r.addr(), stranger); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("dial with a key not in the file: err = %v, want unable to authenticate", err)
	}
	if r.srv.Sessions() != 0 || len(r.infos) != 0 {
		t.Error("a refused key got a session")
	}
}

func TestOnlyPublicKeyAuthOffered(t *testing.T) {
	_, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	var offered []string
	passwordAsked := false
	_, err := gossh.Dial("tcp", r.addr(), &gossh.ClientConfig{
		User: "tester",
		Auth: []gossh.AuthMethod{
			gossh.PasswordCallback(func() (string, error) { passwordAsked = true; return "hunter2", nil }),
			gossh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) {
				passwordAsked = true
				return nil, nil
			}),
		},
		AuthCallback: func(ctx *gossh.ClientAuthContext) (gossh.AuthMethod, error) {
			if offered == nil {
				offered = ctx.AllowedMethods
			}
			return nil, nil
		},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		Timeout:         waitFor,
	})
	if err == nil {
		t.Fatal("password client logged in")
	}
	if !slices.Equal(offered, []string{"publickey"}) {
		t.Errorf("server offers %v, want only [publickey]", offered)
	}
	if passwordAsked {
		t.Error("the client was asked for a password or keyboard-interactive answer")
	}
}

func TestViewerCannotBookBookerCan(t *testing.T) {
	viewer, vline := testutil.SSHKey(t, "", "attendee")
	byOption, oline := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker"`, "organizer")
	byComment, cline := testutil.SSHKey(t, "", "oncall gpumarket-role=booker")
	byConfig, fline := testutil.SSHKey(t, "", "lead")
	r := newRig(t, strings.Join([]string{vline, oline, cline, fline}, "\n")+"\n", rigOptions{
		roles: map[string]string{gossh.FingerprintSHA256(byConfig.PublicKey()): "booker"},
	})
	addr := r.addr()

	v := openTerm(t, mustDial(t, addr, viewer), 80, 24, nil)
	v.WaitText(t, "SIMULATED MARKET")
	v.Press(t, "b")
	v.WaitText(t, "READ-ONLY-SESSION")
	if n := r.booker.calls.Load(); n != 0 {
		t.Fatalf("a viewer's b made %d purchases, want 0", n)
	}

	for i, tc := range []struct {
		key     gossh.Signer
		comment string
	}{{byOption, "organizer"}, {byComment, "oncall"}, {byConfig, "lead"}} {
		b := openTerm(t, mustDial(t, addr, tc.key), 80, 24, nil)
		b.WaitText(t, "role=booker")
		b.Press(t, "b")
		b.WaitText(t, "BOOKED-BY-"+tc.comment)
		if n := r.booker.calls.Load(); n != int64(i+1) {
			t.Errorf("after %s booked: %d purchases, want %d", tc.comment, n, i+1)
		}
	}
}

func TestConfigRoleOverridesFile(t *testing.T) {
	k, line := testutil.SSHKey(t, `environment="GPUMARKET_ROLE=booker"`, "demoted")
	r := newRig(t, line+"\n", rigOptions{roles: map[string]string{gossh.FingerprintSHA256(k.PublicKey()): "viewer"}})
	tm := openTerm(t, mustDial(t, r.addr(), k), 80, 24, nil)
	tm.WaitText(t, "role=viewer")
}

func TestNoPTY(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	c := mustDial(t, r.addr(), k)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	tm := testutil.StartShell(t, sess, waitFor)
	if st := tm.ExitStatus(t); st != 1 {
		t.Errorf("exit status without a PTY = %d, want 1", st)
	}
	if got := tm.Stderr(); !strings.Contains(got, "gpumarket needs a terminal: connect with ssh -t") {
		t.Errorf("stderr = %q, want the needs-a-terminal message", got)
	}
	if len(r.infos) != 0 {
		t.Error("a model was built for a session without a terminal")
	}
}

func TestWindowResize(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	tm := openTerm(t, mustDial(t, r.addr(), k), 80, 24, nil)
	tm.WaitText(t, "cols=80")
	if err := tm.Sess.WindowChange(40, 132); err != nil {
		t.Fatal(err)
	}
	tm.WaitText(t, "cols=132")
}

func TestColourProfileFromClient(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	c := mustDial(t, r.addr(), k)
	openTerm(t, c, 80, 24, map[string]string{"NO_COLOR": "1"}).WaitText(t, "SIMULATED MARKET")
	if info := <-r.infos; !info.NoColor || info.ColorProfile != colorprofile.ASCII {
		t.Errorf("with NO_COLOR: no_color %v profile %v, want true ASCII", info.NoColor, info.ColorProfile)
	}
	openTerm(t, c, 80, 24, map[string]string{"COLORTERM": "truecolor"}).WaitText(t, "SIMULATED MARKET")
	if info := <-r.infos; info.NoColor || info.ColorProfile != colorprofile.TrueColor {
		t.Errorf("with COLORTERM=truecolor: no_color %v profile %v, want false TrueColor", info.NoColor, info.ColorProfile)
	}
}

func TestPanicEndsOnlyThatSession(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	c := mustDial(t, r.addr(), k)
	calm := openTerm(t, c, 80, 24, nil)
	calm.WaitText(t, "SIMULATED MARKET")
	doomed := openTerm(t, c, 80, 24, nil)
	doomed.WaitText(t, "SIMULATED MARKET")
	doomed.Press(t, "P")
	if st := doomed.ExitStatus(t); st != 1 {
		t.Errorf("exit status after a panic = %d, want 1", st)
	}
	doomed.WaitStderr(t, "internal error")

	calm.Press(t, "x")
	calm.WaitText(t, "typed=x")
	late := openTerm(t, mustDial(t, r.addr(), k), 80, 24, nil)
	late.WaitText(t, "SIMULATED MARKET")
}

func TestMaxSessions(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{maxSessions: 2})
	c := mustDial(t, r.addr(), k)
	for range 2 {
		openTerm(t, c, 80, 24, nil).WaitText(t, "SIMULATED MARKET")
	}
	third := openTerm(t, c, 80, 24, nil)
	if st := third.ExitStatus(t); st != 1 {
		t.Errorf("exit status of the session over the cap = %d, want 1", st)
	}
	if got := third.Stderr(); !strings.Contains(got, "gpumarket: the server is full: it allows 2 sessions at once; try again later") {
		t.Errorf("stderr = %q, want the server-is-full message", got)
	}
	if n := len(r.infos); n != 2 {
		t.Errorf("%d models built, want 2: none for the refused session", n)
	}
	if n := r.hub.Subscribers(); n != 2 {
		t.Errorf("hub subscribers %d, want 2", n)
	}
}

func TestIdleTimeout(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{idle: 300 * time.Millisecond, interval: 20 * time.Millisecond})
	tm := openTerm(t, mustDial(t, r.addr(), k), 80, 24, nil)
	tm.WaitText(t, "SIMULATED MARKET")
	// The market keeps redrawing (20ms polls), yet without a keypress the
	// session ends: output is not activity.
	if st := tm.ExitStatus(t); st != 0 {
		t.Errorf("exit status after idling = %d, want 0", st)
	}
	tm.WaitStderr(t, "closed after 300ms without input")
	eventually(t, "the idle session's subscription ends", func() bool { return r.hub.Subscribers() == 0 })
}

func TestShutdownTellsSessionsAndDrains(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	var drained sync.WaitGroup
	drained.Add(1)
	r := newRig(t, line+"\n", rigOptions{drain: func(context.Context) error { drained.Done(); return nil }})
	c := mustDial(t, r.addr(), k)
	a := openTerm(t, c, 80, 24, nil)
	b := openTerm(t, c, 80, 24, nil)
	a.WaitText(t, "SIMULATED MARKET")
	b.WaitText(t, "SIMULATED MARKET")

	r.cancel() // what SIGTERM does in cmd/serve.go
	for _, tm := range []*testutil.Term{a, b} {
		tm.WaitStderr(t, "server shutting down")
		tm.ExitStatus(t)
	}
	select {
	case err := <-r.serveCh:
		r.serveCh <- err // for the cleanup
		if err != nil {
			t.Errorf("Serve after a graceful shutdown = %v, want nil", err)
		}
	case <-time.After(waitFor):
		t.Fatal("Serve did not return after its context ended")
	}
	drained.Wait()
	if _, err := dial(r.addr(), k); err == nil {
		t.Error("a stopped server accepted a connection")
	}
}

func TestAuthorizedKeysReloadedWithoutRestart(t *testing.T) {
	first, line := testutil.SSHKey(t, "", "first")
	r := newRig(t, line+"\n", rigOptions{})
	late, lateLine := testutil.SSHKey(t, "", "late gpumarket-role=booker")
	if _, err := dial(r.addr(), late); err == nil {
		t.Fatal("a key not yet in the file logged in")
	}
	if err := os.WriteFile(r.akPath, []byte(line+"\n"+lateLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm := openTerm(t, mustDial(t, r.addr(), late), 80, 24, nil)
	tm.WaitText(t, "role=booker")

	// A file that stops parsing keeps the last good keys.
	if err := os.WriteFile(r.akPath, []byte(line+"\nnot a key at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustDial(t, r.addr(), first)
	mustDial(t, r.addr(), late)
}

func TestHostKeyCreatedOnceAndReused(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	dataDir := filepath.Join(t.TempDir(), "data")
	var seen []string
	for run := range 2 { // the same data dir across a restart
		r := newRig(t, line+"\n", rigOptions{dataDir: dataDir})
		var hostKey string
		c, err := gossh.Dial("tcp", r.addr(), &gossh.ClientConfig{
			User: "tester",
			Auth: []gossh.AuthMethod{gossh.PublicKeys(k)},
			HostKeyCallback: func(_ string, _ net.Addr, key gossh.PublicKey) error {
				hostKey = gossh.FingerprintSHA256(key)
				return nil
			},
			Timeout: waitFor,
		})
		if err != nil {
			t.Fatalf("run %d: dial: %v", run, err)
		}
		c.Close()
		seen = append(seen, hostKey)
		fi, err := os.Stat(filepath.Join(dataDir, HostKeyName))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("host key mode %04o, want 0600", fi.Mode().Perm())
		}
		r.stop()
	}
	if seen[0] == "" || seen[0] != seen[1] {
		t.Errorf("host key across a restart: %q then %q, want the same", seen[0], seen[1])
	}
}

// Fifty sessions cost the source what one does: the hub polls once per
// interval however many sessions watch, and every session gets the news.
func TestFiftySessionsOnePollPerInterval(t *testing.T) {
	const sessions = 50
	const interval = 100 * time.Millisecond
	k, line := testutil.SSHKey(t, "", "")
	var mu sync.Mutex
	var models []*testModel
	r := newRig(t, line+"\n", rigOptions{interval: interval})
	r.newModelHook(func(m *testModel) {
		mu.Lock()
		models = append(models, m)
		mu.Unlock()
	})
	addr := r.addr()
	clients := make([]*gossh.Client, sessions)
	for i := range clients {
		clients[i] = mustDial(t, addr, k)
		openTerm(t, clients[i], 80, 24, nil).WaitText(t, "SIMULATED MARKET")
	}
	if n := r.hub.Subscribers(); n != sessions {
		t.Fatalf("hub subscribers = %d, want %d", n, sessions)
	}
	// Let the source be polled several times with all fifty watching.
	start := r.source.fetches.Load()
	eventually(t, "five more polls", func() bool { return r.source.fetches.Load() >= start+5 })
	fetches := r.source.fetches.Load()
	elapsed := time.Since(r.started)
	if limit := int64(elapsed/interval) + 1; fetches > limit {
		t.Errorf("%d fetches in %s at one per %s: more than %d, the sessions multiplied the polls", fetches, elapsed, interval, limit)
	}
	newest := r.hub.Snapshot().Seq
	eventually(t, "every session has the newest snapshot", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range models {
			if m.lastSeq.Load() < newest {
				return false
			}
		}
		return len(models) == sessions
	})
	for _, c := range clients {
		c.Close()
	}
	eventually(t, "all subscriptions end", func() bool { return r.hub.Subscribers() == 0 })
	eventually(t, "all sessions end", func() bool { return r.srv.Sessions() == 0 })
}

// A key removed from the file while its connection is open cannot open
// another session on that connection.
func TestRevokedKeyCannotOpenSession(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "leaver")
	_, other := testutil.SSHKey(t, "", "stayer")
	r := newRig(t, line+"\n"+other+"\n", rigOptions{})
	c := mustDial(t, r.addr(), k)
	if err := os.WriteFile(r.akPath, []byte(other+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tm := openTerm(t, c, 80, 24, nil)
	if st := tm.ExitStatus(t); st != 1 {
		t.Errorf("session of a revoked key: exit %d, want 1", st)
	}
	tm.WaitStderr(t, "no longer in the authorized keys file")
	if len(r.infos) != 0 {
		t.Error("a session was built for a revoked key")
	}
}
