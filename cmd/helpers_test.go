package cmd

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// simDayTurns are the moments of the UTC day at which the simulated
// market's capacity blocks change: at 00:00 every one is priced anew (a
// block's price counts its lead time from today's date), and at 11:30 the
// day's blocks start and are no longer sold.
var simDayTurns = []time.Duration{0, 11*time.Hour + 30*time.Minute}

// clearOfSimDayTurns makes a test that searches the simulated market's
// blocks and then buys (or dry-runs) what it found run after one of
// simDayTurns rather than across it: a purchase across 00:00 UTC is
// refused for terms changed since the search, and one across 11:30 may
// find its block started. The commands read the wall clock and take no
// other, so a test that starts less than simTurnMargin before a turn
// waits it out (a wait of at most that, in two such spans a day).
func clearOfSimDayTurns(t *testing.T) {
	t.Helper()
	if wait := simTurnWait(time.Now()); wait > 0 {
		t.Logf("waiting %s for a turn of the simulated market's day (00:00 or 11:30 UTC) to pass", wait.Round(time.Millisecond))
		time.Sleep(wait + time.Second)
	}
}

// simTurnMargin bounds how long a test of clearOfSimDayTurns takes from
// its search to its purchase: under a second here, far more on a loaded
// machine under -race.
const simTurnMargin = 30 * time.Second

// simTurnWait is how long from now until the next of simDayTurns when
// that is at most simTurnMargin; else 0.
func simTurnWait(now time.Time) time.Duration {
	now = now.UTC()
	day := now.Truncate(24 * time.Hour)
	for _, at := range simDayTurns {
		for _, turn := range []time.Time{day.Add(at), day.Add(24*time.Hour + at)} {
			if wait := turn.Sub(now); wait > 0 && wait <= simTurnMargin {
				return wait
			}
		}
	}
	return 0
}

func TestSimTurnWait(t *testing.T) {
	at := func(h, m, s int) time.Time { return time.Date(2026, 12, 31, h, m, s, 0, time.UTC) }
	for _, c := range []struct {
		now  time.Time
		want time.Duration
	}{
		{at(23, 59, 45), 15 * time.Second},
		{at(23, 59, 30), 30 * time.Second},
		{at(23, 59, 29), 0},
		{at(0, 0, 0), 0},
		{at(0, 0, 1), 0},
		{at(11, 29, 31), 29 * time.Second},
		{at(11, 29, 0), 0},
		{at(11, 30, 0), 0},
		{at(15, 0, 0), 0},
		// The same moments in another zone.
		{at(23, 59, 50).In(time.FixedZone("NPT", 5*3600+45*60)), 10 * time.Second},
	} {
		if got := simTurnWait(c.now); got != c.want {
			t.Errorf("at %s: wait %v, want %v", c.now.Format(time.RFC3339), got, c.want)
		}
	}
}

// The CLI's confirmation takes y as the TUI's does, and yes, in any case
// (it wanted exactly "yes" once); anything else cancels.
func TestConfirmTakesYOrYesInAnyCase(t *testing.T) {
	for _, c := range []struct {
		answer string
		yes    bool
	}{
		{"y\n", true}, {"Y\n", true}, {"yes\n", true}, {"YES\n", true}, {" Yes \n", true},
		{"n\n", false}, {"no\n", false}, {"\n", false}, {"yess\n", false}, {"y es\n", false}, {"ok\n", false},
	} {
		tty, closeTTY := answeredTTY(t, c.answer)
		var errOut bytes.Buffer
		e := &env{stdin: tty, errOut: &errOut}
		err := e.confirm("book", "buy it for $10.00")
		closeTTY()
		if (err == nil) != c.yes {
			t.Errorf("answer %q: err %v, want confirmed %v", c.answer, err, c.yes)
		}
		if !strings.HasPrefix(errOut.String(), "Type yes to buy it for $10.00 (y/yes") {
			t.Errorf("prompt %q", errOut.String())
		}
	}
}

// openTTY opens a pseudo-terminal, draining its echo; it skips the test
// where there is none.
func openTTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, ptm) }()
	return ptm, tty
}

// answeredTTY is a pseudo-terminal on which answer has been typed.
func answeredTTY(t *testing.T, answer string) (tty *os.File, closeTTY func()) {
	t.Helper()
	ptm, tty := openTTY(t)
	if _, err := ptm.Write([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	return tty, func() { tty.Close(); ptm.Close() }
}
