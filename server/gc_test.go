package server

import (
	"runtime/debug"
	"testing"

	"github.com/gpumarket/gpumarket/internal/testutil"
)

// serve collects at a quarter of the live heap unless GOGC says
// otherwise: an idle session then costs near what it holds, not twice it.
func TestServeCollectsEarlyUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	k, line := testutil.SSHKey(t, "", "")
	t.Setenv("GOGC", "")
	r := newRig(t, line+"\n", rigOptions{})
	mustDial(t, r.addr(), k).Close() // served: Serve has begun
	if p := debug.SetGCPercent(100); p != serveGCPercent {
		t.Errorf("GOGC unset: serving collects at %d %%, want %d", p, serveGCPercent)
	}
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80)
	r = newRig(t, line+"\n", rigOptions{})
	mustDial(t, r.addr(), k).Close()
	if p := debug.SetGCPercent(80); p != 80 {
		t.Errorf("with GOGC=80 set, serving changed it to %d", p)
	}
}
