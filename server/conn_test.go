package server

import (
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

// dialBanner dials and returns the auth banners the server sent (where a
// refused login learns why).
func dialBanner(addr string, signer gossh.Signer) (*gossh.Client, string, error) {
	var mu sync.Mutex
	var banners strings.Builder
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User:            "tester",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		BannerCallback: func(msg string) error {
			mu.Lock()
			banners.WriteString(msg)
			mu.Unlock()
			return nil
		},
		Timeout: waitFor,
	})
	mu.Lock()
	defer mu.Unlock()
	return c, banners.String(), err
}

// waitClosed waits until the server closes c's connection.
func waitClosed(t *testing.T, c *gossh.Client, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatalf("the server never closed %s", what)
	}
}

// places is the count of MaxSessions places in use, as the server sees it.
func (r *rig) places() int {
	r.srv.mu.Lock()
	defer r.srv.mu.Unlock()
	return r.srv.placesLocked(nil)
}

// An authenticated connection that opens no session (ssh -N)
// held nothing and lived for ever. Now it holds a place of max_sessions,
// so a full server says so to the next login, and it is closed after
// NoSessionTimeout, which frees the place. (The timers are fired by the
// test; TestSilentConnectionClosed runs a real one.)
func TestSessionlessConnectionHoldsAPlaceAndTimesOut(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{maxSessions: 1, fakeTimers: true})
	idle := mustDial(t, r.addr(), k) // like ssh -N: authenticated, no session
	if n := r.places(); n != 1 {
		t.Fatalf("places in use with one sessionless connection = %d, want 1", n)
	}
	c, banner, err := dialBanner(r.addr(), k)
	if err == nil {
		c.Close()
		t.Fatal("a second login was admitted while a sessionless connection held the only place")
	}
	if !strings.Contains(banner, "gpumarket: the server is full: it allows 1 sessions at once; try again later") {
		t.Errorf("the refused client was told %q, want the server-is-full message", banner)
	}
	r.timers.fireAll()
	waitClosed(t, idle, "a connection that never opened a session")
	if !strings.Contains(r.logs.String(), "closed a connection without a session") {
		t.Errorf("the log does not say why the connection was closed:\n%s", r.logs.String())
	}
	eventually(t, "the place is freed", func() bool { return r.places() == 0 })
	tm := openTerm(t, mustDial(t, r.addr(), k), 80, 24, nil)
	tm.WaitText(t, "SIMULATED MARKET")
}

// A session on a connection takes over that connection's place: with a
// cap of one, one client can still open its one session.
func TestSessionTakesOverItsConnectionsPlace(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{maxSessions: 1})
	c := mustDial(t, r.addr(), k)
	tm := openTerm(t, c, 80, 24, nil)
	tm.WaitText(t, "SIMULATED MARKET")
	if n := r.places(); n != 1 {
		t.Errorf("places with one session on one connection = %d, want 1", n)
	}
	second := openTerm(t, c, 80, 24, nil)
	if st := second.ExitStatus(t); st != 1 {
		t.Errorf("a second session over a cap of 1: exit %d, want 1", st)
	}
	second.WaitStderr(t, "server is full")
}

// A connection whose sessions have ended (ssh's ControlPersist keeps such
// connections) is sessionless again: it is closed after the timeout, and
// the timer does not fire while a session runs.
func TestConnectionClosedAfterItsLastSessionEnds(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{fakeTimers: true})
	c := mustDial(t, r.addr(), k)
	tm := openTerm(t, c, 80, 24, nil)
	tm.WaitText(t, "SIMULATED MARKET")
	r.timers.fireAll() // the timeout passes: a running session keeps its connection
	tm.Press(t, "x")
	tm.WaitText(t, "typed=x")
	tm.Press(t, "q")
	if st := tm.ExitStatus(t); st != 0 {
		t.Fatalf("exit %d after q", st)
	}
	eventually(t, "the server sees the session end", func() bool { return r.srv.Sessions() == 0 })
	r.timers.fireAll()
	waitClosed(t, c, "a connection whose last session ended")
}

// A session channel that never asks for a shell is no session: its
// connection still holds its place and is closed on time.
func TestChannelWithoutShellDoesNotKeepConnection(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{maxSessions: 1, fakeTimers: true})
	c := mustDial(t, r.addr(), k)
	if _, err := c.NewSession(); err != nil {
		t.Fatal(err)
	}
	if other, err := dial(r.addr(), k); err == nil {
		other.Close()
		t.Error("a login was admitted while a connection with a bare channel held the only place")
	}
	r.timers.fireAll()
	waitClosed(t, c, "a connection whose channel never started a shell")
}

// The handshake is bounded too: a client that connects and sends nothing
// is closed, and holds no place meanwhile. This test runs the real timer:
// nothing else in it depends on the clock.
func TestSilentConnectionClosed(t *testing.T) {
	_, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{maxSessions: 1, noSession: 300 * time.Millisecond})
	nc, err := net.Dial("tcp", r.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if n := r.places(); n != 0 {
		t.Errorf("places held by an unauthenticated connection = %d, want 0", n)
	}
	nc.SetReadDeadline(time.Now().Add(waitFor))
	buf := make([]byte, 512)
	for {
		if _, err := nc.Read(buf); err != nil {
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
				t.Fatal("the server never closed a connection that sent nothing")
			}
			break
		}
	}
}

// A command (with or without a terminal) or a subsystem is refused with a
// message and exit 1, and no TUI is built.
func TestCommandRefused(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	c := mustDial(t, r.addr(), k)
	for _, pty := range []bool{true, false} {
		sess, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if pty {
			if err := sess.RequestPty("xterm", 24, 80, gossh.TerminalModes{}); err != nil {
				t.Fatal(err)
			}
		}
		var stderr strings.Builder
		sess.Stderr = &stderr
		ran := make(chan error, 1)
		go func() { ran <- sess.Run("id") }()
		select {
		case err = <-ran:
		case <-time.After(waitFor):
			sess.Close()
			t.Fatalf("pty %v: ssh host id never ended (the TUI started instead?)", pty)
		}
		var ee *gossh.ExitError
		if !errors.As(err, &ee) || ee.ExitStatus() != 1 {
			t.Errorf("pty %v: ssh host id: err %v, want exit status 1", pty, err)
		}
		if !strings.Contains(stderr.String(), "runs only the gpumarket TUI, not commands") {
			t.Errorf("pty %v: stderr %q, want the no-commands message", pty, stderr.String())
		}
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestSubsystem("sftp"); err == nil {
		t.Error("the sftp subsystem was accepted")
	}
	if n := len(r.infos); n != 0 {
		t.Errorf("%d TUI models built for commands, want none", n)
	}
	if !strings.Contains(r.logs.String(), `refused a command`) || !strings.Contains(r.logs.String(), "command=id") {
		t.Errorf("the log does not record the refused command:\n%s", r.logs.String())
	}
}
