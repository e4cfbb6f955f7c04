package server

import (
	"strings"
	"testing"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

const fullOfTwo = "gpumarket: the server is full: it allows 2 sessions at once; try again later"

// A client turned away by a server full of TUI sessions reads one line
// saying so, sent as an SSH banner before its authentication fails.
func TestFullServerBannerBeforeAuthFails(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	r := newRig(t, line+"\n", rigOptions{maxSessions: 2})
	for range 2 {
		openTerm(t, mustDial(t, r.addr(), k), 80, 24, nil).WaitText(t, "SIMULATED MARKET")
	}
	c, banner, err := dialBanner(r.addr(), k)
	if err == nil {
		c.Close()
		t.Fatal("a third connection was admitted over a cap of 2")
	}
	if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("the refused dial failed with %v, want an authentication failure", err)
	}
	if banner != fullOfTwo+"\r\n" {
		t.Errorf("banner %q, want exactly the one line %q", banner, fullOfTwo)
	}
}

// The same with the real OpenSSH client: it prints the banner, then its
// own "Permission denied".
func TestOpenSSHFullServerSaysSo(t *testing.T) {
	k, line := testutil.SSHKey(t, "", "")
	key, line2 := newKeyFile(t, "", "")
	r := newRig(t, line+"\n"+line2+"\n", rigOptions{maxSessions: 2})
	for range 2 {
		openTerm(t, mustDial(t, r.addr(), k), 80, 24, nil).WaitText(t, "SIMULATED MARKET")
	}
	code, out := runOpenSSH(t, r.addr(), key, "-tt")
	if code != 255 || !strings.Contains(out, fullOfTwo) {
		t.Errorf("ssh to a full server: exit %d, output %q; want 255 and %q", code, out, fullOfTwo)
	}
	if i, j := strings.Index(out, fullOfTwo), strings.Index(out, "Permission denied"); j >= 0 && i > j {
		t.Errorf("the banner came after the refusal: %q", out)
	}
}
