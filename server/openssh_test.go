package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

// The tests in this file drive the server with the real OpenSSH client,
// whose behaviour (what -N, -t and a command send; what it prints of a
// banner) is what users meet. They are skipped where ssh is not
// installed.

// openSSH returns the command ssh ARGS… against the rig, as key, with no
// user config, agent or known_hosts of the machine's.
func openSSH(t *testing.T, ctx context.Context, addr, key string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("the OpenSSH client (ssh) is not installed")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	base := []string{"-F", "/dev/null", "-p", port, "-i", key,
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "ConnectTimeout=10", "-l", "tester"}
	// OpenSSH reads options after the host too, up to the command.
	cmd := exec.CommandContext(ctx, bin, append(append(base, host), args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "TERM=xterm"}
	return cmd
}

// runOpenSSH runs ssh to its end (bounded by waitFor) and returns its
// exit code and what it printed.
func runOpenSSH(t *testing.T, addr, key string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	cmd := openSSH(t, ctx, addr, key, args...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("ssh %v did not end: %s", args, out)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("ssh %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// With the real client: `ssh -t host id` started the TUI.
func TestOpenSSHCommandRefused(t *testing.T) {
	key, line := newKeyFile(t, "", "")
	r := newRig(t, line+"\n", rigOptions{})
	// -tt: force the terminal as `ssh -t` does from a terminal (the test's
	// stdin is none).
	code, out := runOpenSSH(t, r.addr(), key, "-tt", "id")
	if code != 1 || !strings.Contains(out, "runs only the gpumarket TUI, not commands") {
		t.Errorf("ssh -tt host id: exit %d, output %q; want exit 1 and the no-commands message", code, out)
	}
	code, out = runOpenSSH(t, r.addr(), key, "id")
	if code != 1 || !strings.Contains(out, "not commands") {
		t.Errorf("ssh host id: exit %d, output %q; want exit 1 and the no-commands message", code, out)
	}
	if n := len(r.infos); n != 0 {
		t.Errorf("%d TUI models built for commands, want none", n)
	}
}

// With the real client: `ssh -N` held a connection for ever
// and outside max_sessions. Now it holds the only place (the next ssh is
// told the server is full) and is closed after the timeout (fired by
// the test), so ssh -N ends by itself.
func TestOpenSSHSessionlessConnectionCountsAndEnds(t *testing.T) {
	key, line := newKeyFile(t, "", "")
	r := newRig(t, line+"\n", rigOptions{maxSessions: 1, fakeTimers: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	holder := openSSH(t, ctx, r.addr(), key, "-N")
	var holderOut bytes.Buffer
	holder.Stdout, holder.Stderr = &holderOut, &holderOut
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- holder.Wait() }()
	eventually(t, "ssh -N authenticates and holds a place", func() bool { return r.places() == 1 })

	code, out := runOpenSSH(t, r.addr(), key, "-tt")
	if code != 255 || !strings.Contains(out, "gpumarket: the server is full: it allows 1 sessions at once; try again later") {
		t.Errorf("ssh while ssh -N holds the only place: exit %d, output %q; want 255 and the server-is-full banner", code, out)
	}
	r.timers.fireAll() // the no-session timeout passes
	select {
	case <-ended:
		if ctx.Err() != nil {
			t.Fatalf("ssh -N was never closed by the server: %s", holderOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("ssh -N was never closed by the server: %s", holderOut.String())
	}
	eventually(t, "the place is freed", func() bool { return r.places() == 0 })
}

// With the real client, as reported: a world-writable
// authorized_keys, a local user appends a key with the booker role and
// logs in. Refused; no session is built.
func TestOpenSSHWorldWritableAuthorizedKeysRefused(t *testing.T) {
	_, aline := testutil.SSHKey(t, "", "alice")
	r := newRig(t, aline+"\n", rigOptions{})
	mallory, mline := newKeyFile(t, `environment="GPUMARKET_ROLE=booker"`, "mallory")
	chmod(t, r.akPath, 0o666)
	f, err := os.OpenFile(r.akPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(mline + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out := runOpenSSH(t, r.addr(), mallory, "-tt")
	if code != 255 || !strings.Contains(out, "Permission denied (publickey)") {
		t.Errorf("intruder via a world-writable authorized_keys: exit %d, output %q; want 255 Permission denied", code, out)
	}
	if n := len(r.infos); n != 0 {
		t.Errorf("%d sessions built, want none", n)
	}
}
